"""Helpers shared by the verify_artifacts tests: calling the tool until it is done, and
building small artifact files by hand."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any

from mcp_server.verify.artifacts.spans import SpanPlan, plan_file
from mcp_server.verify.artifacts.state import state_dir
from tests.conftest import Caller, structured
from tests.support.checkpoints import torch_zip

HAS_TORCH = importlib.util.find_spec("torch") is not None


async def verify(client: Caller, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("verify_artifacts", {"host": "gpu1", **args}))


async def until_done(client: Caller, **args: Any) -> dict[str, Any]:
    for _ in range(60):
        r = await verify(client, **args)
        if r["done"]:
            return r
    raise AssertionError("never finished")


def held(dest: Path, path: str) -> int:
    """Bytes of a file's partial copy the pull holds: its piece plan's count when the file travels in
    pieces (written at their offsets, so the partial's size says nothing), else the partial's size."""
    partial = state_dir(dest) / "partial" / path
    plan = plan_file(dest, partial)
    return SpanPlan.model_validate_json(plan.read_bytes()).held() if plan.exists() else partial.stat().st_size


def write_checkpoint(path: Path) -> None:
    """A small PyTorch checkpoint: torch.save's own when torch is installed, else the same zip
    format written byte by byte (what the structural checks read when torch is absent)."""
    if HAS_TORCH:
        import torch

        torch.save({"model_state_dict": {"w": torch.ones(3, 3)}, "epoch": 7}, path)
        return
    path.write_bytes(torch_zip({"w": [1.0] * 9}, wrap="model_state_dict", name=path.stem))


def safetensors(tensors: dict[str, tuple[bytes, list[int]]], lie: int = 0) -> bytes:
    header, blob, off = {}, b"", 0
    for name, (raw, shape) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw) + lie]}
        blob += raw
        off += len(raw)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob
