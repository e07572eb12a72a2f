"""Array files checked from their bytes: npy/npz header and size, safetensors header and offsets,
HDF5 superblock, parquet footer; then numpy's own load where it is allowed."""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

from tests.verify.artifacts.test_checks import GOOD_H5, NO_LOADERS, NUMPY_ONLY, npz, run


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("array", [np.zeros((2, 3), order="F"), np.array(3.5), np.array(["ab", "c"]),
                                   np.zeros((0, 4)), np.arange(6, dtype=">i4"), np.array([1 + 2j]),
                                   np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8")])],
                         ids=["fortran", "0-d", "unicode", "empty-dim", "big-endian", "complex", "structured"])
@pytest.mark.parametrize("loaders", [NO_LOADERS, NUMPY_ONLY], ids=["no-loaders", "numpy"])
def test_npy_layouts_numpy_writes_all_pass(tmp_path, array, loaders) -> None:
    v = run(tmp_path, "a.npy", _npy(array), loaders)
    assert v.ok, v.detail


def test_a_structured_npy_is_size_checked_only_when_numpy_can_read_its_dtype(tmp_path) -> None:
    data = _npy(np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8")]))
    assert "not checkable" in run(tmp_path, "a.npy", data, NO_LOADERS).detail
    assert not run(tmp_path, "b.npy", data[:-4], NUMPY_ONLY).ok


def test_an_npy_with_bytes_after_its_data_fails(tmp_path) -> None:
    v = run(tmp_path, "a.npy", _npy(np.ones(4)) + b"\x00" * 8, NO_LOADERS)
    assert v.finding == "load_error" and "needs 32 data bytes, the file holds 40" in v.detail


def test_an_object_array_needs_allow_pickle_and_loads_with_it(tmp_path) -> None:
    data = _npy(np.array([{"a": 1}], dtype=object))
    assert run(tmp_path, "o.npy", data).finding == "unsafe_pickle"
    assert run(tmp_path, "p.npy", data, allow_pickle=True).ok


def test_a_compressed_npz_with_a_damaged_member_fails_its_crc(tmp_path) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, a=np.arange(1000.0))
    data = bytearray(buf.getvalue())
    data[200] ^= 0xFF
    v = run(tmp_path, "c.npz", bytes(data), NO_LOADERS)
    assert v.finding == "load_error"


def test_an_npz_without_arrays_is_empty(tmp_path) -> None:
    buf = io.BytesIO()
    np.savez(buf)
    assert run(tmp_path, "e.npz", buf.getvalue()).finding == "empty"


def test_an_npz_member_whose_data_is_short_is_named(tmp_path) -> None:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("good.npy", _npy(np.ones(4)))
        z.writestr("short.npy", _npy(np.ones(4))[:-8])
    v = run(tmp_path, "s.npz", buf.getvalue(), NO_LOADERS)
    assert v.finding == "load_error" and "short.npy" in v.detail


def _st(header: dict[str, object], data: bytes) -> bytes:
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


@pytest.mark.parametrize("header,data,says", [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\x00" * 12, "overlap"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\x00" * 12, "tensors end at 8"),
    ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\x00" * 8, "needs 12"),
    ({"a": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}, b"\x00" * 8, "not {dtype, shape"),
    ({"__metadata__": {"format": "pt"}}, b"", "no tensors"),
], ids=["overlap", "trailing-gap", "wrong-size", "bad-entry", "no-tensors"])
def test_inconsistent_safetensors_headers_are_named(tmp_path, header, data, says) -> None:
    v = run(tmp_path, "w.safetensors", _st(header, data), NO_LOADERS)
    assert not v.ok and says in v.detail


def test_a_safetensors_header_that_is_not_an_object_fails(tmp_path) -> None:
    v = run(tmp_path, "w.safetensors", struct.pack("<Q", 2) + b"[]", NO_LOADERS)
    assert v.finding == "load_error" and "not a JSON object" in v.detail


def test_a_safetensors_dtype_not_known_here_keeps_its_offsets_checked_but_not_its_size(tmp_path) -> None:
    ok = _st({"a": {"dtype": "F4", "shape": [4], "data_offsets": [0, 2]}}, b"\x00\x00")
    assert run(tmp_path, "a.safetensors", ok, NUMPY_ONLY).ok
    out = _st({"a": {"dtype": "F4", "shape": [4], "data_offsets": [0, 9]}}, b"\x00\x00")
    assert "outside" in run(tmp_path, "b.safetensors", out, NUMPY_ONLY).detail


@pytest.mark.parametrize("dtype,raw", [("BF16", b"\x80\x7f"), ("F16", b"\x00\x7c"),
                                       ("F64", struct.pack("<d", -np.inf))],
                         ids=["bf16-inf", "f16-inf", "f64-minus-inf"])
def test_non_finite_values_are_found_in_every_float_width_safetensors_uses(tmp_path, dtype, raw) -> None:
    width = len(raw)
    data = b"\x00" * width + raw
    v = run(tmp_path, "w.safetensors", _st({"a": {"dtype": dtype, "shape": [2], "data_offsets": [0, 2 * width]}},
                                            data), NUMPY_ONLY)
    assert v.finding == "non_finite"


def test_an_hdf5_file_after_a_user_block_is_found(tmp_path) -> None:
    assert run(tmp_path, "u.h5", b"\x00" * 512 + GOOD_H5, NO_LOADERS).ok


def test_an_hdf5_file_cut_inside_its_superblock_fails(tmp_path) -> None:
    v = run(tmp_path, "c.h5", GOOD_H5[:20], NO_LOADERS)
    assert v.finding == "load_error" and "cut short" in v.detail


def test_hdf5_opens_in_h5py_when_it_is_installed(tmp_path) -> None:
    pytest.importorskip("h5py", reason="h5py is optional; the superblock check above runs without it")
    v = run(tmp_path, "f.h5", GOOD_H5)
    assert v.ok and "h5py opens it: 1 datasets" in v.detail


def test_parquet_without_pyarrow_is_checked_by_its_footer(tmp_path) -> None:
    from tests.verify.artifacts.test_checks import parquet

    v = run(tmp_path, "t.parquet", parquet(), NO_LOADERS)
    assert v.ok and "not read (pyarrow not installed)" in v.detail


def test_npz_arrays_are_listed_by_name_and_shape(tmp_path) -> None:
    v = run(tmp_path, "e.npz", npz(emb=[1.0, 2.0], ids=[3.0]))
    assert "emb[2] <f4" in v.detail and "ids[1] <f4" in v.detail
