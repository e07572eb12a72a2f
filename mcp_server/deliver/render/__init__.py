"""Output built from the evidence: the generated LaTeX macros and tables, and the paged
reconcile report."""
