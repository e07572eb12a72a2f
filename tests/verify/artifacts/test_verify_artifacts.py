"""verify_artifacts over the real sshd: roster, on-box manifest, resumable pull, checks.
None of these needs torch (the checkpoint loads are in test_checkpoints_torch.py): the
path-traversal and symlink tests must always run."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.record import VerificationRecord, read_verifications
from tests.conftest import error_text, structured
from tests.support.wait import until
from tests.verify.artifacts.pulls import held, safetensors, until_done, verify


async def test_a_roster_with_a_200_mb_file_pulls_and_verifies(results, client, env) -> None:
    (results / "seed1" / "weights.safetensors").write_bytes(safetensors({"w": (b"\x00" * 4 * 1024, [1024])}))
    big = results / "seed1" / "big.npy"
    import numpy as np

    np.save(big, np.zeros(50_000_000, dtype=np.float32))  # 200 MB
    r = await until_done(client, root=str(results), roster=["seed1/*", "train.csv"])
    assert r["passed"] is True, r["findings"]
    assert r["files_total"] == 5 and r["bytes_done"] == r["bytes_total"] > 200_000_000
    verified = json.loads(Path(r["verified_path"]).read_text())
    assert verified["passed"] and verified["manifest_sha256"] == r["manifest_sha256"]
    assert set(verified["files"]) == {"seed1/metrics.json", "seed1/best.pth", "seed1/big.npy",
                                      "seed1/weights.safetensors", "train.csv"}
    assert not (results / "PULL_MANIFEST.json").exists()  # nothing written beside the user's data
    assert r["manifest"].startswith(str(results.parent.parent / ".rgt" / "manifests") + "/")
    on_box = json.loads(Path(r["manifest"]).read_text())
    assert on_box["roster"] == ["seed1/*", "train.csv"] and on_box["hasher"] == "python-hashlib"
    local = Path(r["dest"]) / "seed1" / "big.npy"
    assert local.read_bytes() == big.read_bytes()
    ev = Ledger.open(env.home / "ledger.sqlite").latest("verification", host="gpu1")
    assert ev is not None and ev.data["passed"] and ev.data["manifest_sha256"] == r["manifest_sha256"]
    # One record, two places: the local PULL_VERIFIED.json and the ledger event teardown reads.
    (recorded,) = read_verifications([ev]).valid
    assert recorded.record == VerificationRecord.model_validate_json(Path(r["verified_path"]).read_text())
    checks = {v["path"]: v for v in r["verdicts"]}
    assert checks["seed1/best.pth"]["ok"] and checks["seed1/weights.safetensors"]["ok"]


async def test_a_missing_roster_file_and_an_extra_file_are_named(results, client) -> None:
    (results / "stray.log").write_text("x")
    r = await until_done(client, root=str(results), roster=["seed1/best.pth", "seed2/best.pth", "logs/*.txt"])
    by = {(f["path"], f["kind"]): f for f in r["findings"]}
    assert ("seed2/best.pth", "missing") in by and ("logs/*.txt", "missing") in by
    assert ("stray.log", "extra") in by and by[("stray.log", "extra")]["blocking"] is False
    assert r["passed"] is False and "do not tear down" in r["next_step"]


async def test_interrupted_pull_resumes_without_resending_and_a_flipped_byte_is_caught(results, client, box) -> None:
    (results / "a.json").write_text("{}")
    (results / "b_big.bin").write_bytes(os.urandom(150_000_000))
    (results / "z.json").write_text('{"psnr": 31.42}')
    roster = ["a.json", "b_big.bin", "z.json"]
    dest = results.parent.parent / "pulled"
    partial = dest / ".rgt-pull" / "partial" / "b_big.bin"
    task = asyncio.create_task(client.call_tool("verify_artifacts", {"host": "gpu1", "root": str(results),
                                                                      "roster": roster, "dest": str(dest)}))
    await until(lambda: _size(partial) > 10_000_000, timeout=30, interval=0.01, what="the pull to be under way")
    box.restart()  # the connection drops mid-file; the box comes back
    first = await task
    assert first.is_error and "connection" in error_text(first).lower()
    sent_before = held(dest, "b_big.bin")
    assert 0 < sent_before < 150_000_000
    # Someone changes a file on the box after its manifest was built.
    z = results / "z.json"
    z.write_bytes(b'{"psnr": 31.43}')
    r = await until_done(client, root=str(results), roster=roster, dest=str(dest))
    assert r["bytes_transferred"] == (150_000_000 - sent_before) + z.stat().st_size, "re-sent completed bytes"
    mism = [f for f in r["findings"] if f["kind"] == "hash_mismatch"]
    assert [f["path"] for f in mism] == ["z.json"]
    assert mism[0]["expected"] != mism[0]["actual"] and "sha256" in mism[0]["expected"]
    assert r["passed"] is False
    assert (dest / "b_big.bin").read_bytes() == (results / "b_big.bin").read_bytes()


async def test_a_locally_truncated_file_is_caught_and_pulled_again(results, client) -> None:
    first = await until_done(client, root=str(results), roster=["seed1/*"])
    assert first["passed"]
    local = Path(first["dest"]) / "seed1" / "best.pth"
    with local.open("r+b") as f:
        f.truncate(10)
    again = await until_done(client, root=str(results), roster=["seed1/*"])
    changed = [f for f in again["findings"] if f["kind"] == "local_changed"]
    assert [f["path"] for f in changed] == ["seed1/best.pth"] and "size differs" in changed[0]["message"]
    assert again["passed"] and local.read_bytes() == (results / "seed1" / "best.pth").read_bytes()
    assert again["bytes_transferred"] == local.stat().st_size, "only the damaged file travels again"
    assert again["manifest"] == first["manifest"], "one manifest per run (here: per root), replaced by a new round"
    assert not list(results.glob("PULL_MANIFEST*.json"))


async def test_a_tiny_budget_returns_not_done_and_later_calls_finish(results, client) -> None:
    with (results / "blob.bin").open("wb") as f:
        f.truncate(600_000_000)  # sparse: cheap to create, still 600 MB to hash and move
    first = await verify(client, root=str(results), roster=["blob.bin", "seed1/*"], budget_s=2)
    assert first["done"] is False and first["passed"] is None and "call verify_artifacts again" in first["next_step"]
    last = await until_done(client, root=str(results), roster=["blob.bin", "seed1/*"], budget_s=2)
    assert last["passed"] is True


@pytest.mark.parametrize("bad", ["../outside.txt", "/etc/passwd", "~/x", "a/../../b"])
async def test_roster_paths_escaping_the_root_are_refused(results, client, bad) -> None:
    args = {"host": "gpu1", "root": str(results), "roster": [bad]}
    text = error_text(await client.call_tool("verify_artifacts", args))
    assert "roster" in text


async def test_a_symlink_pointing_outside_the_root_is_refused(results, client) -> None:
    (results / "leak.json").symlink_to("/etc/hostname")
    r = await until_done(client, root=str(results), roster=["*.json", "seed1/*"])
    (f,) = [f for f in r["findings"] if f["kind"] == "symlink"]
    assert f["path"] == "leak.json" and "outside the root" in f["message"]
    assert r["passed"] is False
    assert not (Path(r["dest"]) / "leak.json").exists()


async def test_run_declared_outputs_become_the_roster(results, client) -> None:
    out = results / "out"
    launched = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json", "workdir": str(results),
        "outputs": ["out/metrics.json"], "probe_s": 3}))["outcomes"][0]["launch"]
    assert launched["state"]["status"] == "succeeded" and (out / "metrics.json").exists()
    r = await until_done(client, run_id=launched["run_id"])
    assert r["passed"] and r["files_total"] == 1 and r["root"] == str(results)


async def test_parquet_npz_jsonl_and_ragged_csv_are_checked_by_type(results, client) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = results / "tables"
    d.mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3], "score": [0.1, 0.2, 0.3]}), d / "results.parquet")
    np.savez(d / "emb.npz", a=np.ones((4, 2)), b=np.array([1.0, np.inf]))
    (d / "items.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    (d / "ragged.csv").write_text("a,b\n1,2\n3\n")
    r = await until_done(client, root=str(d), roster=["*"])
    v = {x["path"]: x for x in r["verdicts"]}
    assert v["results.parquet"]["ok"] and "3 rows x 2 columns" in v["results.parquet"]["detail"]
    assert v["emb.npz"]["finding"] == "non_finite" and "b" in v["emb.npz"]["detail"]
    assert v["items.jsonl"]["ok"] and "2 records" in v["items.jsonl"]["detail"]
    assert v["ragged.csv"]["finding"] == "load_error" and "ragged" in v["ragged.csv"]["detail"]


@pytest.mark.parametrize("saved", ["{not json", json.dumps({"round": 3, "phase": "pulling", "files": {"a": [1, 2]}})],
                         ids=["corrupt", "older-version"])
async def test_an_unreadable_pull_state_starts_a_clean_round(results, client, saved) -> None:
    dest = results.parent.parent / "pulled"
    (dest / ".rgt-pull").mkdir(parents=True)
    (dest / ".rgt-pull" / "state.json").write_text(saved)
    r = await until_done(client, root=str(results), roster=["seed1/*"], dest=str(dest))
    assert r["passed"] is True and r["files_total"] == 2
    state = json.loads((dest / ".rgt-pull" / "state.json").read_text())
    assert state["round"] == 1 and state["phase"] == "verified"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


async def test_pack_pulls_a_directory_of_small_files_through_the_tool_and_verifies_each(results, client) -> None:
    small = results / "samples"
    small.mkdir()
    for i in range(300):
        (small / f"{i:04d}.json").write_text(json.dumps({"i": i}))
    r = await until_done(client, root=str(results), roster=["samples/*.json", "train.csv"], pack=True)
    assert r["passed"] is True, r["findings"]
    assert r["files_total"] == r["files_done"] == 301
    dest = Path(r["dest"])
    assert all((dest / "samples" / f"{i:04d}.json").read_text() == json.dumps({"i": i}) for i in range(300))
    assert sum(v["ok"] for v in r["verdicts"]) == 200  # the first 200 verdicts come back; all pass


async def test_security_a_root_outside_the_boxs_roots_is_refused(results, client, tmp_path) -> None:
    outside = tmp_path.parent / (tmp_path.name + "-elsewhere")
    outside.mkdir()
    (outside / "a.json").write_text("{}")
    text = error_text(await client.call_tool("verify_artifacts", {"host": "gpu1", "root": str(outside),
                                                                  "roster": ["a.json"]}))
    assert "outside the roots verify_artifacts reads" in text and str(tmp_path) in text
    etc = error_text(await client.call_tool("verify_artifacts", {"host": "gpu1", "root": "/etc",
                                                                 "roster": ["hostname"]}))
    assert "outside the roots" in etc
    assert not Path("/etc/.rgt").exists()


async def test_security_a_root_read_only_through_verify_roots_is_recorded_in_the_ledger(results, client, env,
                                                                                          tmp_path) -> None:
    extra = tmp_path.parent / (tmp_path.name + "-project")
    extra.mkdir()
    (extra / "a.json").write_text("{}")
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path),
                                  "verify_roots": [str(extra)]}})
    r = await until_done(client, root=str(extra), roster=["a.json"])
    assert r["passed"] is True
    ledger = Ledger.open(env.home / "ledger.sqlite")
    try:
        (widened,) = ledger.events("verify_root_widened", host="gpu1")
        assert widened.data["verify_roots_entry"] == str(extra) and widened.data["abs_root"] == str(extra.resolve())
        await until_done(client, root=str(results), roster=["train.csv"])  # under the durable root: nothing to say
        assert len(ledger.events("verify_root_widened", host="gpu1")) == 1
    finally:
        ledger.close()


async def test_security_a_rewritten_run_json_cannot_send_the_pull_elsewhere(results, client) -> None:
    launched = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": "mkdir -p out && echo '{\"acc\": 0.9}' > out/metrics.json", "workdir": str(results),
        "outputs": ["out/metrics.json"], "probe_s": 3}))["outcomes"][0]["launch"]
    run_json = Path(launched["run_dir"]) / "run.json"
    record = json.loads(run_json.read_text())
    record["outputs"] = {"root": "/etc", "patterns": ["passwd", "shadow"]}
    run_json.write_text(json.dumps(record))
    r = await until_done(client, run_id=launched["run_id"])
    assert r["root"] == str(results) and r["passed"] and r["files_total"] == 1, "the ledger's record wins"


async def test_a_finished_verification_links_its_record_and_the_pulled_files(results, client) -> None:
    done = None
    for _ in range(60):
        done = await client.call_tool("verify_artifacts", {"host": "gpu1", "root": str(results),
                                                           "roster": ["seed1/*", "train.csv"]})
        if structured(done)["done"]:
            break
    assert done is not None
    r = structured(done)
    links = [str(c.uri) for c in done.content if c.type == "resource_link"]
    assert Path(r["verified_path"]).as_uri() in links, "the client can open PULL_VERIFIED.json"
    assert Path(r["dest"]).as_uri() in links, "and the folder of pulled copies"
    assert (Path(r["dest"]) / "train.csv").is_file()


async def test_a_budgeted_pull_resumes_its_hash_and_never_rereads_the_bytes_it_hashed(results, client) -> None:
    """Issue 33: each resumed call continued the hash from its partial file's first byte, so a pull
    cost grew with the square of its size and, past the budget, never moved again."""
    from mcp_server.verify.artifacts import partial_hash

    with (results / "big.bin").open("wb") as f:
        f.truncate(400_000_000)  # sparse: cheap to create, 400 MB to hash and move
    partial_hash.PARTIAL_HASHES.clear()
    before = partial_hash.REHASHED_BYTES
    calls = 0
    while True:
        calls += 1
        r = await verify(client, root=str(results), roster=["big.bin"], budget_s=2)
        if r["done"]:
            break
        assert calls < 200
    assert r["passed"] is True and calls > 1, calls
    assert before == partial_hash.REHASHED_BYTES, "bytes already hashed were read again"


async def test_after_a_restart_the_partial_is_hashed_once_more_and_the_pull_still_verifies(results, client) -> None:
    from mcp_server.verify.artifacts import partial_hash

    with (results / "big.bin").open("wb") as f:
        f.truncate(300_000_000)
    first = await verify(client, root=str(results), roster=["big.bin"], budget_s=2)
    assert first["done"] is False
    partial_hash.PARTIAL_HASHES.clear()  # what a server restart forgets
    before = partial_hash.REHASHED_BYTES
    last = await until_done(client, root=str(results), roster=["big.bin"], budget_s=2)
    assert last["passed"] is True
    assert 0 < partial_hash.REHASHED_BYTES - before <= 300_000_000  # the prefix once, not once per call
