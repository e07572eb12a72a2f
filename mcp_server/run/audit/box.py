"""audit_box: the Phase-0 audit of one box in one remote round trip."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server.hosts.base import CommandResult, Host
from mcp_server.hosts.commands import check_path
from mcp_server.hosts.doctor_models import DoctorReport
from mcp_server.hosts.fallback_options import TransportRecord
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.paths import policy
from mcp_server.run.audit.cluster_checks import CLUSTER_CHECKS, on_login_node
from mcp_server.run.audit.gpu_checks import GPU_CHECKS
from mcp_server.run.audit.model import SEVERITY, Check, ExpectGpu, Facts, GpuReport, MountReport
from mcp_server.run.audit.probe import build_script, parse_sections, refused
from mcp_server.run.audit.session_checks import a35_logout
from mcp_server.run.audit.system_checks import SYSTEM_CHECKS, a10_bytes, a11_inodes

AUDIT_TIMEOUT_S = 35.0
CACHE_DIRS = ("~/.cache/huggingface", "~/.cache/pip", "~/.cache/torch")
ORDER = ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A7b", "A8", "A9", "A10", "A11", "A12", "A13",
         "A14", "A15", "A16", "A17", "A18", "A19", "A20", "A22", "A24", "A25", "A26", "A27", "A28", "A29",
         "A35", "A31", "A32", "A33", "A34"]


class SkipGroup(BaseModel):
    reason: str = Field(description="why these checks did not run (the same evidence for each)")
    ids: list[str]


class AuditResult(BaseModel):
    host: str
    profile: str
    audited_at: str = Field(description="UTC ISO time")
    verdict: str = Field(description="worst status among the checks: FAIL, WARN or PASS")
    headline: str = Field(default="", description="the verdict in one line, with what it does not cover "
                          "(a box with no GPU: the GPU checks were skipped)")
    counts: dict[str, int]
    checks: list[Check] = Field(description="with detail=problems (the default) only the WARN and FAIL checks")
    passed: list[str] = Field(default_factory=list, description="with detail=problems: the ids of the PASS checks")
    skipped: list[SkipGroup] = Field(default_factory=list,
                                     description="with detail=problems: the SKIP checks grouped by their reason")
    mounts: list[MountReport]
    gpus: list[GpuReport]
    round_trips: int = Field(description="remote round trips this audit used")
    duration_s: float
    authoritative: bool = Field(
        description="false when the kernel log was unreadable (hardware checks incomplete)")
    accrued_cost: str | None = Field(
        default=None, description="cost since first seen, from the inventory's hourly price")
    live_runs: int | None = Field(default=None, description="runs alive under the durable root")
    idle_warning: str | None = Field(
        default=None, description="the meter runs on a billed box with no live run and idle GPUs")
    connection: DoctorReport | None = Field(
        default=None, description="with detail=all on an SSH box: the connection doctor's steps")
    transport: TransportRecord | None = Field(
        default=None, description="set when the connection did not go direct: the Clash fallback, why, where")


def idle_warning(spec: HostSpec, result: AuditResult) -> str | None:
    """Warn (never act) when a billed box has no live run and every GPU is idle."""
    if not spec.profile.billed or result.live_runs != 0 or not result.gpus:
        return None
    if all((g.utilization_pct or 0) < 5 and (g.memory_used_mib or 0) < 1024 for g in result.gpus):
        return (f"the meter is running on an idle box: no live run and {len(result.gpus)} idle GPU(s). "
                "Pull and verify results, then plan a teardown (nothing was stopped).")
    return None


def mount_plan(spec: HostSpec, extra: list[str]) -> list[tuple[str, list[str]]]:
    """Paths to measure with their roles, deduplicated in order."""
    plan: dict[str, list[str]] = {}
    for path, role in [("/", "root"), ("/dev/shm", "shm"), (spec.durable_root, "durable"),
                       (spec.scratch_root, "scratch"), *((check_path(p, "paths[]"), "requested") for p in extra)]:
        plan.setdefault(path, []).append(role)
    return list(plan.items())


def caller_paths(plan: list[tuple[str, list[str]]], code_dir: str | None) -> list[tuple[str, str]]:
    """The paths a caller named, by argument, for the path policy (read: findings and df only):
    code_dir, and each extra path to measure that the audit does not measure anyway."""
    extra = [("paths", p) for p, roles in plan if roles == ["requested"]]
    return ([("code_dir", code_dir)] if code_dir else []) + extra


def _int(v: str) -> int | None:
    return int(v) if v.isdigit() else None


def parse_mounts(text: str, plan: list[tuple[str, list[str]]]) -> list[MountReport]:
    reports: list[MountReport] = []
    cur: MountReport | None = None
    for line in text.splitlines():
        if line.startswith("path="):
            fields = dict(part.split("=", 1) for part in line.split("\t") if "=" in part)
            want, roles = plan[len(reports)] if len(reports) < len(plan) else (fields.get("path", "?"), [])
            cur = MountReport(path=want, resolved=fields.get("path", want),
                              measured_at=fields.get("existing", want), roles=roles,
                              fstype=fields.get("fstype") or None)
            reports.append(cur)
        elif cur is not None and line.startswith(("bytes ", "inodes ")):
            kind, *cols = line.split()
            if len(cols) < 6:
                continue
            total, used, free = _int(cols[1]), _int(cols[2]), _int(cols[3])
            if kind == "bytes" and total is not None:
                cur.filesystem, cur.mount_point = cols[0], " ".join(cols[5:])
                cur.bytes_total, cur.bytes_avail = total * 1024, (free or 0) * 1024
                cur.bytes_used_pct = 100.0 * (used or 0) / max(1, (used or 0) + (free or 0))
            elif kind == "inodes" and total:
                cur.inodes_total, cur.inodes_free = total, free
                cur.inodes_used_pct = 100.0 * (used or 0) / total
    return reports


async def audit(
    host: Host, spec: HostSpec, *, ledger: Ledger | None = None, paths: list[str] | None = None,
    expect_gpu: ExpectGpu | None = None, python: str | None = None, code_dir: str | None = None,
    expect_files: dict[str, str] | None = None,
) -> AuditResult:
    """Run every single-box check (A1-A20, A22, A24-A29, A35; on a Slurm login node A31-A34) in one round trip."""
    plan = mount_plan(spec, paths or [])
    expect_files = expect_files or {}
    for p in expect_files:
        check_path(p, "expect_files key")
    named = caller_paths(plan, code_dir)
    scope = policy.anywhere(host, "the folders audit_box reads")
    script = build_script(
        mounts=[p for p, _ in plan], durable_root=spec.durable_root,
        python=python or spec.python, proxy_hook=spec.profile.proxy_hook,
        cache_dirs=list(CACHE_DIRS), code_dir=code_dir, expect_files=expect_files,
        slurm=spec.profile.kind == "slurm", confined=[p for _, p in named], scope=scope,
    )
    started = time.time()
    res = await host.run(script, timeout=AUDIT_TIMEOUT_S)
    refusal = refused(parse_sections(res.text).get("policy"), [w for w, _ in named], host=spec.name, scope=scope)
    if refusal is not None:
        raise refusal
    facts = gather_facts(res, spec, plan, started, expect_gpu=expect_gpu, expect_files=expect_files,
                         code_dir=code_dir)
    result = judge(facts, started)
    result.idle_warning = idle_warning(spec, result)
    if ledger is not None:
        record_audit(ledger, facts, result)
    return result


def gather_facts(
    res: CommandResult, spec: HostSpec, plan: list[tuple[str, list[str]]], started: float, *,
    expect_gpu: ExpectGpu | None, expect_files: dict[str, str], code_dir: str | None,
) -> Facts:
    """The probe's output parsed into the facts every check reads."""
    sections = parse_sections(res.text)
    mounts = parse_mounts(sections["mounts"].text if "mounts" in sections else "", plan)
    durable = next((m for m in mounts if "durable" in m.roles), None)
    ident = sections["ident"].text.splitlines() if "ident" in sections else []
    facts = Facts(
        spec=spec, sections=sections, mounts=mounts,
        durable_abs=durable.resolved if durable else spec.durable_root,
        expect_gpu=expect_gpu, expect_files=expect_files, code_dir=code_dir, local_epoch=started,
        probe_error="" if ident else f"exit {res.exit_status}: {res.err_text[-300:]}",
    )
    facts.load_gpus()
    return facts


def run_checks(facts: Facts) -> list[Check]:
    """Every check over the facts, in the Phase-0 table's order."""
    gpu = [fn(facts) for fn in GPU_CHECKS]
    checks: list[Check] = [fn(facts) for fn in SYSTEM_CHECKS] + [a35_logout(facts)]
    if facts.spec.profile.kind == "slurm":
        checks += on_login_node(gpu) + [fn(facts) for fn in CLUSTER_CHECKS]
    else:
        checks += gpu
    for m in facts.mounts:
        checks += [a10_bytes(m), a11_inodes(m)]
    checks.sort(key=lambda c: (ORDER.index(c.id) if c.id in ORDER else 99))
    return checks


def judge(facts: Facts, started: float) -> AuditResult:
    """The checks' verdicts and the box's summary as one result."""
    checks = run_checks(facts)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("PASS", "WARN", "FAIL", "SKIP")}
    verdict = max((c.status for c in checks), key=lambda s: SEVERITY[s], default="PASS")
    dmesg = facts.sec("dmesg")
    live = facts.kv("runs").get("live", "")
    gpus = facts.gpu_reports()
    verdict = "PASS" if verdict == "SKIP" else verdict
    return AuditResult(
        host=facts.spec.name, profile=facts.spec.profile.platform,
        audited_at=datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        verdict=verdict, headline=headline(verdict, counts, bool(gpus)), counts=counts, checks=checks,
        mounts=facts.mounts,
        gpus=gpus, round_trips=1, duration_s=round(time.time() - started, 3),
        authoritative=dmesg is not None and dmesg.rc == 0,
        live_runs=int(live) if live.isdigit() else None,
    )


def headline(verdict: str, counts: dict[str, int], has_gpu: bool) -> str:
    """"WARN: 1 WARN, 20 PASS; no GPU: 13 GPU checks skipped" — never a bare PASS on a box
    whose GPU checks could not run."""
    parts = ", ".join(f"{counts[s]} {s}" for s in ("FAIL", "WARN", "PASS") if counts.get(s))
    tail = f"; no GPU: {counts.get('SKIP', 0)} checks skipped" if not has_gpu else \
        (f"; {counts['SKIP']} skipped" if counts.get("SKIP") else "")
    return f"{verdict}: {parts or 'no checks'}{tail}"


def record_audit(ledger: Ledger, facts: Facts, result: AuditResult) -> None:
    """The audit's verdict and baselines (OOM counter, uptime) in the ledger."""
    cgroup = facts.kv("cgroup")
    ledger.record("audit", host=result.host, summary=f"{result.verdict} {result.counts}", data={
        "verdict": result.verdict, "counts": result.counts,
        "failed": [c.id for c in result.checks if c.status == "FAIL"],
        "oom_kill": cgroup.get("oom_kill"), "uptime_s": facts.text("uptime").split()[:1],
        "audited_at": result.audited_at,
    })


def problems_only(result: AuditResult) -> AuditResult:
    """The audit with full detail only where something is wrong: PASS checks by id, SKIP checks
    grouped by their reason (one line for "no GPU" instead of a dozen), WARN and FAIL whole."""
    groups: dict[str, list[str]] = {}
    for c in result.checks:
        if c.status == "SKIP":
            groups.setdefault(c.evidence, []).append(c.id)
    passed = list(dict.fromkeys(c.id for c in result.checks if c.status == "PASS"))
    return result.model_copy(update={
        "checks": [c for c in result.checks if c.status in ("WARN", "FAIL")], "passed": passed,
        "skipped": [SkipGroup(reason=reason, ids=ids) for reason, ids in groups.items()]})
