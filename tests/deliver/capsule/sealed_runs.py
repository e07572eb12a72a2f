"""Helpers of the capsule-seal tests: tiny runs launched on the test box `gpu1` (the real sshd),
pulled by the real verify_artifacts, and sealed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mcp_server.deliver.capsule.seal import SealResult, seal_capsule
from mcp_server.ledger import Ledger
from tests.conftest import Caller, Env, structured
from tests.support.wait import until_sync
from tests.verify.artifacts.pulls import until_done, write_checkpoint

SCRIPT = Path(__file__).with_name("tiny_seed_run.py")
ROSTER = ["best.pth", "config.yaml", "train.csv", "test/**"]


def _assets(root: Path) -> Path:
    assets = root / "assets"
    assets.mkdir(exist_ok=True)
    write_checkpoint(assets / "best.pth")
    pq.write_table(pa.table({"sample_id": [0, 1], "correct": [True, False]}), assets / "results.parquet")
    return assets


def _git_workdir(work: Path) -> None:
    """A git work tree with one commit and an uncommitted file: the run's code is dirty."""
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                       capture_output=True)
    (work / "model.py").write_text("W = 1\n")
    git("init", "-q")
    git("add", "model.py")
    git("commit", "-q", "-m", "model")
    (work / "model.py").write_text("W = 2\n")


async def verified_pulls(client: Caller, env: Env, root: Path, seeds: list[int], git: bool = False) -> list[Path]:
    """One tiny run per seed on gpu1, each pulled and verified: their PULL_VERIFIED.json paths."""
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(root)}})
    assets = _assets(root)
    out = []
    for seed in seeds:
        work = root / f"work-{seed}"
        work.mkdir()
        if git:
            _git_workdir(work)
        launched = structured(await client.call_tool("launch_detached", {
            "host": "gpu1", "command": f"python3 {SCRIPT} --seed {seed} --assets {assets}", "workdir": str(work),
            "outputs": ROSTER, "probe_s": 0}))["outcomes"][0]["launch"]
        exit_code = Path(launched["run_dir"]) / "exit_code"
        until_sync(exit_code.is_file, timeout=30, what="the tiny run to end")
        assert exit_code.read_text().strip() == "0"
        pulled = await until_done(client, run_id=launched["run_id"])
        assert pulled["passed"] is True, pulled["findings"]
        out.append(Path(pulled["verified_path"]))
    return out


def seal(env: Env, project: Path, pull: Path, **kw: object) -> SealResult:
    ledger = Ledger.open(env.home / "ledger.sqlite")
    try:
        return seal_capsule(project, pull, roles=None, evaluate=None, ledger=ledger, **kw)  # type: ignore[arg-type]
    finally:
        ledger.close()


async def sealed_capsules(client: Caller, env: Env, root: Path, seeds: list[int]) -> tuple[Path, list[str]]:
    """A project with one sealed capsule per seed: the project and the run ids."""
    project = root / "project"
    pulls = await verified_pulls(client, env, root, seeds)
    return project, [seal(env, project, p).run_id for p in pulls]
