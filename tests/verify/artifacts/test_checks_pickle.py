"""Pickles are read without being run: a file that would execute code on a real load is parsed,
its keys listed and its verdict given, and nothing in it runs."""

from __future__ import annotations

import collections
import io
import pickle
import struct
import zipfile
from pathlib import Path

import pytest

from mcp_server.verify.artifacts.checks_pickle import inert_load, top_keys
from tests.support.checkpoints import tensor_pickle
from tests.verify.artifacts.test_checks import NO_LOADERS, NUMPY_ONLY, WEIGHTS, run


class _Trap:
    """Unpickling this for real runs a shell command that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, (f"touch {self.marker}",)


def test_a_pickle_that_would_run_a_command_is_parsed_and_nothing_runs(tmp_path) -> None:
    marker = tmp_path / "ran"
    v = run(tmp_path, "results.pkl", pickle.dumps({"score": 0.9, "trap": _Trap(marker)}))
    assert v.ok and "no code in it was run" in v.detail
    assert not marker.exists()


def test_a_checkpoint_whose_pickle_would_run_a_command_is_unsafe_and_nothing_runs(tmp_path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps({"model": _Trap(marker)}, protocol=2)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("best/data.pkl", payload)
        z.writestr("best/version", "3\n")
    for loaders in (NO_LOADERS, NUMPY_ONLY, None):
        v = run(tmp_path, "best.pth", buf.getvalue(), loaders)
        assert v.finding == "unsafe_pickle" and "system" in v.detail, v.detail
    assert not marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickles_of_every_protocol_parse_and_list_their_top_level_keys(protocol) -> None:
    obj = {"model": {"w": [1.0]}, "epoch": 3, 7: "seven", "od": collections.OrderedDict(a=1), "s": {1, 2}}
    got = inert_load(io.BytesIO(pickle.dumps(obj, protocol=protocol)))
    assert top_keys(got.obj) == ["model", "epoch", "7", "od", "s"]


def test_objects_of_unknown_classes_become_inert_stand_ins_with_their_state() -> None:
    got = inert_load(io.BytesIO(pickle.dumps({"args": _Box(lr=3e-4)})))
    assert isinstance(got.obj, dict)
    box = got.obj["args"]
    assert type(box).__name__ == "_Box" and box.state == {"lr": 3e-4}
    assert got.unsafe_globals() == [f"{__name__}._Box"]


class _Box:
    def __init__(self, **kw: float) -> None:
        self.__dict__.update(kw)


def test_several_pickle_streams_in_one_file_all_parse(tmp_path) -> None:
    v = run(tmp_path, "r.pkl", pickle.dumps(1) + pickle.dumps([2]) + pickle.dumps({"3": 3}))
    assert v.ok and v.detail.startswith("3 pickle stream(s)")


def test_a_length_field_claiming_more_bytes_than_the_file_fails_cleanly(tmp_path) -> None:
    absurd = b"\x80\x04\x8e" + struct.pack("<Q", 2**60) + b"abc"  # BINBYTES8 of 2**60 bytes
    v = run(tmp_path, "r.pkl", absurd)
    assert v.finding == "load_error"


def test_torch_tensor_records_become_storage_records_with_sizes(tmp_path) -> None:
    got = inert_load(io.BytesIO(tensor_pickle(WEIGHTS, "model", legacy=False)), torch=True)
    assert top_keys(got.obj) == ["model"]
    assert {k: (s.type_name, s.numel) for k, s in got.storages.items()} == {
        "0": ("torch.FloatStorage", 4), "1": ("torch.FloatStorage", 2)}
    assert [t.shape for t in got.tensors] == [(4,), (2,)] and got.unsafe_globals() == []


def test_a_torch_pickle_with_a_foreign_persistent_id_is_rejected() -> None:
    data = b"\x80\x02" + b"X\x03\x00\x00\x00abcQ."  # persistent id "abc", not a storage tuple
    with pytest.raises(Exception, match="not a torch storage"):
        inert_load(io.BytesIO(data), torch=True)
