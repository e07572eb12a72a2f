"""The result directory most verify_artifacts tests pull from, on the test box `gpu1`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Env
from tests.support.sshd import Sshd
from tests.verify.artifacts.pulls import write_checkpoint


@pytest.fixture
def results(env: Env, box: Sshd, tmp_path: Path) -> Path:
    env.write_inventory({"gpu1": {"destination": "testbox", "durable_root": str(tmp_path)}})
    root = tmp_path / "export" / "run-1"
    (root / "seed1").mkdir(parents=True)
    (root / "seed1" / "metrics.json").write_text(json.dumps({"psnr": 31.42, "epoch": 0}))
    write_checkpoint(root / "seed1" / "best.pth")
    (root / "train.csv").write_text("epoch,loss\n0,1.2\n1,0.9\n")
    return root
