"""run_probe's domain entry: one typed input model per probe (a discriminated union on
`probe`), one result model for all, and the table that maps a probe id to its module."""

from __future__ import annotations

import logging
import math
from types import ModuleType
from typing import Annotated, Any

from pydantic import Field

from mcp_server.verify.probes import collapse, control_diff, identity, leakage, mde, metric, seeds, trajectory
from mcp_server.verify.probes.refs import HostOpener, InputReader
from mcp_server.verify.probes.result import ProbeResult, digest, route

log = logging.getLogger(__name__)

ProbeInputs = Annotated[
    control_diff.ControlDiffInputs
    | trajectory.TrajectoryInputs
    | seeds.SeedVarianceInputs
    | mde.MdeInputs
    | leakage.LeakageInputs
    | collapse.CollapseInputs
    | metric.MetricSanityInputs
    | identity.CheckpointIdentityInputs,
    Field(discriminator="probe"),
]

PROBES: dict[str, ModuleType] = {
    "control_diff": control_diff,
    "trajectory": trajectory,
    "seed_variance": seeds,
    "mde": mde,
    "leakage": leakage,
    "collapse": collapse,
    "metric_sanity": metric,
    "checkpoint_identity": identity,
}


def finite_json(value: Any) -> Any:
    """NaN/inf become null: JSON has no spelling for them, and the reason text names them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


async def run_probe(inputs: ProbeInputs, open_host: HostOpener | None = None,
                    default_host: str = "local") -> ProbeResult:
    """Run one probe; files named in the inputs are read through `open_host`."""
    module = PROBES[inputs.probe]
    reader = InputReader(open_host, default_host)
    finding = await module.run(inputs, reader)
    log.debug("probe %s: %s", inputs.probe, finding.verdict)
    return ProbeResult(
        probe=inputs.probe, catalog=list(module.CATALOG), question=module.QUESTION,
        inputs_digest=digest(inputs.model_dump(mode="json"), reader.reads), inputs_read=reader.reads,
        measurements=finite_json(finding.measurements), verdict=finding.verdict, reason=finding.reason,
        disclosure=finding.disclosure, warnings=finding.warnings, next_probe=finding.next_probe,
        route=route(module.CATALOG[0]),
    )
