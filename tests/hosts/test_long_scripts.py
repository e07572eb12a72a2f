"""Scripts longer than one command line can carry (the box's login shell gets the command as one
argument, capped at 128 KiB by Linux) run whole on LocalHost and over the test sshd, with a stdin
payload after them intact; a 63 KB launch command and a 200 KB environment value start a run."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from mcp_server.hosts.base import Host
from tests.conftest import error_text, structured


@pytest.mark.parametrize("size", [40_000, 300_000])
async def test_a_long_script_runs_whole_and_its_stdin_payload_arrives_intact(any_host: Host, size: int) -> None:
    filler = "# " + "x" * 98 + "\n"
    script = filler * (size // len(filler)) + 'printf "%s" "$(sha256sum | cut -d" " -f1)"\n'
    payload = os.urandom(100_000)
    res = await any_host.run(script, stdin=payload, timeout=30)
    assert res.ok, res.err_text
    assert res.text == hashlib.sha256(payload).hexdigest()


async def test_a_long_script_leaves_no_temp_file(any_host: Host) -> None:
    script = "# " + "y" * 50_000 + "\n" + 'ls -1 "${TMPDIR:-/tmp}" | grep -c "^tmp\\|^rgt-script-" || true\n'
    before = (await any_host.run('ls -1 "${TMPDIR:-/tmp}" | grep -c "^tmp\\|^rgt-script-" || true')).text.strip()
    res = await any_host.run(script, timeout=30)
    after = (await any_host.run('ls -1 "${TMPDIR:-/tmp}" | grep -c "^tmp\\|^rgt-script-" || true')).text.strip()
    assert res.ok and int(after) <= int(before), "the script file removed itself"


async def test_a_63_kb_command_and_a_100_kb_env_value_launch_over_ssh(box: Any, env: Any, client: Any,
                                                                     tmp_path: Path) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    command = 'test "${#BIG}" = 100000 && true ' + "#" * 63_000
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "command": command,
                                                                "env": {"BIG": "v" * 100_000}, "probe_s": 2}))
    launch = res["outcomes"][0]["launch"]
    assert launch["state"]["status"] == "succeeded", launch
    record = json.loads((Path(launch["run_dir"]) / "run.json").read_text())
    assert len(record["command"]) == len(command) and len(record["env"]["BIG"]) == 100_000


async def test_an_env_value_no_program_could_start_with_is_refused_before_the_box(
        box: Any, env: Any, client: Any, tmp_path: Path) -> None:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    text = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "command": "true",
                                                                 "env": {"BIG": "v" * 200_000}}))
    assert "E2BIG" in text and "put the value in a file" in text
    assert not (tmp_path / ".rgt").exists(), "nothing reached the box"
