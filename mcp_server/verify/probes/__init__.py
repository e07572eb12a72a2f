"""VERIFY probes: typed inputs per probe, one ProbeResult, and run_probe to dispatch."""

from mcp_server.verify.probes.dispatch import PROBES, ProbeInputs, run_probe
from mcp_server.verify.probes.result import ProbeResult, Verdict

__all__ = ["PROBES", "ProbeInputs", "ProbeResult", "Verdict", "run_probe"]
