"""The Slurm login node's checks on real sinfo/squeue output: partitions and which of their nodes
can take a job (a draining, failed, maintained or unresponsive node cannot), GPU GRES strings with
socket affinity, and pending reasons that waiting does not clear. The live checks against the
test cluster are in tests/run/jobs/test_slurm.py."""

from __future__ import annotations

from pathlib import Path

from mcp_server.run.audit.cluster_checks import STUCK, parse_sinfo

FIXTURES = Path(__file__).parents[2] / "fixtures" / "slurm"
# A GRES value as Slurm prints it with socket affinity: github.com/SlinkyProject/slurm-operator/issues/45
A40 = "gpu:a40:1(S:0,2,4,6,8,10)"


def sinfo_lines() -> str:
    """The captured `sinfo` rows in the probe's `%P|%a|%l|%D|%t|%G` form; the gpu partition's GRES is
    the captured value above, the others have none, as Slurm prints it: (null)."""
    rows = (FIXTURES / "sinfo-arjuna.txt").read_text().splitlines()[2:]
    out = []
    for row in rows:
        part, avail, limit, nodes, state, _ = row.split()
        out.append("|".join([part, avail, limit, nodes, state, A40 if part == "gpu" else "(null)"]))
    return "\n".join(out)


def test_partitions_count_only_the_nodes_a_job_can_land_on() -> None:
    parts = {p.name: p for p in parse_sinfo(sinfo_lines())}
    assert set(parts) == {"cpu", "gpu", "debug", "idle", "highmem"}
    assert parts["debug"].default and not parts["gpu"].default
    assert parts["cpu"].usable_nodes == 0, "55 draining, 1 failed and unresponsive"
    assert parts["gpu"].usable_nodes == 7 and sum(parts["gpu"].nodes.values()) == 27
    assert parts["gpu"].has_gpus and parts["gpu"].gres == {A40}, "commas inside the affinity stay in one GRES"
    assert not parts["highmem"].has_gpus
    assert "7 mix" in parts["gpu"].describe() and "limit 14-00:00:0" in parts["gpu"].describe()


def test_pending_reasons_that_waiting_does_not_clear() -> None:
    stuck = ["QOSMaxGRESPerUser", "AssocGrpGRES", "ReqNodeNotAvail, UnavailableNodes:localhost", "PartitionTimeLimit",
             "JobHeldUser", "DependencyNeverSatisfied",
             "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"]
    waiting = ["Priority", "Resources", "Dependency", "BeginTime", "None", "JobArrayTaskLimit"]
    assert all(STUCK.match(r) for r in stuck)
    assert not any(STUCK.match(r) for r in waiting)
