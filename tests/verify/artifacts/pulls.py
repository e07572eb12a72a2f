"""Helpers shared by the verify_artifacts tests: calling the tool until it is done, and
building small artifact files by hand."""

from __future__ import annotations

import importlib.util
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from tests.conftest import Caller, structured

HAS_TORCH = importlib.util.find_spec("torch") is not None


async def verify(client: Caller, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("verify_artifacts", {"host": "gpu1", **args}))


async def until_done(client: Caller, **args: Any) -> dict[str, Any]:
    for _ in range(60):
        r = await verify(client, **args)
        if r["done"]:
            return r
    raise AssertionError("never finished")


def write_checkpoint(path: Path) -> None:
    """A small PyTorch checkpoint: the real thing when torch is installed, else a zip with the
    same layout (what the structural checks read when torch is absent)."""
    if HAS_TORCH:
        import torch

        torch.save({"model_state_dict": {"w": torch.ones(3, 3)}, "epoch": 7}, path)
        return
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{path.stem}/data.pkl", b"\x80\x02}q\x00.")
        z.writestr(f"{path.stem}/data/0", b"\x00" * 36)
        z.writestr(f"{path.stem}/version", b"3\n")


def safetensors(tensors: dict[str, tuple[bytes, list[int]]], lie: int = 0) -> bytes:
    header, blob, off = {}, b"", 0
    for name, (raw, shape) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw) + lie]}
        blob += raw
        off += len(raw)
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob
