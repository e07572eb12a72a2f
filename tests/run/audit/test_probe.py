"""The audit probe script (scripts/audit_probe.sh) run for real, locally and over the test sshd,
and the parser that splits its output into sections."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from mcp_server import scripts
from mcp_server.run.audit.nvidia import Q_APPS, Q_CLOCKS, Q_DMON, Q_GPU, Q_PERF
from mcp_server.run.audit.probe import ProbeSection, build_script, parse_sections


@pytest.mark.parametrize("query", [Q_GPU, Q_APPS, Q_CLOCKS, Q_PERF, Q_DMON])
def test_the_probe_runs_exactly_the_queries_the_parsers_read(query) -> None:
    assert query in scripts.load("audit_probe")


def test_sections_split_with_their_exit_codes_and_a_cut_short_one_is_kept() -> None:
    text = "noise\n@@RGT-BEGIN a\none\ntwo\n\n@@RGT-END a 0\n@@RGT-BEGIN b\nx\n\n@@RGT-END b 3\n@@RGT-BEGIN c\nhalf"
    assert parse_sections(text) == {
        "a": ProbeSection(0, "one\ntwo"), "b": ProbeSection(3, "x"), "c": ProbeSection(-1, "half"),
    }


@pytest.fixture
def live_run(tmp_path):
    """A run dir under tmp_path/durable whose wrapper is alive (it sleeps while the test runs)."""
    run = tmp_path / "durable" / ".rgt" / "runs" / "live"
    run.mkdir(parents=True)
    (run / "wrapper.sh").write_text("sleep 60\n")
    (run / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    proc = subprocess.Popen(["sh", str(run / "wrapper.sh")])
    (run / "pid").write_text(f"{proc.pid}\n")
    yield run
    proc.kill()
    proc.wait()


@pytest.fixture
def code_dir(tmp_path):
    code = tmp_path / "code dir"
    code.mkdir()
    (code / "train.sh").write_bytes(b"echo a\r\necho b\r\n")
    (code / "ok.sh").write_bytes(b"echo ok\n")
    (code / "requirements.txt").write_text("numpy\ntorch==2.3.1\n")
    return code


async def test_every_section_comes_back_with_the_arguments_in_place(any_host, tmp_path, code_dir, live_run) -> None:
    durable = tmp_path / "durable"
    (durable / ".rgt" / "runs" / "old").mkdir()
    (durable / ".rgt" / "runs" / "old" / "exit_code").write_text("0\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    script = build_script(
        mounts=["/", str(durable), str(tmp_path / "not" / "yet")], durable_root=str(durable), python=None,
        proxy_hook="export HF_ENDPOINT=https://mirror.example", cache_dirs=[str(cache), str(tmp_path / "none")],
        code_dir=str(code_dir), expect_files={str(code_dir / "ok.sh"): "", str(code_dir / "gone.sh"): ""},
    )
    sections = parse_sections((await any_host.run(script, timeout=60)).text)

    mounts = [line.split("\t")[0] for line in sections["mounts"].text.splitlines() if line.startswith("path=")]
    assert mounts == ["path=/", f"path={durable}", f"path={tmp_path}/not/yet"]
    assert sections["probe"].text == "ok"
    assert sections["envhook"].text.splitlines() == ["HF_ENDPOINT=https://mirror.example"]
    assert sections["caches"].text.split("\t")[1] == str(cache)
    assert sections["crlf"].text.splitlines() == [f"2\t{code_dir}/train.sh", "scanned=2"]
    assert "torch==2.3.1" in sections["pins"].text and "numpy" not in sections["pins"].text
    digest = hashlib.sha256(b"echo ok\n").hexdigest()
    assert sections["hashes"].text.splitlines() == [f"{digest}  {code_dir}/ok.sh", f"missing  {code_dir}/gone.sh"]
    assert sections["runs"].text == "live=1", "the live run counts, the finished one does not"
    assert "executable" in json.loads(sections["python"].text.splitlines()[-1])
    assert all(s.rc == 0 for name, s in sections.items() if name not in ("dmesg", "holders")), sections


async def test_optional_sections_are_left_out_when_not_asked(any_host, tmp_path) -> None:
    script = build_script(mounts=["~"], durable_root="~/nowhere", python=None, proxy_hook=None,
                          cache_dirs=[], code_dir=None, expect_files={})
    sections = parse_sections((await any_host.run(script, timeout=60)).text)
    home = (await any_host.run('echo "$HOME"')).text.strip()
    assert sections["mounts"].text.startswith(f"path={home}\t")
    assert sections["probe"].text == "absent"
    assert not {"envhook", "caches", "crlf", "pins", "hashes"} & set(sections)
