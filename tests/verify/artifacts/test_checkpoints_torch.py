"""verify_artifacts on checkpoints torch itself wrote: these need torch (installed by scripts/test)
and skip without it. The same files are judged with torch loading them and with the structural
checks alone (no loader, or numpy only), and the verdicts must agree. The torch-free story on
hand-built files of the same formats is in test_checks.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mcp_server.verify.artifacts.checks import Loaders, check_file
from tests.conftest import Caller
from tests.support.checkpoints import torch_legacy, torch_zip
from tests.verify.artifacts.pulls import safetensors, until_done
from tests.verify.artifacts.test_checks import WEIGHTS, flip_first_tensor_byte

torch = pytest.importorskip("torch", reason="torch is installed by scripts/test; checkpoint loads need it")

LOADERS = [pytest.param(None, id="torch"), pytest.param(Loaders(numpy=True), id="numpy-only"),
           pytest.param(Loaders.none(), id="no-loaders")]


class Opaque:
    pass


def _saved(obj: object, legacy: bool = False) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def _ckpt(nan: bool = False) -> dict[str, object]:
    w = torch.randn(8, 4)
    if nan:
        w[1, 2] = float("nan")
    return {"model": {"encoder.weight": w, "encoder.bias": torch.zeros(8)}, "optimizer": {"lr": 1e-3}, "epoch": 0}


def _check(tmp: Path, rel: str, data: bytes, loaders: Loaders | None, **kw: object):  # -> FileVerdict
    path = tmp / rel
    path.write_bytes(data)
    return check_file(path, rel, loaders=loaders, **kw)


DEFECTS = {
    "truncated zip .pth": ("best.pth", lambda: _saved(_ckpt())[:-300], "load_error", "cut short"),
    "zip cut at 60%": ("cut.pth", lambda: (lambda b: b[: len(b) * 6 // 10])(_saved(_ckpt())), "load_error",
                       "cut short"),
    "flipped tensor byte": ("flip.pth", lambda: flip_first_tensor_byte(_saved(_ckpt())), "load_error", "CRC"),
    "truncated legacy .pt": ("legacy.pt", lambda: _saved(_ckpt(), legacy=True)[:-10], "load_error", "cut short"),
    "0-byte .pt": ("empty.pt", lambda: b"", "empty", "0 bytes"),
    "missing model key": ("nomodel.pth", lambda: _saved({"state_dict": _ckpt()["model"]}), "missing_key",
                          "['model'] absent"),
    "needs unsafe pickle": ("pickled.pt", lambda: _saved({"w": torch.ones(2), "obj": Opaque()}), "unsafe_pickle",
                            "Opaque"),
    "legacy needs unsafe pickle": ("pickled_legacy.pt", lambda: _saved({"obj": Opaque()}, legacy=True),
                                   "unsafe_pickle", "Opaque"),
}


@pytest.mark.parametrize("loaders", LOADERS)
@pytest.mark.parametrize("name", list(DEFECTS))
def test_torch_written_defects_fail_the_same_way_with_or_without_torch(tmp_path, name, loaders) -> None:
    rel, make, finding, says = DEFECTS[name]
    v = _check(tmp_path, rel, make(), loaders, expect_keys=["model"])
    assert (v.ok, v.finding) == (False, finding), v.detail
    assert says in v.detail, v.detail


@pytest.mark.parametrize("loaders", LOADERS[:2])
@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64])
def test_a_nan_or_inf_in_any_float_dtype_is_found_by_torch_and_by_the_bit_scan(tmp_path, dtype, legacy,
                                                                               loaders) -> None:
    t = torch.ones(6, dtype=dtype)
    t[4] = float("inf") if dtype != torch.complex64 else complex(float("nan"), 0)
    v = _check(tmp_path, "nan.pt", _saved({"model": {"w": t}}, legacy), loaders)
    assert v.finding == "non_finite" and "model.w" in v.detail


GOOD = {
    "zip checkpoint": lambda: _saved(_ckpt()),
    "legacy checkpoint": lambda: _saved(_ckpt(), legacy=True),
    "module state_dict with buffers": lambda: _saved(
        {"model": torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).state_dict()}),
    "parameters and views of one storage": lambda: _saved(
        {"model": {"p": torch.nn.Parameter(torch.ones(3)), "a": torch.arange(20.0)[5:10],
                   "t": torch.arange(20.0).view(4, 5).t()}}),
    "torch metadata types": lambda: _saved({"model": {"w": torch.ones(1)}, "size": torch.Size([2]), "s": {1},
                                            "dev": torch.device("cpu"), "dtype": torch.float16, "c": complex(1, 2)}),
    "sparse tensor": lambda: _saved({"model": {"w": torch.eye(3).to_sparse()}}),
    "every dtype": lambda: _saved({"model": {str(dt): torch.ones(3).to(dt) for dt in (
        torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.int8, torch.bool)}}),
    "bare tensor list": lambda: _saved({"model": [torch.ones(2), torch.zeros(3)]}),
}


@pytest.mark.parametrize("loaders", LOADERS)
@pytest.mark.parametrize("name", list(GOOD))
def test_checkpoints_torch_writes_pass_with_or_without_torch(tmp_path, name, loaders) -> None:
    v = _check(tmp_path, "good.pt", GOOD[name](), loaders, expect_keys=["model"])
    assert v.ok and v.finding is None, v.detail


@pytest.mark.parametrize("build", [torch_zip, torch_legacy], ids=["zip", "legacy"])
def test_the_hand_built_checkpoints_of_the_torch_free_tests_are_real_ones(tmp_path, build) -> None:
    path = tmp_path / "hand.pt"
    path.write_bytes(build(WEIGHTS))
    loaded = torch.load(path, weights_only=True)
    assert loaded["model"]["encoder.weight"].tolist() == WEIGHTS["encoder.weight"]


def test_a_checkpoint_above_the_full_check_size_gets_its_structure_checked_only(tmp_path, monkeypatch) -> None:
    from mcp_server.verify.artifacts import checks_base

    monkeypatch.setattr(checks_base, "FULL_CHECK_MAX", 100)
    good = _check(tmp_path, "big.pth", _saved(_ckpt(nan=True)), None)
    cut = _check(tmp_path, "cut.pth", _saved(_ckpt())[:-300], None)
    assert good.ok and "not scanned or loaded within the call budget" in good.detail
    assert cut.finding == "load_error"


async def test_a_real_checkpoint_is_loaded_weights_only(results: Path, client: Caller) -> None:
    r = await until_done(client, root=str(results), roster=["seed1/best.pth"])
    (v,) = r["verdicts"]
    assert r["passed"] and v["ok"] and "weights_only" in v["detail"]


async def test_a_pull_with_a_truncated_and_an_empty_checkpoint_is_not_verified(results: Path, client: Caller) -> None:
    data = (results / "seed1" / "best.pth").read_bytes()
    (results / "seed2").mkdir()
    (results / "seed2" / "best.pth").write_bytes(data[: len(data) // 2])
    (results / "seed3").mkdir()
    (results / "seed3" / "best.pth").write_bytes(b"")
    (results / "notes.txt").write_text("fine")
    r = await until_done(client, root=str(results), roster=["seed*/best.pth", "notes.txt"])
    kinds = {f["path"]: f["kind"] for f in r["findings"] if f["blocking"]}
    assert r["passed"] is False and "do not tear down" in r["next_step"]
    assert kinds == {"seed2/best.pth": "load_error", "seed3/best.pth": "empty"}
    verdicts = {v["path"]: v for v in r["verdicts"]}
    assert verdicts["notes.txt"]["ok"] and verdicts["notes.txt"]["inspected"] is False


async def test_checkpoint_checks_give_the_right_verdicts(results: Path, client: Caller) -> None:
    ck = results / "ck"
    ck.mkdir()
    (ck / "corrupt.pt").write_bytes(flip_first_tensor_byte(_saved({"w": torch.ones(64)})))
    (ck / "lying.safetensors").write_bytes(safetensors({"w": (b"\x00" * 16, [4])}, lie=64))
    torch.save({"w": torch.ones(2), "obj": Opaque()}, ck / "pickled.pt")
    torch.save({"w": torch.tensor([1.0, float("nan")])}, ck / "nan.pt")
    r = await until_done(client, root=str(ck), roster=["*"])
    kinds = {f["path"]: f["kind"] for f in r["findings"]}
    assert kinds == {"corrupt.pt": "load_error", "lying.safetensors": "load_error",
                     "pickled.pt": "unsafe_pickle", "nan.pt": "non_finite"}
    detail = {v["path"]: v["detail"] for v in r["verdicts"]}
    assert "CRC" in detail["corrupt.pt"] and "outside" in detail["lying.safetensors"]
    assert "Opaque" in detail["pickled.pt"] and "allow_pickle" in detail["pickled.pt"]


async def test_unsafe_pickle_loads_only_when_the_call_opts_in(results: Path, client: Caller) -> None:
    ck = results / "trusted"
    ck.mkdir()
    torch.save({"w": torch.ones(2), "meta": {"lr": 1e-3}, "obj": Opaque()}, ck / "legacy.pt")
    r = await until_done(client, root=str(ck), roster=["legacy.pt"], allow_pickle=True)
    # The class lives in the test module: unpickling it for real needs the opt-in.
    (v,) = r["verdicts"]
    assert "UNSAFE pickle load" in v["detail"] and v["ok"]
