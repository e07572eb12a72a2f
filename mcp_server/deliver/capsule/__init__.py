"""Run capsules: `<project>/runs/<run-id>/`, sealed from a verified pull (seal.py, layout.py),
the evidence rows proposed from them (evidence_plan.py), and their reproduction (repro*.py)."""
