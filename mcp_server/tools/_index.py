"""Which tool module registers which tool, so a one-tool CLI call (`call TOOL`) imports only that
module instead of every tool's dependencies. tests/tools/test_tool_index.py keeps it true."""

from __future__ import annotations

TOOL_MODULES: dict[str, str] = {
    "verify_artifacts": "artifacts",
    "audit_box": "audit",
    "push_code": "code",
    "prune_code": "code",
    "capsule": "capsule",
    "fetch_data": "data",
    "inspect_run": "inspect",
    "search_references": "knowledge_tools",
    "cancel_run": "lifecycle",
    "wait_for_run": "lifecycle",
    "plot_run": "plots",
    "prepare_box": "prepare",
    "preflight": "preflight",
    "run_probe": "probes",
    "reap_vram": "reap",
    "reconcile_evidence": "reconcile",
    "launch_detached": "runs",
    "tail_logs": "runs",
    "list_runs": "runs",
    "aggregate_results": "runs",
    "plan_teardown": "teardown",
    "teardown": "teardown",
}
