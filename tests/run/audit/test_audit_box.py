"""audit_box end to end: through a real MCP client (in memory and over stdio), against the
real sshd with fake GPU tools printing real nvidia-smi formats."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import error_text, structured
from tests.support.tmpfs import mounted_tmpfs


def by_id(audit: dict, cid: str, subject: str | None = None) -> dict:
    found = [c for c in audit["checks"] if c["id"] == cid and (subject is None or c["subject"] == subject)]
    assert found, f"{cid} missing"
    return found[0]


@pytest.fixture
def gpu_box(env, box, tmp_path):
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "generic-ssh",
                                  "durable_root": str(durable), "hourly_price": 2.5}})
    return durable


async def audit_of(client, **args) -> dict:
    """Every check in full (these tests read PASS and SKIP evidence too)."""
    res = structured(await client.call_tool("audit_box", {"detail": "all", **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome["error"]
    return outcome["audit"]


async def test_healthy_h100_box_passes_the_gpu_checks(gpu_box, gpu, client) -> None:
    gpu("h100x8-healthy")
    a = await audit_of(client, host="gpu1", expect_gpu={"name": "H100 80GB", "count": 8})
    assert by_id(a, "A2")["status"] == "PASS"
    assert "8 x NVIDIA H100 80GB HBM3" in by_id(a, "A2")["evidence"]
    for cid in ("A5", "A6", "A7b", "A8", "A9"):
        assert by_id(a, cid)["status"] == "PASS", by_id(a, cid)
    assert len(a["gpus"]) == 8 and a["gpus"][0]["memory_total_mib"] == 81559
    assert a["round_trips"] == 1
    assert by_id(a, "A2")["route"] == "references://run-remote/audit-checks#a2"
    # This sshd runs in no logind session (no systemd here): the probe's real section says so.
    assert by_id(a, "A35")["status"] == "SKIP" and "no logind session" in by_id(a, "A35")["evidence"]


async def test_rented_gpu_mismatch_is_a_warning(gpu_box, gpu, client) -> None:
    gpu("h100x8-healthy")
    a = await audit_of(client, host="gpu1", expect_gpu={"name": "A100", "count": 4})
    ev = by_id(a, "A2")
    assert ev["status"] == "WARN" and "expected name containing 'A100'" in ev["evidence"]


async def test_a_throttled_gpu_fails_with_its_index_and_reason(gpu_box, gpu, client) -> None:
    gpu("h100x8-throttled")
    a = await audit_of(client, host="gpu1")
    a6 = by_id(a, "A6")
    assert a6["status"] == "FAIL" and "GPU 4: HW Slowdown, HW Thermal Slowdown" in a6["evidence"]
    a5 = by_id(a, "A5")
    assert a5["status"] == "FAIL" and "GPU 4: 88 C, SM 1095/1980 MHz" in a5["evidence"]
    assert a["verdict"] == "FAIL"


async def test_xid_79_in_dmesg_fails_the_box(gpu_box, gpu, client) -> None:
    gpu("h100x8-xid79")
    a = await audit_of(client, host="gpu1")
    a7 = by_id(a, "A7")
    assert a7["status"] == "FAIL" and "Xid 79" in a7["evidence"] and "re-rent" in a7["evidence"]


async def test_vram_held_with_no_listed_process_is_reported_not_killed(gpu_box, gpu, client) -> None:
    gpu("h100x8-zombie")
    a = await audit_of(client, host="gpu1")
    a8 = by_id(a, "A8")
    assert a8["status"] == "WARN" and "GPU 2: 31744 MiB used, no process listed" in a8["evidence"]
    assert "explicit OK" in a8["evidence"]


async def test_uncorrected_ecc_and_a_stray_holder(gpu_box, gpu, client) -> None:
    gpu("h100x8-degraded")
    a = await audit_of(client, host="gpu1")
    assert by_id(a, "A7b")["status"] == "FAIL" and "GPU 3: 2" in by_id(a, "A7b")["evidence"]
    a9 = by_id(a, "A9")
    assert a9["status"] == "WARN" and "1988021" in a9["evidence"]


async def test_driver_not_loaded_is_a_failure_with_the_reason(gpu_box, gpu, client) -> None:
    gpu("driver-not-loaded")
    a = await audit_of(client, host="gpu1", expect_gpu={"count": 1})
    a2 = by_id(a, "A2")
    assert a2["status"] == "FAIL" and "driver is not loaded" in a2["evidence"]


async def test_no_nvidia_smi_skips_gpu_checks_with_the_reason(gpu_box, client) -> None:
    a = await audit_of(client, host="gpu1")
    for cid in ("A2", "A5", "A6", "A8", "A9"):
        c = by_id(a, cid)
        assert c["status"] == "SKIP" and "nvidia-smi is not installed" in c["evidence"]


async def test_expected_gpu_missing_is_a_failure(gpu_box, client) -> None:
    a = await audit_of(client, host="gpu1", expect_gpu={"count": 8})
    assert by_id(a, "A2")["status"] == "FAIL"


@pytest.fixture
def tiny_inode_fs(tmp_path):
    yield from mounted_tmpfs(tmp_path / "tinyfs", "size=64m,nr_inodes=40")


async def test_inode_exhaustion_fails_while_bytes_look_fine(env, box, client, tiny_inode_fs) -> None:
    for i in range(39):
        (tiny_inode_fs / f"sample_{i}.png").write_bytes(b"x")
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tiny_inode_fs)}})
    a = await audit_of(client, host="gpu1")
    inodes = by_id(a, "A11", str(tiny_inode_fs))
    space = by_id(a, "A10", str(tiny_inode_fs))
    assert inodes["status"] == "FAIL" and "No space left on device" in inodes["evidence"]
    # Bytes 0% used; A10 still fails, by design, because 64 MiB is under the launch's 5 GiB floor.
    assert space["evidence"].split(": ")[1].startswith("0% used") and "launch_detached refuses" in space["evidence"]
    assert by_id(a, "A19")["status"] == "FAIL", "the write probe must fail on a full inode table"


async def test_durable_root_on_a_surviving_tier_passes(env, box, client, tmp_path) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "local", "durable_root": str(tmp_path)}})
    a = await audit_of(client, host="gpu1")
    assert by_id(a, "A19")["status"] == "PASS"


async def test_fan_out_returns_every_audit_and_one_clear_error(env, box, client, tmp_path) -> None:
    env.write_inventory({
        "a": {"destination": "testbox", "durable_root": str(tmp_path)},
        "b": {"destination": "testbox", "durable_root": str(tmp_path)},
        "dead": {"destination": "root@127.0.0.1:1"},
    })
    res = structured(await client.call_tool("audit_box", {"hosts": ["a", "dead", "b"]}))
    outcomes = {o["host"]: o for o in res["outcomes"]}
    assert [o["host"] for o in res["outcomes"]] == ["a", "dead", "b"]
    assert outcomes["a"]["audit"]["verdict"] in ("PASS", "WARN")
    assert outcomes["b"]["audit"] is not None
    err = outcomes["dead"]["error"]
    assert outcomes["dead"]["audit"] is None and err["code"] == "HOST_UNREACHABLE"
    assert "network error while connecting" in err["message"]


async def test_single_unreachable_host_is_a_tool_error(env, client) -> None:
    env.write_inventory({"dead": {"destination": "root@127.0.0.1:1"}})
    text = error_text(await client.call_tool("audit_box", {"host": "dead"}))
    assert "host dead" in text and "network error while connecting" in text


async def test_audit_is_recorded_in_the_ledger(gpu_box, client, env) -> None:
    await audit_of(client, host="gpu1")
    from mcp_server.ledger import Ledger

    ledger = Ledger.open(env.home / "ledger.sqlite")
    ev = ledger.latest("audit", host="gpu1")
    assert ev is not None and set(ev.data["counts"]) == {"PASS", "WARN", "FAIL", "SKIP"}


async def test_bad_paths_are_refused_before_anything_runs(gpu_box, client) -> None:
    text = error_text(await client.call_tool("audit_box", {"host": "gpu1", "paths": ["-rf"]}))
    assert "starts with '-'" in text


def console_script() -> str:
    found = shutil.which("remote-gpu-trainer-mcp") or str(Path(sys.executable).parent / "remote-gpu-trainer-mcp")
    assert Path(found).exists()
    return found


async def test_audit_over_stdio_through_the_console_script(gpu_box, gpu, env) -> None:
    import os

    gpu("h100x8-healthy")
    params = StdioServerParameters(command=console_script(), env={
        k: os.environ[k] for k in ("RGT_HOME", "RGT_CONFIG", "RGT_SSH_CONFIG", "PATH")})
    async with Client(params, read_timeout_seconds=60) as c:
        tools = {t.name for t in (await c.list_tools()).tools}
        assert "audit_box" in tools
        res = structured(await c.call_tool("audit_box", {"host": "gpu1"}))
    assert res["outcomes"][0]["audit"]["gpus"][7]["index"] == 7


def test_call_command_prints_the_local_audit_as_json(env) -> None:
    import json
    import os

    done = subprocess.run([console_script(), "call", "audit_box", '{"host": "local"}'],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert "A1" in data["outcomes"][0]["audit"]["passed"]


def _on_a_terminal(*args: str) -> str:
    """What `call` prints when its stdout is a terminal (a pty)."""
    import os
    import pty

    leader, follower = pty.openpty()
    done = subprocess.run([console_script(), "call", *args], stdout=follower, stderr=subprocess.PIPE,
                          timeout=120, env=dict(os.environ))
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the pty's other end is closed: all is read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert done.returncode == 0, done.stderr
    return b"".join(chunks).decode()


def test_call_command_on_a_terminal_prints_the_short_reading_and_json_only_when_asked(env) -> None:
    import json

    text = _on_a_terminal("audit_box", '{"host": "local"}')
    assert "headline: " in text and "no GPU" in text and not text.lstrip().startswith("{")
    assert len(text) < 3000
    whole = json.loads(_on_a_terminal("audit_box", '{"host": "local"}', "--json"))
    assert whole["outcomes"][0]["audit"]["headline"]


def test_call_command_exits_non_zero_on_a_tool_error(env) -> None:
    import os

    done = subprocess.run([console_script(), "call", "audit_box", '{"host": "-bad"}'],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 1 and "not an ssh destination" in done.stderr


async def test_an_idle_billed_box_gets_a_cost_warning_and_nothing_is_stopped(gpu_box, gpu, client) -> None:
    gpu("h100x8-healthy")
    a = await audit_of(client, host="gpu1")
    assert a["live_runs"] == 0
    assert "meter is running on an idle box" in a["idle_warning"] and "2.50 USD/h" in a["idle_warning"]
    assert a["accrued_cost"].endswith("(since first seen by this server)")


async def test_a_busy_box_gets_no_idle_warning(gpu_box, gpu, client) -> None:
    gpu("h100x8-training")
    a = await audit_of(client, host="gpu1")
    assert a["idle_warning"] is None


async def test_list_runs_warns_about_an_idle_billed_box(gpu_box, gpu, client) -> None:
    gpu("h100x8-healthy")
    await audit_of(client, host="gpu1")
    res = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    runs = res["outcomes"][0]["runs"]
    assert runs["live"] == 0 and "idle box" in runs["idle_warning"] and "USD" in runs["accrued_cost"]


@pytest.fixture
def small_fs(tmp_path):
    """A real 8 MiB filesystem with 4,000 inodes: under both launch floors (5 GiB, 10,000 inodes)."""
    yield from mounted_tmpfs(tmp_path / "smallfs", "size=8m,nr_inodes=4000")


async def test_security_the_audit_is_as_strict_as_the_launch_gates(env, box, client, small_fs) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(small_fs)}})
    a = await audit_of(client, host="gpu1")
    space, inodes = by_id(a, "A10", str(small_fs)), by_id(a, "A11", str(small_fs))
    assert space["status"] == "FAIL" and "launch_detached refuses" in space["evidence"]
    assert inodes["status"] == "FAIL" and "10000 free inodes" in inodes["evidence"]


async def test_security_the_write_probe_fails_with_zero_bytes_free(env, box, client, small_fs) -> None:
    filler = small_fs / "filler.bin"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(small_fs)}})
    a = await audit_of(client, host="gpu1")
    a19 = by_id(a, "A19")
    assert a19["status"] == "FAIL" and "cannot create a file" in a19["evidence"]
    assert not list(small_fs.glob(".rgt-probe.*")), "the probe cleans up after itself"


async def test_the_headline_says_when_the_gpu_checks_could_not_run(gpu_box, gpu, client) -> None:
    gpu("h100x8-healthy")
    with_gpus = await audit_of(client, host="gpu1")
    assert with_gpus["headline"].startswith(with_gpus["verdict"] + ": ") and "no GPU" not in with_gpus["headline"]
    local = await audit_of(client, host="local")
    if not local["gpus"]:  # this machine has no GPU: the verdict is never a bare PASS
        assert "no GPU:" in local["headline"] and f"{local['counts']['SKIP']} checks skipped" in local["headline"]


# A18 and prepare_box share one decision (system_checks.launch_python): for every case below, A18
# points at prepare_box exactly when prepare_box's box env file would get a different PATH line.
BASE, USR = "/root/miniconda3/bin", "/usr/bin"


def _a18_and_prepare(named: str, login: str, launch3: str, env_dir: str) -> tuple[dict, bool]:
    from mcp_server.run.audit.prepare import box_env
    from mcp_server.run.audit.probe import ProbeSection
    from mcp_server.run.audit.system_checks import a18_env_identity, box_env_dir, launch_python
    from tests.support.fakegpu import audit_facts

    old = box_env("/d", False, "", "", env_dir)  # the box env file as prepare_box wrote it last time
    facts = {"asked": "" if named == "-" else named.split("|")[0], "named": named, "login": login,
             "launch_python": "-", "launch_python3": launch3}
    path_line = [ln for ln in old.splitlines() if ln.startswith("export PATH=")]
    f = audit_facts(torch_cuda="12.4")
    f.sections["interp"] = ProbeSection(0, "\n".join([*(f"{k}={v}" for k, v in facts.items()),
                                                      *(f"box_env_path={ln}" for ln in path_line)]))
    lp = launch_python(facts, facts["asked"] or None, "base-is-env", box_env_dir(old))
    return a18_env_identity(f).model_dump(), box_env("/d", False, "", "", lp.path_dir) != old


@pytest.mark.parametrize(("named", "login", "launch3", "env_dir", "status"), [
    (f"{BASE}/python|1|python python3", "-", f"{USR}/python3|0|python3", "", "WARN"),
    (f"{BASE}/python|1|python python3", "-", f"{USR}/python3|0|python3", BASE, "PASS"),
    # python3 is the named one's, but a launch's bare `python` reaches nothing while BASE has one
    (f"{BASE}/python|1|python python3", "-", f"{BASE}/python3|1|python python3", "", "WARN"),
    (f"{BASE}/python|1|python python3", "-", f"{USR}/python3|0|python3", "/opt/old/bin", "WARN"),
    ("-", f"{BASE}/python|1|python python3", f"{USR}/python3|0|python3", "", "WARN"),
    ("-", f"{BASE}/python|1|python python3", f"{USR}/python3|1|python3", "", "PASS"),
    ("-", "-", f"{USR}/python3|0|python3", "/opt/old/bin", "WARN"),
    ("-", "-", f"{USR}/python3|1|python3", "", "PASS"),
])
def test_a18_points_at_prepare_box_exactly_when_prepare_box_changes_the_path_line(named, login, launch3,
                                                                                  env_dir, status) -> None:
    a18, path_line_changes = _a18_and_prepare(named, login, launch3, env_dir)
    assert a18["status"] == status, a18
    assert ("call prepare_box" in a18["evidence"]) == path_line_changes, a18
