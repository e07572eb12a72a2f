"""The teardown gates as pure logic: G2 reads each ledger verification event strictly as a
VerificationRecord. A wrong type, a missing field or unknown fields make the event NOT a
verification: the gate fails (never passes, never crashes) and its evidence names the event
and what was wrong."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mcp_server.ledger import Event
from mcp_server.run.jobs.listing import HostRuns, RunSummary
from mcp_server.run.jobs.rundir import RunOutputs
from mcp_server.run.teardown.gates import covers, g2
from mcp_server.verify.artifacts.identity import HostIdentity
from mcp_server.verify.artifacts.record import VERIFIED_SCHEMA, VerificationRecord, VerifiedFile, read_verifications
from mcp_server.verify.artifacts.roster import RosterFinding

ROOT = "/data/results"
RUNS = HostRuns(host="pod", live=0, missing_on_box=[], runs=[
    RunSummary(run_id="r1", status="succeeded", in_ledger=True, ended_at=50.0,
               outputs=RunOutputs(root=ROOT, patterns=["metrics.json"]))])


def good() -> dict[str, Any]:
    box = HostIdentity(machine_id="m1", machine_id_source="/etc/machine-id", hostname="pod", host_key="")
    here = HostIdentity(machine_id="m2", machine_id_source="/etc/machine-id", hostname="laptop", host_key="")
    record = VerificationRecord(
        schema_=VERIFIED_SCHEMA, host="pod", producer=box, verifier=here, root=ROOT, abs_root=ROOT, run_id="r1",
        roster=["metrics.json"], dest="/pulls/pod/r1",
        manifest="PULL_MANIFEST.json", manifest_sha256="m" * 64, listed_at=100.0, newest_mtime=99.0,
        verified_at_utc="2030-01-01T00:00:00+00:00", verifier_version="rgt-verify/1", server_version="0",
        passed=True, files={"metrics.json": VerifiedFile(bytes=2, sha256="a" * 64, check=None)}, bytes=2,
        findings=[])
    return record.model_dump(mode="json", by_alias=True)


def event(data: dict[str, Any], event_id: int = 7) -> Event:
    return Event(id=event_id, ts=100.0, kind="verification", host="pod", run_id="r1", summary="", data=data)


def changed(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.update(fields)


def without(name: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.pop(name)


def test_a_well_formed_passing_record_covers_the_run() -> None:
    verifs = read_verifications([event(good())])
    assert verifs.unreadable == [] and covers(verifs.valid[0], RUNS.runs[0])
    gate, used = g2(RUNS, verifs, needed=True)
    assert gate.state == "pass" and [v.event_id for v in used] == [7]


BROKEN = {
    "passed is a string": (changed(passed="yes"), "passed"),
    "passed is a number": (changed(passed=1), "passed"),
    "roster is a string": (changed(roster="metrics.json"), "roster"),
    "files is a list (the old ledger shape)": (changed(files=["metrics.json"]), "files"),
    "a file's hash is a number": (lambda d: d["files"]["metrics.json"].update(sha256=1), "files.metrics.json.sha256"),
    "listed_at is a string": (changed(listed_at="100.0"), "listed_at"),
    "an older schema": (changed(schema="remote-gpu-trainer/PULL-VERIFIED/v2"), "schema"),
    "a v3 record (before machine identities)": (changed(schema="remote-gpu-trainer/PULL-VERIFIED/v3"), "schema"),
    "producer missing": (without("producer"), "producer: Field required"),
    "verifier's machine-id is a number": (lambda d: d["verifier"].update(machine_id=7), "verifier.machine_id"),
    "schema missing": (without("schema"), "schema: Field required"),
    "files missing": (without("files"), "files: Field required"),
    "passed missing": (without("passed"), "passed: Field required"),
    "extra garbage": (changed(trust_me=True), "trust_me: Extra inputs are not permitted"),
}


@pytest.mark.parametrize(("mutate", "named"), BROKEN.values(), ids=BROKEN.keys())
def test_a_malformed_verification_record_makes_g2_refuse_naming_the_event_and_field(
        mutate: Callable[[dict[str, Any]], None], named: str) -> None:
    data = good()
    mutate(data)
    verifs = read_verifications([event(data)])
    assert verifs.valid == []
    gate, used = g2(RUNS, verifs, needed=True)
    assert gate.state == "fail" and used == []
    assert "no passing verify_artifacts" in gate.evidence
    assert "event #7" in gate.evidence and named in gate.evidence, gate.evidence


def test_a_malformed_record_beside_a_good_one_is_disclosed_not_counted() -> None:
    bad = good()
    bad["passed"] = "yes"
    verifs = read_verifications([event(bad, event_id=9), event(good(), event_id=7)])
    gate, used = g2(RUNS, verifs, needed=True)
    assert gate.state == "pass" and [v.event_id for v in used] == [7]
    assert "event #9" in gate.evidence and "do not count" in gate.evidence


def test_a_record_that_failed_or_predates_the_run_end_does_not_cover_it() -> None:
    failed = good()
    failed["passed"] = False
    assert g2(RUNS, read_verifications([event(failed)]), needed=True)[0].state == "fail"
    early = read_verifications([Event(id=7, ts=10.0, kind="verification", host="pod", run_id="r1", summary="",
                                      data=good())])
    gate, _ = g2(RUNS, early, needed=True)
    assert gate.state == "fail" and "r1 (succeeded)" in gate.evidence


def test_when_the_latest_verification_failed_g2_says_which_files_failed_and_why() -> None:
    failed = good()
    failed["passed"] = False
    failed["findings"] = [
        RosterFinding(path="best.pth", kind="load_error", message="zip central directory missing: truncated")
        .model_dump(mode="json"),
        RosterFinding(path="stray.log", kind="extra", blocking=False, message="not in the roster")
        .model_dump(mode="json")]
    gate, _ = g2(RUNS, read_verifications([event(failed, event_id=8)]), needed=True)
    assert gate.state == "fail"
    assert "the latest verification (event #8) FAILED: best.pth (load_error: zip central directory missing" in \
        gate.evidence
    assert "stray.log" not in gate.evidence
