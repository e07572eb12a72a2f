"""Fixtures shared by the tool tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def local_box(env: Any, tmp_path: Path) -> Path:
    """Inventory host `gpu1` on this machine, with its own durable and scratch roots."""
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable),
                                  "scratch_root": str(tmp_path / "scratch")}})
    return durable
