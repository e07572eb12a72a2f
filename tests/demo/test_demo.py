"""`remote-gpu-trainer-mcp demo` end to end, as a new user runs it: a subprocess with its own
RGT_HOME, every step through the real MCP client on this machine, the curve PNG decodes at the
documented size, the stale number in the bundled report is flagged, nothing lands outside the
demo folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

STEPS = ("audit_box", "push_code", "preflight", "launch_detached", "wait_for_run", "plot_run", "verify_artifacts",
         "run_probe (mde)", "reconcile_evidence", "teardown (plan)")


def _demo(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RGT_HOME": str(tmp_path / "home"), "RGT_CONFIG": str(tmp_path / "absent.toml")}
    return subprocess.run([sys.executable, "-m", "mcp_server", "demo", *extra], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def test_the_demo_runs_the_whole_lifecycle_and_says_where_each_file_is(tmp_path: Path) -> None:
    done = _demo(tmp_path, "--dir", str(tmp_path / "demo"))
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    for step in STEPS:
        assert f"  {step}" in out, step
    assert "all 3 runs succeeded" in out and "passed:" in out and "stale: " in out
    png = tmp_path / "demo" / "curves.png"
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    assert mpimg.imread(png).shape[:2] == (450, 800)
    assert str(png) in out and "PULL_VERIFIED.json" in out
    assert not (tmp_path / "home" / "ledger.sqlite").exists(), "the demo keeps its own state, not the user's"


def test_the_demo_refuses_a_folder_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep")
    done = _demo(tmp_path, "--dir", str(tmp_path / "busy"))
    assert done.returncode == 2 and "not empty" in done.stderr
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep"


def test_the_demo_in_its_default_folder_under_rgt_home_runs_every_step(tmp_path: Path) -> None:
    """The README's first command: no --dir, so the demo's folder (with its own state) lies under the
    user's $RGT_HOME; the path policy keeps the serving server's state out of reach, not the
    environment's, so the demo's own paper and box are readable."""
    done = _demo(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reconcile_evidence" in done.stdout and str(tmp_path / "home" / "demo") in done.stdout
