"""The audit of a Slurm login node (profile `slurm`): the GPUs are on the compute nodes, so the
local GPU checks SKIP and these look at the cluster instead — partitions with GPU GRES (A31),
your pending jobs and why they wait (A32), your association and QOS limits (A33), and whether the
durable root sits on purged scratch (A34). Space and inodes of the project and scratch roots are
A10/A11, measured as on any box."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.run.audit.model import Check, Facts, MountReport, check

# Pending reasons that waiting alone does not clear: the request or the account must change.
STUCK = re.compile(r"^(QOSMax|AssocGrp|AssocMax|QOSGrp|ReqNodeNotAvail|PartitionDown|PartitionNodeLimit|"
                   r"PartitionTimeLimit|InvalidQOS|InvalidAccount|DependencyNeverSatisfied|JobHeld|BadConstraints|"
                   r"Nodes required for job are DOWN)")
DOWN = ("down", "drain", "drng", "fail", "inval", "maint", "unk")
SCRATCH_WORDS = re.compile(r"(^|/)(scratch|purge[a-z]*)(/|$)", re.IGNORECASE)
LOGIN_NODE = ("login node: the GPUs are on the compute nodes, which this audit does not reach; "
              "A31 lists the partitions that have them")


@dataclass
class Partition:
    name: str
    default: bool
    up: bool
    time_limit: str
    nodes: dict[str, int]
    gres: set[str]

    @property
    def has_gpus(self) -> bool:
        return any(g.startswith("gpu") for g in self.gres)

    @property
    def usable_nodes(self) -> int:
        """Nodes a job can land on: not down, drained, failed or in maintenance, and responding
        (sinfo marks a node that does not respond with a trailing `*`)."""
        return sum(n for state, n in self.nodes.items() if not state.startswith(DOWN) and not state.endswith("*"))

    def describe(self) -> str:
        states = ", ".join(f"{n} {s}" for s, n in sorted(self.nodes.items()))
        gres = ",".join(sorted(self.gres)) or "no GRES"
        return f"{self.name}{'*' if self.default else ''}: {'up' if self.up else 'DOWN'}, {states}, {gres}, " \
               f"limit {self.time_limit}"


def parse_sinfo(text: str) -> list[Partition]:
    """`sinfo -h -o '%P|%a|%l|%D|%t|%G'`: one line per partition and node state."""
    parts: dict[str, Partition] = {}
    for line in text.splitlines():
        f = line.split("|")
        if len(f) != 6 or not f[3].isdigit():
            continue
        name = f[0].rstrip("*")
        p = parts.setdefault(name, Partition(name, f[0].endswith("*"), f[1] == "up", f[2], {}, set()))
        p.nodes[f[4]] = p.nodes.get(f[4], 0) + int(f[3])
        p.gres |= {g for g in re.split(r",(?![^(]*\))", f[5]) if g and g != "(null)"}
    return list(parts.values())


def c1_partitions(f: Facts) -> Check:
    title = "Partitions with GPUs (sinfo)"
    sec = f.sec("sinfo")
    if sec is None or sec.rc != 0:
        return check("A31", title, "FAIL", f"sinfo did not answer (exit {sec.rc if sec else '?'}: "
                     f"{(sec.text if sec else '')[-200:]!r}): this host is not a working Slurm login node")
    parts = parse_sinfo(sec.text)
    want = f.spec.slurm.partition if f.spec.slurm else None
    ev = "; ".join(p.describe() for p in parts[:12]) or "no partition listed"
    if want and want not in {p.name for p in parts}:
        return check("A31", title, "FAIL", f"the inventory's partition {want!r} is not listed; {ev}", want)
    gpu = [p for p in parts if p.has_gpus and p.up and p.usable_nodes]
    if not gpu:
        return check("A31", title, "WARN", f"no partition that is up has GPU GRES on a usable node: a job asking "
                     f"for GPUs will wait or be refused; {ev}")
    chosen = next((p for p in parts if p.name == want), None)
    if chosen is not None and not chosen.has_gpus:
        return check("A31", title, "WARN", f"the inventory's partition {want!r} has no GPU GRES (GPU partitions: "
                     f"{', '.join(p.name for p in gpu)}); {ev}", want)
    return check("A31", title, "PASS", ev)


def c2_pending(f: Facts) -> Check:
    title = "Your pending jobs and why they wait"
    sec = f.sec("pending")
    if sec is None or sec.rc != 0:
        return check("A32", title, "SKIP", "squeue did not answer")
    jobs = [line.split("|", 2) for line in sec.text.splitlines() if line.count("|") >= 2]
    if not jobs:
        return check("A32", title, "PASS", "no pending job of yours")
    reasons: dict[str, int] = {}
    for _, reason, _ in jobs:
        reasons[reason] = reasons.get(reason, 0) + 1
    ev = f"{len(jobs)} pending: " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    stuck = [f"job {j} ({r}, partition {p})" for j, r, p in jobs if STUCK.match(r)]
    if stuck:
        return check("A32", title, "WARN", ev + "; waiting will not start " + ", ".join(stuck[:5]) +
                     ": change the request (partition, gpus, time, qos) or cancel them")
    return check("A32", title, "PASS", ev + " (queue position only: they start as resources free up)")


def c3_limits(f: Facts) -> Check:
    title = "Association and QOS limits (sacctmgr)"
    sec = f.sec("assoc")
    rows = [line.split("|") for line in (sec.text if sec else "").splitlines() if line.count("|") >= 5]
    if sec is None or sec.rc != 0 or not rows:
        said = (sec.text.strip().splitlines() or [""])[-1][:160] if sec else ""
        return check("A33", title, "SKIP", "sacctmgr did not answer (the cluster keeps no accounting database, or "
                     f"it is not reachable from here){': ' + said if said else ''}; limits are then only seen when "
                     "sbatch refuses a job")
    ev = "; ".join(f"account {a or '-'}" + (f" partition {p}" if p else "") + (f" qos {q}" if q else "") +
                   (f" MaxTRES {t}" if t else "") + (f" MaxJobs {j}" if j else "") + (f" MaxSubmit {s}" if s else "")
                   for a, p, q, t, j, s, *_ in rows[:8])
    want = f.spec.slurm.account if f.spec.slurm else None
    if want and want not in {r[0] for r in rows}:
        return check("A33", title, "WARN", f"the inventory's account {want!r} is not one of yours; {ev}", want)
    return check("A33", title, "PASS", ev)


def _mount(f: Facts, role: str) -> MountReport | None:
    return next((m for m in f.mounts if role in m.roles), None)


def c4_durable_not_scratch(f: Facts) -> Check:
    title = "Durable root off purged scratch"
    durable, scratch = _mount(f, "durable"), _mount(f, "scratch")
    root = f.spec.durable_root
    if durable is None:
        return check("A34", title, "SKIP", "the durable root was not measured", root)
    where = f"durable root {durable.resolved} on {durable.mount_point or '?'} ({durable.fstype or '?'})"
    # Only a scratch root the inventory names is known to be the cluster's scratch (the default is
    # a folder in the home directory or inside the durable root itself).
    named = f.spec.scratch_named
    same = (named and scratch is not None and durable is not scratch and scratch.resolved != durable.resolved
            and durable.filesystem is not None and durable.filesystem == scratch.filesystem)
    if same or SCRATCH_WORDS.search(durable.resolved):
        why = f"the same filesystem as the scratch root {scratch.resolved}" if same and scratch else "a scratch path"
        return check("A34", title, "WARN", f"{where} is {why}: clusters purge scratch (files unread for weeks go "
                     "without notice). Keep run dirs and results in project space; use scratch for data and "
                     "sync results back (sync_to_durable, aggregate_results)", root)
    return check("A34", title, "PASS", where + (f"; scratch {scratch.resolved} on {scratch.mount_point or '?'}"
                                               if scratch else ""), root)


CLUSTER_CHECKS = (c1_partitions, c2_pending, c3_limits, c4_durable_not_scratch)


def on_login_node(checks: list[Check]) -> list[Check]:
    """The local GPU checks' verdicts replaced by SKIP: a login node has no GPU to judge."""
    return [c.model_copy(update={"status": "SKIP", "evidence": LOGIN_NODE}) for c in checks]
