"""Independent acceptance: a machine other than the producer re-hashes a copy of the producer's
verified bundle against the producer's manifest. On the producer (under any name) it is refused;
on a second machine it is accepted or names each differing file; two acceptances compare file by
file, and a comparison of two made on one machine is refused.

The test boxes `local` and `gpu1` (the test sshd) are one machine with one /etc/machine-id, so
the refusal is tested on the real identity. A second machine is this one with RGT_MACHINE_ID set
in its environment: the documented override for boxes that share a machine-id, which the record
discloses as the identity's source."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import InputError
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.acceptance_record import (
    ACCEPTANCE_SCHEMA,
    AcceptanceRecord,
    AcceptedFile,
    RecordedAcceptance,
    compare_acceptances,
)
from mcp_server.verify.artifacts.identity import HostIdentity, read_identity, same_machine
from tests.conftest import Caller, error_text, structured
from tests.verify.artifacts.pulls import until_done


async def accept(client: Caller, root: Path, **args: Any) -> dict[str, Any]:
    for _ in range(30):
        r = structured(await client.call_tool("verify_artifacts", {"host": "local", "root": str(root),
                                                                   "accept_from": "gpu1", **args}))
        if r["done"]:
            return r
    raise AssertionError("the acceptance never finished")


@pytest.fixture
async def bundle(results: Path, client: Caller) -> Path:
    """gpu1's results, verified into a local copy (the bundle a second machine accepts)."""
    r = await until_done(client, root=str(results), roster=["seed1/*", "train.csv"])
    assert r["passed"], r["findings"]
    return Path(r["dest"])


def copy_of(bundle: Path, name: str) -> Path:
    return Path(shutil.copytree(bundle, bundle.parent / name))


async def test_acceptance_on_the_producer_is_refused_under_any_name(results, bundle, client, env) -> None:
    on_itself = error_text(await client.call_tool("verify_artifacts", {
        "host": "gpu1", "root": str(results), "accept_from": "gpu1"}))
    assert "acceptance on the producer proves nothing: choose another machine" in on_itself
    # `local` is the same machine as the test sshd: same /etc/machine-id, another name.
    renamed = error_text(await client.call_tool("verify_artifacts", {
        "host": "local", "root": str(bundle), "accept_from": "gpu1"}))
    assert "proves nothing" in renamed and "local is " in renamed and ": the same " in renamed
    assert Ledger.open(env.home / "ledger.sqlite").latest("acceptance") is None
    assert not (bundle / "ACCEPTED.json").exists()


async def test_a_second_machine_accepts_and_records_who_produced_and_who_accepted(
        bundle, client, env, monkeypatch) -> None:
    monkeypatch.setenv("RGT_MACHINE_ID", "acceptor-b")
    r = await accept(client, bundle)
    assert r["passed"] is True and r["acceptance"]["accepted"] is True, r["findings"]
    assert r["files_total"] == r["files_done"] == 3
    assert {v["path"] for v in r["verdicts"] if v["ok"]} == {"seed1/best.pth", "seed1/metrics.json", "train.csv"}
    record = json.loads((bundle / "ACCEPTED.json").read_text())
    assert record["schema"] == ACCEPTANCE_SCHEMA and record["accepted"] is True
    assert record["producer"]["machine_id_source"] != "RGT_MACHINE_ID"
    assert r["acceptance"]["verifier"].startswith("local: ") and "acceptor-b from RGT_MACHINE_ID" in \
        r["acceptance"]["verifier"]
    assert (record["verifier"]["machine_id"], record["verifier"]["machine_id_source"]) == ("acceptor-b",
                                                                                          "RGT_MACHINE_ID")
    ev = Ledger.open(env.home / "ledger.sqlite").latest("acceptance", host="local")
    assert ev is not None and ev.id == r["acceptance"]["id"] and ev.data == record
    assert not list(bundle.glob(".rgt-hash-*")), "the hashing job's directory is cleaned up"
    verified = json.loads((bundle / "PULL_VERIFIED.json").read_text())
    assert verified["producer"] == record["producer"], "the producer is the one the verification recorded"


async def test_a_changed_file_in_the_bundle_is_named_and_not_accepted(bundle, client, monkeypatch) -> None:
    monkeypatch.setenv("RGT_MACHINE_ID", "acceptor-b")
    copy = copy_of(bundle, "copy")
    (copy / "seed1" / "metrics.json").write_text('{"psnr": 99.99, "epoch": 0}')
    (copy / "train.csv").unlink()
    r = await accept(client, copy)
    assert r["passed"] is False and "NOT accepted" in r["next_step"]
    by = {f["path"]: f for f in r["findings"] if f["blocking"]}
    assert by["seed1/metrics.json"]["kind"] == "hash_mismatch" and by["train.csv"]["kind"] == "missing"
    assert not (copy / "ACCEPTED.json").exists()


async def test_two_acceptances_on_two_machines_compare_file_by_file(bundle, client, monkeypatch) -> None:
    monkeypatch.setenv("RGT_MACHINE_ID", "node-b")
    first = (await accept(client, copy_of(bundle, "on-b")))["acceptance"]["id"]
    monkeypatch.setenv("RGT_MACHINE_ID", "node-c")
    same = (await accept(client, copy_of(bundle, "on-c"), compare_with=first))["acceptance"]["comparison"]
    assert same["match"] is True and same["files"] == 3 and same["summary"].startswith("match")
    monkeypatch.setenv("RGT_MACHINE_ID", "node-d")
    changed = copy_of(bundle, "on-d")
    (changed / "train.csv").write_bytes((changed / "train.csv").read_bytes().replace(b"0.9", b"0.8"))
    diff = (await accept(client, changed, compare_with=first))["acceptance"]["comparison"]
    assert diff["match"] is False
    assert any(d.startswith("train.csv: sha256") for d in diff["differences"]), diff
    assert not any("best.pth" in d or "metrics.json" in d for d in diff["differences"])


async def test_comparing_two_acceptances_made_on_one_machine_is_refused(bundle, client, monkeypatch) -> None:
    monkeypatch.setenv("RGT_MACHINE_ID", "node-b")
    first = (await accept(client, copy_of(bundle, "one")))["acceptance"]["id"]
    text = error_text(await client.call_tool("verify_artifacts", {
        "host": "local", "root": str(copy_of(bundle, "two")), "accept_from": "gpu1", "compare_with": first}))
    assert "both acceptances were made on one machine" in text


async def test_nothing_to_accept_without_a_passing_verification_of_the_producer(results, client) -> None:
    text = error_text(await client.call_tool("verify_artifacts", {
        "host": "local", "root": str(results), "accept_from": "gpu1"}))
    assert "nothing to accept from gpu1" in text and "verify the results first" in text


async def test_a_box_reports_its_machine_id_hostname_and_the_openssh_fingerprint_of_its_host_key(any_host) -> None:
    got = await read_identity(any_host)
    ids = [f for f in (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id")) if f.exists() and f.stat().st_size]
    assert (got.machine_id, got.machine_id_source) == ((ids[0].read_text().strip(), str(ids[0])) if ids else ("", ""))
    assert got.hostname == socket.gethostname()
    keys = [k for t in ("ed25519", "ecdsa", "rsa") if (k := Path(f"/etc/ssh/ssh_host_{t}_key.pub")).exists()]
    expected = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(keys[0])], capture_output=True,
                              text=True, check=True).stdout.split()[1] if keys else ""
    assert got.host_key == expected


def _identity(mid: str) -> HostIdentity:
    return HostIdentity(machine_id=mid, machine_id_source="/etc/machine-id", hostname="h", host_key="SHA256:k")


def _acceptance(event_id: int, verifier: str, files: dict[str, str], accepted: bool = True) -> RecordedAcceptance:
    return RecordedAcceptance(event_id, AcceptanceRecord(
        schema_=ACCEPTANCE_SCHEMA, host="box", root="/b", abs_root="/b", producer_host="gpu1",
        producer=_identity("producer"), verifier=_identity(verifier), verification_event=1, manifest_sha256=None,
        accepted=accepted, files={p: AcceptedFile(bytes=len(d), sha256=d * 8) for p, d in files.items()},
        findings=[], boundary="", accepted_at_utc="", server_version="0"))


def test_comparison_ignores_who_verified_and_names_each_differing_file() -> None:
    a = _acceptance(3, "node-b", {"best.pth": "aaaaaaaa", "m.json": "bbbbbbbb", "only-a": "cccccccc"})
    b = _acceptance(4, "node-c", {"best.pth": "aaaaaaaa", "m.json": "dddddddd"}, accepted=False)
    cmp = compare_acceptances(a, b)
    assert cmp.match is False and cmp.files == 3
    assert cmp.differences == ["acceptance #3 accepted, #4 rejected", "m.json: sha256 bbbbbbbbbbbb in #3, "
                               "dddddddddddd in #4", "only-a: only in acceptance #3"]
    assert compare_acceptances(a, _acceptance(5, "node-d", {"best.pth": "aaaaaaaa", "m.json": "bbbbbbbb",
                                                            "only-a": "cccccccc"})).match is True


@pytest.mark.parametrize(("left", "right", "why"), [
    ("node-b", "node-b", "both acceptances were made on one machine"),
    ("node-b", "producer", "produced the bundle"),
])
def test_comparison_without_two_independent_verifiers_is_refused(left: str, right: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        compare_acceptances(_acceptance(1, left, {"a": "x"}), _acceptance(2, right, {"a": "x"}))


@pytest.mark.parametrize(("a", "b", "same"), [
    (("m1", "k1", "h1"), ("m1", "k2", "h2"), True),  # one machine-id: one machine, whatever else differs
    (("m1", "k1", "h1"), ("m2", "k1", "h1"), False),  # a cloned image: same host key, distinct machine-ids
    (("", "k1", "h1"), ("m2", "k1", "h2"), True),  # no machine-id on one side: the host key decides
    (("", "", "h1"), ("", "", "h1"), True),  # only hostnames to go by: equal counts as one machine
    (("", "", "h1"), ("", "", "h2"), False),
])
def test_two_identities_are_one_machine_by_machine_id_then_host_key_then_hostname(
        a: tuple[str, str, str], b: tuple[str, str, str], same: bool) -> None:
    def ident(t: tuple[str, str, str]) -> HostIdentity:
        return HostIdentity(machine_id=t[0], machine_id_source="x", host_key=t[1], hostname=t[2])

    assert (same_machine(ident(a), ident(b)) is not None) is same
