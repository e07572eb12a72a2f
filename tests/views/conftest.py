"""Fixtures of the view tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def billed_box(env: Any, tmp_path: Path) -> Path:
    """Inventory host `gpu1`: this machine as a billed generic SSH box (2.50 USD/h), with its own
    durable root; returns that root."""
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "profile": "generic-ssh", "hourly_price": 2.5,
                                  "durable_root": str(durable)}})
    return durable
