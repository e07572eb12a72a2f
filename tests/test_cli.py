"""The console entry as a new user meets it in the first hour: the real `remote-gpu-trainer-mcp`
run as a subprocess (RGT_HOME, the inventory and the ssh config in tmp_path, from the `env`
fixture), asserting what it prints."""

from __future__ import annotations

import json
import os
import pty
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from mcp_server.cli_text import PROG, example_arguments
from mcp_server.server import build_server
from mcp_server.settings import Settings

SCRIPT = Path(sys.executable).parent / PROG
ENTRY = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "mcp_server"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENTRY, *args], capture_output=True, text=True, timeout=120, check=False)


def on_a_terminal(*args: str) -> str:
    """What the command prints when stdout is a terminal."""
    reader, writer = pty.openpty()
    proc = subprocess.Popen([*ENTRY, *args], stdout=writer, stderr=subprocess.DEVNULL)
    os.close(writer)
    chunks = []
    while True:
        try:
            chunk = os.read(reader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(reader)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_help_names_the_http_endpoint_path(env: Any) -> None:
    out = cli("--help").stdout
    assert "http://127.0.0.1:8765/mcp" in out and "read references://" in out


def test_tools_lists_every_tool_and_says_how_to_see_one_s_arguments(env: Any) -> None:
    done = cli("tools")
    assert done.returncode == 0
    assert "plan_teardown" in done.stdout and "audit_box" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1] == f"{PROG} tools NAME shows a tool's arguments and an example call"


def test_tools_name_shows_each_argument_and_an_example_call(env: Any) -> None:
    done = cli("tools", "plan_teardown")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    action = next(line for line in lines if line.strip().startswith("action "))
    assert "string" in action and "required" in action and "stop" in action
    host = next(line for line in lines if line.strip().startswith("host "))
    assert 'optional, default "local"' in host
    assert "Gates (Iron Law)" in done.stdout, "the whole description, not its first line"
    assert f"""{PROG} call plan_teardown '{{"action": "stop"}}'""" in done.stdout


def test_the_example_call_that_tools_prints_runs(env: Any) -> None:
    shown = cli("tools", "search_references").stdout
    line = next(line.strip() for line in shown.splitlines() if line.strip().startswith(f"{PROG} call "))
    done = subprocess.run([*ENTRY, *shlex.split(line)[1:]], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["query"] == "CUDA out of memory"


async def test_every_tool_s_example_arguments_fit_its_full_schema(env: Any) -> None:
    for tool in await build_server(Settings.from_env()).list_tools():
        jsonschema.validate(example_arguments(tool.name, tool.input_schema), tool.input_schema)


def test_an_unknown_tool_name_is_refused_with_the_name_it_meant(env: Any) -> None:
    done = cli("tools", "plan_tear")
    assert done.returncode == 2
    assert "did you mean plan_teardown?" in done.stderr and f"{PROG} tools" in done.stderr


def test_resources_lists_each_resource_and_template_one_a_line(env: Any) -> None:
    done = cli("resources")
    assert done.returncode == 0
    lines = [line.split()[0] for line in done.stdout.splitlines() if "://" in line.split(" ")[0]]
    assert "references://run-remote/teardown" in lines and "profiles://runpod" in lines
    assert {"runs://{host}/{run_id}", "schemas://tools/{name}"} <= set(lines)


def test_read_prints_a_reference_page_as_served(env: Any) -> None:
    done = cli("read", "references://run-remote/teardown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Teardown")


def test_read_prints_json_raw_when_piped_and_indented_on_a_terminal(env: Any) -> None:
    piped = cli("read", "schemas://tools/plan_teardown").stdout
    assert json.loads(piped)["name"] == "plan_teardown" and piped.startswith('{\n "name"')
    shown = on_a_terminal("read", "schemas://tools/plan_teardown")
    assert shown.startswith('{\n  "name": "plan_teardown"'), shown[:80]
    assert on_a_terminal("read", "--json", "schemas://tools/plan_teardown").startswith('{\n "name"')


def test_read_an_unknown_uri_names_the_schemes_and_the_resources_command(env: Any) -> None:
    done = cli("read", "refrences://run-remote/teardown")
    assert done.returncode == 2
    for scheme in ("references://", "profiles://", "runs://", "schemas://"):
        assert scheme in done.stderr
    assert f"`{PROG} resources`" in done.stderr and "refrences" not in done.stderr


def test_read_a_run_that_does_not_exist_says_so(env: Any) -> None:
    done = cli("read", "runs://local/no-such-run")
    assert done.returncode == 1 and "[NOT_FOUND]" in done.stderr and "list_runs" in done.stderr


def test_an_unknown_host_names_the_inventory_and_ssh_config_and_no_warning_reaches_stderr(env: Any) -> None:
    done = cli("call", "audit_box", '{"host": "nosuchhost"}')
    assert done.returncode == 1
    assert "[NOT_FOUND]" in done.stderr and str(env.config) in done.stderr and str(env.ssh_config) in done.stderr
    assert "[hosts.nosuchhost]" in done.stderr and "Name or service not known" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "Warning" in line] == []


def test_call_refuses_a_misspelled_argument(env: Any) -> None:
    done = cli("call", "reap_vram", '{"min_age_sec": 5}')
    assert done.returncode == 1 and "[BAD_INPUT]" in done.stderr and "did you mean min_age_s?" in done.stderr
