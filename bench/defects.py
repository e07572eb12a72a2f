"""Planted-defect table for verify_artifacts' content checks (issue 21).

Generates realistic result cells (a sweep's per-cell folders with checkpoints, arrays, metrics
and logs), some whole and some with one planted defect each, runs `check_file` on every file
and prints one row per file: the defect, the verdict expected, the verdict got, and whether
that is caught, missed, crashed, a false alarm, or fine.

    python bench/defects.py                               # this checkout
    python bench/defects.py --loaders none                # structural checks alone (no torch/numpy)
    python bench/defects.py --package-root /tmp/orig      # an older checkout (any layout)
    python bench/defects.py --speed                       # check cost vs sha256 on a 256 MiB checkpoint

Needs torch and numpy to *generate* the files (both in the test environment); what the checker
may use is up to the checker (and --loaders)."""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import importlib
import inspect
import json
import pickle
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

# A real HDF5 file: h5py 3.16, `h5py.File(p, "w").create_dataset("loss", data=np.array([0.5, 0.25], "f4"))`,
# gzip -n, base64 (h5py is not a dependency, so the bytes travel here).
GOOD_H5 = gzip.decompress(base64.b64decode(
    "H4sIAAAAAAAAA+v0cHHj5ZLiYgABDg4GFgYBBmTwHwqAUih8mHwClGaE0h1QegUTTJwRLCcBFReEmo+uLiTI1RWk+j8agNljwAKhORhGwUgEHq6O"
    "ASA6AsqHpdITTKjqcvKLi0E0LD16UGgvIwMrxCxGGB+SkhkZIQIw62E0M1AeJCOoIM8ASbIKDOIcDOL1UHlWYAoGyTMxMYEN4ICax8wIS9roKbyD"
    "YTCBYD9/F1COhrlSgXlAnTMKRsEooAzYMzA02AEAOehx7QgIAAA="))


@dataclass
class Case:
    rel: str
    defect: str
    expect: str  # FAIL | PASS | NOT INSPECTED
    make: Callable[[Path], None]
    expect_keys: list[str] | None = None
    allow_pickle: bool = False
    got: str = ""
    outcome: str = ""
    detail: str = field(default="")


def _model(nan: bool = False) -> dict[str, Any]:
    w = torch.randn(64, 32)
    if nan:
        w[3, 5] = float("nan")
    return {"encoder.weight": w, "encoder.bias": torch.zeros(64), "head.weight": torch.randn(10, 64)}


def _ckpt(nan: bool = False) -> dict[str, Any]:
    return {"model": _model(nan), "optimizer": {"lr": 3e-4, "step": 1200}, "epoch": 12}


def _save(obj: Any, legacy: bool = False) -> Callable[[Path], None]:
    return lambda p: torch.save(obj, p, _use_new_zipfile_serialization=not legacy)


def _cut(make: Callable[[Path], None], keep: float) -> Callable[[Path], None]:
    def run(p: Path) -> None:
        make(p)
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * keep)])
    return run


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda p: p.write_bytes(data)


def _text(text: str) -> Callable[[Path], None]:
    return lambda p: p.write_text(text)


def _garbage(seed: int, prefix: bytes = b"") -> Callable[[Path], None]:
    rng = np.random.default_rng(seed)
    return _bytes(prefix + rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())


def _safetensors(nan: bool = False) -> Callable[[Path], None]:
    w = np.arange(48, dtype=np.float32).reshape(6, 8)
    if nan:
        w[2, 2] = np.nan
    b = np.ones(6, dtype=np.float32)
    header = {"w": {"dtype": "F32", "shape": [6, 8], "data_offsets": [0, w.nbytes]},
              "b": {"dtype": "F32", "shape": [6], "data_offsets": [w.nbytes, w.nbytes + b.nbytes]}}
    raw = json.dumps(header).encode()
    return _bytes(struct.pack("<Q", len(raw)) + raw + w.tobytes() + b.tobytes())


def _npy(nan: bool = False) -> Callable[[Path], None]:
    a = np.linspace(0, 1, 500, dtype=np.float32)
    if nan:
        a[7] = np.nan
    return lambda p: np.save(p, a)


def _npz(p: Path) -> None:
    with p.open("wb") as f:
        np.savez(f, emb=np.ones((20, 8), np.float32), ids=np.arange(20))


def _parquet(p: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": list(range(50)), "score": [i / 50 for i in range(50)]}), p)


def _flip_payload(p: Path) -> None:
    torch.save(_ckpt(), p)
    data = bytearray(p.read_bytes())
    at = data.find(b"data/0") + 200  # inside the first storage's bytes
    data[at] ^= 0xFF
    p.write_bytes(bytes(data))


class _Opaque:  # a class only this script can import: the checkpoint needs an unsafe load
    pass


def cases() -> list[Case]:
    good, bad = "cell_lr3e-4_seed0", "cell_lr1e-3_seed1"
    csv_ok = "epoch,loss,acc\n" + "".join(f"{i},{1 / (i + 1):.4f},{i / 10:.2f}\n" for i in range(10))
    return [
        Case(f"{good}/best.pth", "good zip checkpoint", "PASS", _save(_ckpt()), ["model"]),
        Case(f"{good}/legacy.pt", "good legacy (non-zip) checkpoint", "PASS", _save(_ckpt(), legacy=True), ["model"]),
        Case(f"{good}/last.ckpt", "good Lightning-style checkpoint", "PASS",
             _save({"state_dict": _model(), "epoch": 3, "global_step": 900}), ["state_dict"]),
        Case(f"{good}/pytorch_model.bin", "good bare state_dict (.bin), prefix key", "PASS", _save(_model()),
             ["encoder"]),
        Case(f"{good}/model.safetensors", "good safetensors", "PASS", _safetensors()),
        Case(f"{good}/preds.npy", "good npy", "PASS", _npy()),
        Case(f"{good}/emb.npz", "good npz", "PASS", _npz),
        Case(f"{good}/features.h5", "good HDF5", "PASS", _bytes(GOOD_H5)),
        Case(f"{good}/results.parquet", "good parquet", "PASS", _parquet),
        Case(f"{good}/metrics.json", "good metrics JSON", "PASS", _text('{"psnr": 31.42, "ssim": 0.91, "epoch": 0}')),
        Case(f"{good}/train_log.csv", "good CSV", "PASS", _text(csv_ok)),
        Case(f"{good}/scores.tsv", "good TSV", "PASS", _text("id\tscore\n1\t0.5\n2\t0.7\n")),
        Case(f"{good}/events.jsonl", "good JSONL", "PASS", _text('{"step": 1, "loss": 0.9}\n{"step": 2}\n')),
        Case(f"{good}/rng_state.pkl", "good pickle (allow_pickle)", "PASS",
             lambda p: p.write_bytes(pickle.dumps({"seed": 0, "state": list(range(10))})), allow_pickle=True),
        Case(f"{good}/tokenizer.bin", "opaque .bin blob (not a checkpoint)", "NOT INSPECTED", _garbage(1)),
        Case(f"{good}/notes.txt", "unknown type", "NOT INSPECTED", _text("lr=3e-4 looked fine\n")),
        Case(f"{bad}/best.pth", "truncated zip .pth (no central directory)", "FAIL", _cut(_save(_ckpt()), 0.6)),
        Case(f"{bad}/best_flipped.pth", "one flipped byte in a tensor (CRC)", "FAIL", _flip_payload),
        Case(f"{bad}/legacy_cut.pt", "truncated legacy .pt", "FAIL", _cut(_save(_ckpt(), legacy=True), 0.8)),
        Case(f"{bad}/empty.pth", "0-byte .pth", "FAIL", _bytes(b"")),
        Case(f"{bad}/empty.pt", "0-byte .pt", "FAIL", _bytes(b"")),
        Case(f"{bad}/empty.npy", "0-byte .npy", "FAIL", _bytes(b"")),
        Case(f"{bad}/empty.npz", "0-byte .npz", "FAIL", _bytes(b"")),
        Case(f"{bad}/empty.safetensors", "0-byte .safetensors", "FAIL", _bytes(b"")),
        Case(f"{bad}/empty.json", "0-byte .json", "FAIL", _bytes(b"")),
        *[Case(f"{bad}/garbage{ext}", f"garbage bytes {ext}", "FAIL", _garbage(i), allow_pickle=ext == ".pkl")
          for i, ext in enumerate([".pt", ".pth", ".ckpt", ".safetensors", ".npy", ".npz", ".h5", ".pkl"])],
        Case(f"{bad}/garbage_zip.bin", "garbage .bin that starts like a zip", "FAIL", _garbage(9, b"PK\x03\x04")),
        Case(f"{bad}/nan.safetensors", "NaN tensor in safetensors", "FAIL", _safetensors(nan=True)),
        Case(f"{bad}/nan.pth", "NaN tensor in a torch file", "FAIL", _save(_ckpt(nan=True))),
        Case(f"{bad}/nan_legacy.pt", "NaN tensor in a legacy torch file", "FAIL", _save(_ckpt(nan=True), legacy=True)),
        Case(f"{bad}/nan.npy", "NaN in an npy array", "FAIL", _npy(nan=True)),
        Case(f"{bad}/metrics.json", "NaN literal in metrics JSON", "FAIL", _text('{"psnr": NaN, "epoch": 3}')),
        Case(f"{bad}/metrics_inf.json", "Infinity literal, nested", "FAIL", _text('{"val": {"loss": Infinity}}')),
        Case(f"{bad}/train_log.csv", "CSV with its last row cut", "FAIL", _text(csv_ok + "10,0.09")),
        Case(f"{bad}/scores.tsv", "TSV with a short middle row", "FAIL", _text("id\tscore\n1\n2\t0.7\n")),
        Case(f"{bad}/events.jsonl", "JSONL with a cut last line", "FAIL", _text('{"step": 1}\n{"step": 2}\n{"st')),
        Case(f"{bad}/events_mid.jsonl", "JSONL with a broken middle line", "FAIL",
             _text('{"step": 1}\n{step: 2}\n{}\n')),
        Case(f"{bad}/no_model.pth", "checkpoint missing its model key", "FAIL",
             _save({"optimizer": {"lr": 1e-3}, "epoch": 3, "w": torch.ones(2)}), ["model"]),
        Case(f"{bad}/preds_cut.npy", "truncated npy", "FAIL", _cut(_npy(), 0.7)),
        Case(f"{bad}/model_cut.safetensors", "truncated safetensors", "FAIL", _cut(_safetensors(), 0.9)),
        Case(f"{bad}/emb_cut.npz", "truncated npz", "FAIL", _cut(_npz, 0.8)),
        Case(f"{bad}/features_cut.h5", "truncated HDF5", "FAIL", _bytes(GOOD_H5[:1500])),
        Case(f"{bad}/results_cut.parquet", "truncated parquet", "FAIL", _cut(_parquet, 0.7)),
        Case(f"{bad}/unsafe.pt", "checkpoint needing an unsafe pickle load", "FAIL",
             _save({"model": _model(), "obj": _Opaque()})),
    ]


def load_checker(package_root: Path | None) -> tuple[Callable[..., Any], set[str], str]:
    sys.path.insert(0, str(package_root or ROOT))
    for name in ("mcp_server.verify.artifacts.checks", "mcp_server.verify.checks"):
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        return mod.check_file, set(inspect.signature(mod.check_file).parameters), str(mod.__file__)
    raise SystemExit(f"no check_file under {package_root or ROOT}")


def judge(case: Case, check: Callable[..., Any], params: set[str], loaders: Any, path: Path) -> None:
    kwargs: dict[str, Any] = {}
    if case.expect_keys and "expect_keys" in params:
        kwargs["expect_keys"] = case.expect_keys
    if loaders is not None and "loaders" in params:
        kwargs["loaders"] = loaders
    try:
        v = check(path, case.rel, case.allow_pickle, **kwargs)
    except Exception as exc:
        case.got, case.outcome, case.detail = "CRASH", "crashed", f"{type(exc).__name__}: {exc}"
        return
    case.got = "FAIL" if not v.ok else ("NOT INSPECTED" if getattr(v, "inspected", True) is False else "PASS")
    case.detail = v.detail
    if case.expect == "FAIL":
        case.outcome = "caught" if case.got == "FAIL" else "MISSED"
    elif case.got == "FAIL":
        case.outcome = "FALSE ALARM"
    else:
        case.outcome = "ok" if case.got == case.expect else f"ok ({case.got.lower()})"


def table(all_cases: list[Case]) -> None:
    print("| file | planted | expected | got | outcome | detail |")
    print("|---|---|---|---|---|---|")
    for c in all_cases:
        detail = " ".join(c.detail.split())[:90].replace("|", "/")
        print(f"| {c.rel} | {c.defect} | {c.expect} | {c.got} | {c.outcome} | {detail} |")
    defects = [c for c in all_cases if c.expect == "FAIL"]
    good = [c for c in all_cases if c.expect != "FAIL"]
    n = Counter(c.outcome for c in all_cases)
    print(f"\ndefects: {n['caught']}/{len(defects)} caught, {n['MISSED']} missed, "
          f"{sum(c.outcome == 'crashed' for c in defects)} crashed; good files: {n['FALSE ALARM']}/{len(good)} "
          f"false alarms, {sum(c.outcome == 'crashed' for c in good)} crashed")


def speed(check: Callable[..., Any], params: set[str]) -> None:
    """Check cost as a ratio of sha256 over the same 256 MiB checkpoint (both measured here, now)."""
    with tempfile.TemporaryDirectory(prefix="rgt-defects-") as tmp:
        path = Path(tmp) / "big.pth"
        torch.save({"model": {f"layer{i}.weight": torch.randn(1024, 1024) for i in range(64)}}, path)

        def sha() -> None:
            h = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)

        base = _median(sha)
        print(f"sha256 of {path.stat().st_size >> 20} MiB: {base:.3f} s (baseline)")
        modes: list[tuple[str, dict[str, Any]]] = [("installed loaders", {})]
        if "loaders" in params:
            loaders = importlib.import_module("mcp_server.verify.artifacts.checks_base").Loaders
            modes += [("numpy only (no torch)", {"loaders": loaders(numpy=True)}),
                      ("structural only", {"loaders": loaders.none()})]
        for label, extra in modes:
            t = _median(lambda extra=extra: check(path, "big.pth", False, **extra))
            print(f"check_file, {label}: {t:.3f} s = {t / base:.2f}x sha256")


def _median(fn: Callable[[], object], n: int = 3) -> float:
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package-root", type=Path, help="checkout whose check_file to run (default: this one)")
    ap.add_argument("--loaders", choices=["installed", "none", "numpy"], default="installed",
                    help="optional loaders the checker may use (only checkers that take `loaders`)")
    ap.add_argument("--speed", action="store_true", help="also time a 256 MiB checkpoint against sha256")
    args = ap.parse_args()
    check, params, where = load_checker(args.package_root)
    loaders = None
    if args.loaders != "installed":
        if "loaders" not in params:
            raise SystemExit("this checkout's check_file takes no `loaders`")
        base = importlib.import_module("mcp_server.verify.artifacts.checks_base")
        loaders = base.Loaders.none() if args.loaders == "none" else base.Loaders(numpy=True)
    print(f"check_file from {where} (loaders: {args.loaders})\n")
    all_cases = cases()
    with tempfile.TemporaryDirectory(prefix="rgt-defects-") as tmp:
        for case in all_cases:
            path = Path(tmp) / case.rel
            path.parent.mkdir(parents=True, exist_ok=True)
            case.make(path)
            judge(case, check, params, loaders, path)
    table(all_cases)
    if args.speed:
        print()
        speed(check, params)


if __name__ == "__main__":
    main()
