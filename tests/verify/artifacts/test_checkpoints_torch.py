"""verify_artifacts' PyTorch checkpoint checks: these load real checkpoints, so they need torch
(installed by scripts/test). Everything else about verify_artifacts is in test_verify_artifacts.py."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest

from tests.conftest import Caller
from tests.verify.artifacts.pulls import safetensors, until_done

torch = pytest.importorskip("torch", reason="torch is installed by scripts/test; checkpoint loads need it")


class Opaque:
    pass


def _corrupt_tensor_payload(path: Path) -> None:
    with zipfile.ZipFile(path) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)  # local header, not central
    start = info.header_offset + 30 + name_len + extra_len
    for k in range(start, start + 8):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))


async def test_a_real_checkpoint_is_loaded_weights_only(results: Path, client: Caller) -> None:
    r = await until_done(client, root=str(results), roster=["seed1/best.pth"])
    (v,) = r["verdicts"]
    assert r["passed"] and v["ok"] and "weights_only" in v["detail"]


async def test_checkpoint_checks_give_the_right_verdicts(results: Path, client: Caller) -> None:
    ck = results / "ck"
    ck.mkdir()
    torch.save({"w": torch.ones(64)}, ck / "corrupt.pt")
    _corrupt_tensor_payload(ck / "corrupt.pt")
    (ck / "lying.safetensors").write_bytes(safetensors({"w": (b"\x00" * 16, [4])}, lie=64))
    torch.save({"w": torch.ones(2), "obj": Opaque()}, ck / "pickled.pt")
    torch.save({"w": torch.tensor([1.0, float("nan")])}, ck / "nan.pt")
    r = await until_done(client, root=str(ck), roster=["*"])
    kinds = {f["path"]: f["kind"] for f in r["findings"]}
    assert kinds == {"corrupt.pt": "load_error", "lying.safetensors": "load_error",
                     "pickled.pt": "unsafe_pickle", "nan.pt": "non_finite"}
    detail = {v["path"]: v["detail"] for v in r["verdicts"]}
    assert "CRC" in detail["corrupt.pt"] and "outside" in detail["lying.safetensors"]
    assert "Unsupported global" in detail["pickled.pt"]


async def test_unsafe_pickle_loads_only_when_the_call_opts_in(results: Path, client: Caller) -> None:
    ck = results / "trusted"
    ck.mkdir()
    torch.save({"w": torch.ones(2), "meta": {"lr": 1e-3}, "obj": Opaque()}, ck / "legacy.pt")
    r = await until_done(client, root=str(ck), roster=["legacy.pt"], allow_pickle=True)
    # The class lives in the test module: unpickling it for real needs the opt-in.
    (v,) = r["verdicts"]
    assert "UNSAFE pickle load" in v["detail"] and v["ok"]
