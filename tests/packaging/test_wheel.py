"""Installed as users install it: the wheel built from this tree, in a fresh venv outside the
clone, with the locked dependencies, runs `demo`, `tools` and a resource read from there, and
carries the knowledge base and the on-box scripts. Needs the package index (the lock's wheels, the
build backend): CI has it; uv's cache makes a rerun fast."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mcp_server import __version__

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"{cmd[0]} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not UV.exists():
        pytest.fail(f"no uv beside the test interpreter ({UV}); scripts/install puts it there")
    out = tmp_path_factory.mktemp("dist")
    _run(UV, "build", "--wheel", "--quiet", "--out-dir", out, "--build-constraints", ROOT / "requirements/build.lock",
         ROOT, cwd=out)
    built = sorted(out.glob("remote_gpu_trainer_mcp-*.whl"))
    assert len(built) == 1, built
    return built[0]


def test_the_wheel_carries_the_knowledge_base_and_the_box_scripts(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert wheel.name.startswith(f"remote_gpu_trainer_mcp-{__version__}-")
    tree_scripts = {f"mcp_server/scripts/{p.name}" for p in (ROOT / "mcp_server/scripts").glob("*.sh")}
    assert tree_scripts and tree_scripts <= names, sorted(tree_scripts - names)[:5]
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "references").rglob("*.md")}
    assert {f"mcp_server/_knowledge/{p}" for p in pages} <= names
    assert any(n.startswith("mcp_server/_knowledge/profiles/") for n in names)
    assert "mcp_server/demo/train_tiny.py" in names


def test_the_installed_wheel_runs_outside_the_clone(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    py = venv / "bin" / "python"
    _run(UV, "pip", "install", "--quiet", "--python", py, "--require-hashes", "-r", ROOT / "requirements/run.lock",
         cwd=tmp_path)
    _run(UV, "pip", "install", "--quiet", "--python", py, "--no-deps", wheel, cwd=tmp_path)
    exe = venv / "bin" / "remote-gpu-trainer-mcp"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"RGT_HOME": str(tmp_path / "home"), "RGT_CONFIG": str(tmp_path / "absent.toml")}
    where = _run(py, "-c", "import mcp_server; print(mcp_server.__file__)", cwd=tmp_path, env=env)
    assert str(ROOT) not in where and str(venv) in where, "imported from the clone, not the installed wheel"

    assert _run(exe, "--version", cwd=tmp_path, env=env).strip() == __version__
    listing = _run(exe, "tools", cwd=tmp_path, env=env)
    assert "launch_detached" in listing and "verify_artifacts" in listing
    page = _run(exe, "read", "references://index", cwd=tmp_path, env=env)
    assert "teardown" in page.lower() and len(page) > 500
    demo = _run(exe, "demo", "--dir", tmp_path / "demo", cwd=tmp_path, env=env)
    assert "all 3 runs succeeded" in demo and "passed:" in demo
