"""VP15 checkpoint determinism / identity: two checkpoints or runs compared by content hash
and by their declared seeds and determinism flags (SH6: identical bytes or a byte-identical
metric across runs that should differ is a stale-checkpoint tell)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.limits import ValueStr
from mcp_server.verify.probes.refs import DEFAULT_HASH_BYTES, MAX_HASH_BYTES, FileRef, InputReader
from mcp_server.verify.probes.result import ProbeFinding, next_probe

CATALOG = ["VP15", "SH6"]
QUESTION = "Are these two checkpoints/runs the same bytes, and were they meant to be?"
_HEX = r"^(?:[sS][hH][aA]256:)?[0-9a-fA-F]{64}$"
FlagValue = bool | int | float | ValueStr

# canonical knob -> (accepted key suffixes, predicate on the value)
_KNOBS: dict[str, tuple[tuple[str, ...], Callable[[FlagValue], bool]]] = {
    "deterministic_algorithms": (("use_deterministic_algorithms", "deterministic_algorithms"), lambda v: v is True),
    "cudnn_deterministic": (("cudnn_deterministic",), lambda v: v is True),
    "cudnn_benchmark_off": (("cudnn_benchmark",), lambda v: v is False),
    "worker_seeding": (("worker_init_fn", "worker_seeding", "seed_workers", "seed_worker"), bool),
    "cublas_workspace": (("cublas_workspace_config",), lambda v: str(v) in (":4096:8", ":16:8")),
}


class RunIdentity(BaseModel):
    """One side: a checkpoint file on a box and/or its sha256, plus what the run declared."""

    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, max_length=64)
    sha256: str | None = Field(default=None, pattern=_HEX, description="declared content hash")
    file: FileRef | None = Field(default=None, description="checkpoint on a box: hashed by streaming it")
    seed: int | None = None
    flags: dict[ValueStr, FlagValue] = Field(default_factory=dict, max_length=64, description="determinism flags "
                                        "as logged, e.g. {'torch.backends.cudnn.benchmark': false}")
    metric: float | None = Field(default=None, description="the run's headline metric, if any")


class CheckpointIdentityInputs(BaseModel):
    """Two sides and what you expect of them."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["checkpoint_identity"]
    a: RunIdentity
    b: RunIdentity
    expect: Literal["identical", "distinct"] = Field(description="identical: a rerun of the same config "
                                                     "(determinism check); distinct: two different runs")
    max_hash_bytes: int = Field(default=DEFAULT_HASH_BYTES, ge=1, le=MAX_HASH_BYTES)


def canonical_flag(key: str) -> str:
    k = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")
    for prefix in ("torch_backends_", "torch_", "backends_"):
        k = k.removeprefix(prefix)
    return k


def _as_logged(value: FlagValue) -> FlagValue:
    """'true'/'False'/'0' as written in a log read as booleans; anything else unchanged."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


class KnobAudit(BaseModel):
    """Which determinism knobs a run declared as required (`set`) and which it did not (`missing`)."""

    set: list[str]
    missing: list[str]
    achievable: bool


def knob_audit(seed: int | None, flags: dict[str, FlagValue]) -> KnobAudit:
    """Which determinism knobs are set as required; `missing` lists the rest."""
    canon = {canonical_flag(k): _as_logged(v) for k, v in flags.items()}
    ok: list[str] = []
    missing: list[str] = [] if seed is not None else ["seed"]
    for knob, (suffixes, good) in _KNOBS.items():
        hit = [v for k, v in canon.items() if any(k.endswith(s) for s in suffixes)]
        (ok if hit and good(hit[0]) else missing).append(knob)
    return KnobAudit(set=ok, missing=missing, achievable=not missing)


async def _hash(side: RunIdentity, reader: InputReader, cap: int) -> tuple[str | None, str | None]:
    """(hash to compare, mismatch note) — the file's bytes win over a declared hash."""
    declared = side.sha256.lower().removeprefix("sha256:") if side.sha256 else None
    if side.file is None:
        return declared, None
    found = (await reader.sha256(side.file, cap)).sha256
    if declared and declared != found:
        return found, f"{side.label}: declared sha256 {declared[:12]}... but the file hashes to {found[:12]}..."
    return found, None


async def run(inp: CheckpointIdentityInputs, reader: InputReader) -> ProbeFinding:
    ha, bad_a = await _hash(inp.a, reader, inp.max_hash_bytes)
    hb, bad_b = await _hash(inp.b, reader, inp.max_hash_bytes)
    same_bytes = None if ha is None or hb is None else ha == hb
    knobs_a, knobs_b = knob_audit(inp.a.seed, inp.a.flags), knob_audit(inp.b.seed, inp.b.flags)
    m: dict[str, Any] = {
        "expect": inp.expect, "sha256_a": ha, "sha256_b": hb, "same_bytes": same_bytes,
        "seed_a": inp.a.seed, "seed_b": inp.b.seed, "metric_a": inp.a.metric, "metric_b": inp.b.metric,
        "knobs_a": knobs_a.model_dump(), "knobs_b": knobs_b.model_dump(),
    }
    mismatch = [x for x in (bad_a, bad_b) if x]
    if mismatch:
        return ProbeFinding(measurements=m, verdict="bug", reason="; ".join(mismatch),
                            disclosure="A declared checkpoint hash does not match the file's bytes ("
                            + "; ".join(mismatch) + "): the record points at a different artifact than the one "
                            "on disk.",
                            next_probe=next_probe("VP13", "trust artifacts, not log lines", "re-verify the pull"))
    if inp.expect == "distinct":
        return _distinct(inp, m, same_bytes)
    return _identical(inp, m, same_bytes, sorted(set(knobs_a.missing) | set(knobs_b.missing)))


def _distinct(inp: CheckpointIdentityInputs, m: dict[str, Any], same_bytes: bool | None) -> ProbeFinding:
    a, b = inp.a.label, inp.b.label
    sh6 = next_probe("SH6", "stale checkpoint", "quarantine the run dir, retrain into a fresh one, and "
                     "assert the loaded checkpoint's epoch/timestamp is new")
    if same_bytes:
        return ProbeFinding(measurements=m, verdict="bug", reason="two runs that should differ have identical bytes",
                            disclosure=f"{a} and {b} are byte-identical checkpoints although they are different runs: "
                            "one of them loaded or saved a stale checkpoint, so its numbers belong to the other run.",
                            next_probe=sh6)
    if inp.a.metric is not None and inp.a.metric == inp.b.metric:
        return ProbeFinding(measurements=m, verdict="bug", reason=f"byte-identical metric {inp.a.metric} in two runs",
                            disclosure=f"{a} and {b} report exactly the same metric ({inp.a.metric}) although they are "
                            "different runs: the classic tell of a re-run that evaluated a stale checkpoint.",
                            next_probe=sh6)
    if same_bytes is None:
        return ProbeFinding(measurements=m, verdict="unverified", reason="no hash for one side",
                            disclosure=f"Identity of {a} and {b} is unverified: give both checkpoint files or hashes.")
    return ProbeFinding(measurements=m, verdict="clean", reason="different bytes, as expected",
                        disclosure=f"{a} and {b} are distinct checkpoints (different sha256).")


def _identical(inp: CheckpointIdentityInputs, m: dict[str, Any], same_bytes: bool | None,
               missing: list[str]) -> ProbeFinding:
    a, b = inp.a, inp.b
    flags_a = {canonical_flag(k): v for k, v in a.flags.items()}
    flags_b = {canonical_flag(k): v for k, v in b.flags.items()}
    differ = sorted(k for k in set(flags_a) | set(flags_b) if flags_a.get(k) != flags_b.get(k))
    if (a.seed is not None and b.seed is not None and a.seed != b.seed) or differ:
        what = [f"seed {a.seed} vs {b.seed}"] if a.seed != b.seed else []
        what += [f"flag {k}" for k in differ[:5]]
        return ProbeFinding(measurements=m | {"declared_differences": what}, verdict="confounded",
                            reason="the two runs do not declare the same config: " + ", ".join(what),
                            disclosure=f"{a.label} and {b.label} were meant to be identical but declare different "
                            f"settings ({', '.join(what)}): a difference between them is not a determinism finding.",
                            next_probe=next_probe("VP1", "control diff", "diff the resolved configs", "control_diff"))
    warns = [f"determinism knobs not declared: {', '.join(missing)}"] if missing else []
    if same_bytes:
        return ProbeFinding(measurements=m, verdict="clean", reason="identical bytes", warnings=warns,
                            disclosure=f"{a.label} and {b.label} are byte-identical: determinism achieved for "
                            "this pair.")
    if same_bytes is None:
        if a.metric is not None and b.metric is not None and a.metric != b.metric:
            return _stochastic(inp, m, missing, f"metrics differ ({a.metric} vs {b.metric})")
        return ProbeFinding(measurements=m, verdict="unverified", reason="no hash for one side", warnings=warns,
                            disclosure=f"Determinism of {a.label} vs {b.label} is unverified: give both checkpoint "
                            "files or hashes (a matching metric alone proves nothing).")
    return _stochastic(inp, m, missing, "the same config produced different bytes")


def _stochastic(inp: CheckpointIdentityInputs, m: dict[str, Any], missing: list[str], why: str) -> ProbeFinding:
    declared = ("determinism declared but not achieved" if not missing
                else f"determinism not fully declared (missing: {', '.join(missing)})")
    return ProbeFinding(measurements=m, verdict="stochastic", reason=f"{why}; {declared}",
                        disclosure=f"Reruns of one config differ ({why}); {declared}. Report a band over runs "
                        "rather than a single run's number.",
                        next_probe=next_probe("VP3", "reproduce with backup", "rerun into a new location and report "
                                              "the run-to-run band", "seed_variance"))
