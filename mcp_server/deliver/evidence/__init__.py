"""The evidence layer as read from the box: EVIDENCE.json claims and rows (schema-checked),
the results.json files that make their values authoritative, run directories against their
provenance, figure folders against their sidecars, and the bounded reads behind all of it."""
