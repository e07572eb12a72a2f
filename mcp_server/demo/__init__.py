"""`remote-gpu-trainer-mcp demo`: the whole lifecycle on this machine in one command, through a
real MCP client, with a bundled tiny CPU training script — audit, launch, live wait, curves,
verify, a statistics probe on the seeds, reconcile a report, teardown plan."""
