"""check_file over every file family, without torch: each planted defect is named and fails,
every good file passes, nothing crashes the checker. Checkpoints here are built byte by byte in
torch's own formats (zip and legacy), so the structural checks are proven with no loader at all;
test_checkpoints_torch.py repeats the story on files torch itself wrote."""

from __future__ import annotations

import base64
import gzip
import io
import json
import logging
import pickle
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.verify.artifacts import checks
from mcp_server.verify.artifacts.checks import FileVerdict, Loaders, check_file
from tests.support.checkpoints import torch_legacy, torch_zip

# A real HDF5 file: h5py 3.16, `h5py.File(p, "w").create_dataset("loss", data=np.array([0.5, 0.25], "f4"))`,
# then gzip -n and base64.
GOOD_H5 = gzip.decompress(base64.b64decode(
    "H4sIAAAAAAAAA+v0cHHj5ZLiYgABDg4GFgYBBmTwHwqAUih8mHwClGaE0h1QegUTTJwRLCcBFReEmo+uLiTI1RWk+j8agNljwAKhORhGwUgEHq6O"
    "ASA6AsqHpdITTKjqcvKLi0E0LD16UGgvIwMrxCxGGB+SkhkZIQIw62E0M1AeJCOoIM8ASbIKDOIcDOL1UHlWYAoGyTMxMYEN4ICax8wIS9roKbyD"
    "YTCBYD9/F1COhrlSgXlAnTMKRsEooAzYMzA02AEAOehx7QgIAAA="))

NO_LOADERS = Loaders.none()
NUMPY_ONLY = Loaders(numpy=True)
LOADER_SETS = [pytest.param(NO_LOADERS, id="no-loaders"), pytest.param(NUMPY_ONLY, id="numpy-only"),
               pytest.param(None, id="installed")]


def safetensors(tensors: dict[str, list[float]]) -> bytes:
    header, blob = {}, b""
    for name, values in tensors.items():
        raw = np.asarray(values, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": [len(values)], "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


def npy(values: list[float]) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(values, dtype=np.float32))
    return buf.getvalue()


def npz(**arrays: list[float]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()})
    return buf.getvalue()


def parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"id": [1, 2, 3], "score": [0.1, 0.2, 0.3]}), buf)
    return buf.getvalue()


def flip_first_tensor_byte(data: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = next(i for i in z.infolist() if "/data/" in i.filename)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)  # the local header's
    at = info.header_offset + 30 + name_len + extra_len
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


def cut(data: bytes, keep: float) -> bytes:
    return data[: int(len(data) * keep)]


def garbage(n: int = 2048, prefix: bytes = b"") -> bytes:
    return prefix + np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()


WEIGHTS = {"encoder.weight": [0.5, -1.0, 2.0, 0.25], "encoder.bias": [0.0, 0.1]}
CSV = "epoch,loss,acc\n0,1.20,0.10\n1,0.90,0.40\n"


def run(tmp: Path, rel: str, data: bytes, loaders: Loaders | None = None, **kw: object) -> FileVerdict:
    path = tmp / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return check_file(path, rel, loaders=loaders, **kw)


# --- the planted defects ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Planted:
    name: str
    rel: str
    data: Callable[[], bytes]
    finding: str
    says: str
    expect_keys: tuple[str, ...] = ()


STRUCTURAL = [
    Planted("truncated zip .pth (no central directory)", "best.pth", lambda: cut(torch_zip(WEIGHTS), 0.6),
            "load_error", "cut short"),
    Planted("flipped byte in a zip tensor", "flip.pth", lambda: flip_first_tensor_byte(torch_zip(WEIGHTS)),
            "load_error", "CRC"),
    Planted("zip without data.pkl", "nodata.pt", lambda: npz(a=[1.0]), "load_error", "no data.pkl"),
    Planted("truncated legacy .pt", "legacy.pt", lambda: torch_legacy(WEIGHTS)[:-6], "load_error", "cut short"),
    Planted("legacy .pt with trailing bytes", "legacy2.pt", lambda: torch_legacy(WEIGHTS) + b"\x00" * 5,
            "load_error", "follow the last storage"),
    Planted("plain pickle named .pt", "plain.pt", lambda: pickle.dumps({"model": 1}, protocol=2), "load_error",
            "not a PyTorch checkpoint"),
    Planted("garbage .pt", "garbage.pt", garbage, "load_error", "neither a zip-format nor a legacy"),
    Planted("garbage .ckpt", "garbage.ckpt", garbage, "load_error", "neither a zip-format nor a legacy"),
    Planted("garbage .bin that starts like a zip", "garbage.bin", lambda: garbage(prefix=b"PK\x03\x04"),
            "load_error", "cut short"),
    Planted("garbage .safetensors", "garbage.safetensors", garbage, "load_error", "exceeds the file"),
    Planted("garbage .npy", "garbage.npy", garbage, "load_error", "no npy magic"),
    Planted("garbage .npz", "garbage.npz", garbage, "load_error", "zip central directory"),
    Planted("garbage .h5", "garbage.h5", garbage, "load_error", "no HDF5 signature"),
    Planted("garbage .pkl", "garbage.pkl", garbage, "load_error", "does not parse"),
    Planted("garbage .parquet", "garbage.parquet", garbage, "load_error", "PAR1"),
    Planted("truncated npy", "preds.npy", lambda: cut(npy([0.5] * 100), 0.7), "load_error", "cut short"),
    Planted("truncated safetensors", "w.safetensors", lambda: cut(safetensors(WEIGHTS), 0.95), "load_error",
            "outside"),
    Planted("truncated npz", "emb.npz", lambda: cut(npz(a=[1.0] * 50), 0.8), "load_error", "cut short"),
    Planted("truncated HDF5", "f.h5", lambda: GOOD_H5[:1500], "load_error", "cut short"),
    Planted("truncated parquet", "t.parquet", lambda: cut(parquet(), 0.7), "load_error", "PAR1"),
    Planted("truncated pickle", "r.pkl", lambda: cut(pickle.dumps({"a": list(range(50))}), 0.5), "load_error",
            "does not parse"),
    Planted("NaN literal in metrics JSON", "metrics.json", lambda: b'{"psnr": NaN, "epoch": 3}', "non_finite",
            "NaN literal at $.psnr"),
    Planted("-Infinity literal in a list", "m.json", lambda: b'{"curve": [1.0, -Infinity]}', "non_finite",
            "-Infinity literal at $.curve[1]"),
    Planted("cut JSON", "cut.json", lambda: b'{"psnr": 31.4, "ep', "load_error", "cut short"),
    Planted("CSV with its last row cut", "log.csv", lambda: (CSV + "2,0.8").encode(), "load_error",
            "the last row (line 4) has 2 of 3 fields"),
    Planted("TSV with a short middle row", "s.tsv", lambda: b"id\tscore\n1\n2\t0.7\n", "load_error",
            "line 2 has 1 field(s), the header has 2"),
    Planted("JSONL with a cut last line", "ev.jsonl", lambda: b'{"a": 1}\n{"a": 2}\n{"a', "load_error",
            "line 3 does not parse"),
    Planted("JSONL with a NaN", "ev2.jsonl", lambda: b'{"a": 1}\n{"loss": NaN}\n', "non_finite",
            "line 2: NaN literal at $.loss"),
    Planted("checkpoint missing its model key (zip)", "nomodel.pth", lambda: torch_zip(WEIGHTS, wrap="ema"),
            "missing_key", "['model'] absent", ("model",)),
    Planted("checkpoint missing its model key (legacy)", "nomodel.pt", lambda: torch_legacy(WEIGHTS, wrap=None),
            "missing_key", "['model'] absent", ("model",)),
    Planted("state_dict without the expected prefix", "sd.bin", lambda: torch_zip(WEIGHTS, wrap=None),
            "missing_key", "['decoder'] absent", ("decoder",)),
    Planted("safetensors without the expected prefix", "w2.safetensors", lambda: safetensors(WEIGHTS),
            "missing_key", "['head'] absent", ("head",)),
]
NEEDS_NUMPY = [
    Planted("NaN tensor in a zip checkpoint", "nan.pth", lambda: torch_zip({"w": [1.0, float("nan")]}),
            "non_finite", "model.w"),
    Planted("Inf tensor in a legacy checkpoint", "inf.pt", lambda: torch_legacy({"w": [float("inf"), 1.0]}),
            "non_finite", "model.w"),
    Planted("NaN tensor in safetensors", "nan.safetensors", lambda: safetensors({"w": [float("nan")]}),
            "non_finite", "['w']"),
    Planted("NaN in an npy array", "nan.npy", lambda: npy([1.0, float("nan")]), "non_finite", "NaN"),
    Planted("Inf in an npz member", "inf.npz", lambda: npz(a=[1.0], b=[float("inf")]), "non_finite", "['b']"),
]


def _assert_named(v: FileVerdict, case: Planted) -> None:
    assert not v.ok, v
    assert (v.finding, v.path) == (case.finding, case.rel), v
    assert case.says in v.detail, v.detail


@pytest.mark.parametrize("loaders", LOADER_SETS)
@pytest.mark.parametrize("case", STRUCTURAL, ids=lambda c: c.name)
def test_every_planted_defect_fails_and_is_named_with_or_without_loaders(tmp_path, case, loaders) -> None:
    _assert_named(run(tmp_path, case.rel, case.data(), loaders, expect_keys=list(case.expect_keys)), case)


@pytest.mark.parametrize("loaders", [pytest.param(NUMPY_ONLY, id="numpy-only"), pytest.param(None, id="installed")])
@pytest.mark.parametrize("case", NEEDS_NUMPY, ids=lambda c: c.name)
def test_non_finite_values_fail_wherever_numpy_is_there_to_scan_them(tmp_path, case, loaders) -> None:
    _assert_named(run(tmp_path, case.rel, case.data(), loaders), case)


def test_without_any_loader_a_nan_checkpoint_says_it_was_not_scanned(tmp_path) -> None:
    v = run(tmp_path, "nan.pth", torch_zip({"w": [float("nan")]}), NO_LOADERS)
    assert v.ok and "not scanned for NaN" in v.detail


# --- good files ------------------------------------------------------------------------------------

GOOD = {
    "cell/best.pth": lambda: torch_zip(WEIGHTS),
    "cell/legacy.pt": lambda: torch_legacy(WEIGHTS),
    "cell/last.ckpt": lambda: torch_zip(WEIGHTS, wrap="state_dict", name="last"),
    "cell/pytorch_model.bin": lambda: torch_zip(WEIGHTS, wrap=None, name="pytorch_model"),
    "cell/model.safetensors": lambda: safetensors(WEIGHTS),
    "cell/preds.npy": lambda: npy([0.1, 0.2]),
    "cell/emb.npz": lambda: npz(a=[1.0, 2.0], b=[3.0]),
    "cell/features.h5": lambda: GOOD_H5,
    "cell/results.parquet": parquet,
    "cell/metrics.json": lambda: b'{"psnr": 31.42, "epoch": 0, "converged": true, "note": "ok"}',
    "cell/log.csv": lambda: CSV.encode(),
    "cell/scores.tsv": lambda: b'id\tname\n1\t"a\tb"\n2\tc\n',
    "cell/events.jsonl": lambda: b'{"step": 1}\n\n{"step": 2, "text": "x\\u2028y"}\n',
    "cell/rng.pkl": lambda: pickle.dumps({"seed": 0}) + pickle.dumps([1, 2]),
}


@pytest.mark.parametrize("loaders", LOADER_SETS)
@pytest.mark.parametrize("rel", list(GOOD))
def test_good_files_of_every_type_are_never_flagged(tmp_path, rel, loaders) -> None:
    v = run(tmp_path, rel, GOOD[rel](), loaders, expect_keys=["model"] if "best" in rel or "legacy" in rel else None)
    assert v.ok and v.inspected and v.finding is None, v


def test_a_bare_state_dict_meets_expect_keys_by_dotted_prefix_only(tmp_path) -> None:
    sd = torch_zip(WEIGHTS, wrap=None)
    assert run(tmp_path, "a.pth", sd, NO_LOADERS, expect_keys=["encoder"]).ok
    assert run(tmp_path, "b.pth", sd, NO_LOADERS, expect_keys=["encoder."]).ok
    v = run(tmp_path, "c.pth", sd, NO_LOADERS, expect_keys=["enc"])  # a prefix of a word is not a key
    assert v.finding == "missing_key" and "'encoder.weight'" in v.detail


def test_expect_keys_are_ignored_for_files_that_are_not_checkpoints(tmp_path) -> None:
    assert run(tmp_path, "metrics.json", b'{"acc": 1}', expect_keys=["model"]).ok


# --- types that are not inspected, and nothing that crashes ------------------------------------------

@pytest.mark.parametrize("rel,data", [("notes.txt", b"lr looked fine\n"), ("run.log", b""),
                                      ("vocab.bin", garbage()), ("image.png", garbage())])
def test_files_of_unknown_type_and_opaque_bins_are_listed_as_not_inspected(tmp_path, rel, data) -> None:
    v = run(tmp_path, rel, data)
    assert v.ok and not v.inspected and "not inspected" in v.detail


def test_a_text_file_above_the_parse_limit_is_not_inspected_rather_than_failed(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(checks.checks_text, "MAX_TEXT_CHECK", 10)
    v = run(tmp_path, "big.json", b'{"loss": [' + b"1," * 20 + b"1]}")
    assert v.ok and not v.inspected and "too large" in v.detail


@pytest.mark.parametrize("suffix", sorted(checks._CHECKERS))
def test_an_empty_file_of_every_inspected_type_fails_as_empty(tmp_path, suffix) -> None:
    v = run(tmp_path, f"out/x{suffix}", b"", NO_LOADERS)
    assert not v.ok and v.finding == "empty" and suffix in v.detail


def test_a_check_that_raises_a_bug_fails_the_file_names_the_exception_and_logs_it(tmp_path, monkeypatch,
                                                                                   caplog) -> None:
    def broken(inp: object) -> object:
        raise TypeError("unsupported operand")

    monkeypatch.setitem(checks._CHECKERS, ".json", ("json", broken))
    with caplog.at_level(logging.WARNING, logger=checks.__name__):
        v = run(tmp_path, "m.json", b"{}")
    assert not v.ok and v.finding == "check_error" and "TypeError" in v.detail
    assert "m.json" in caplog.text


SEEDS = {rel.rsplit("/", 1)[1]: make() for rel, make in GOOD.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(SEEDS)), keep=st.floats(0, 1), flips=st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), max_size=3))
def test_no_truncation_or_byte_flip_of_any_file_crashes_the_checker(tmp_path, name, keep, flips) -> None:
    data = bytearray(SEEDS[name])
    for where, value in flips:
        data[int(where * len(data))] = value
    for loaders in (NO_LOADERS, NUMPY_ONLY, None):
        v = run(tmp_path, name, bytes(data[: int(len(data) * keep)]), loaders, expect_keys=["model"])
        assert v.finding != "check_error", v.detail
