"""PyTorch checkpoints in torch's two on-disk formats (zip and legacy), written byte by byte
without torch, so the structural checks and the pull tests run the same with or without it."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np


def _text(s: str) -> bytes:
    raw = s.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _int(n: int) -> bytes:
    return b"J" + struct.pack("<i", n)


def tensor_pickle(tensors: dict[str, list[float]], wrap: str | None, legacy: bool) -> bytes:
    """Protocol-2 pickle of {name: 1-D float32 tensor} as torch writes it: each tensor a
    _rebuild_tensor_v2 call on a persistent storage id; storage i holds tensor i."""
    out = [b"\x80\x02}(" + (_text(wrap) + b"}(" if wrap else b"")]
    for i, (name, values) in enumerate(tensors.items()):
        pid = _text("storage") + b"ctorch\nFloatStorage\n" + _text(str(i)) + _text("cpu") + _int(len(values))
        out += [_text(name), b"ctorch._utils\n_rebuild_tensor_v2\n(", b"(" + pid + (b"N" if legacy else b"") + b"tQ",
                _int(0), b"(" + _int(len(values)) + b"t", b"(" + _int(1) + b"t", b"\x89",
                b"ccollections\nOrderedDict\n)R", b"tR"]
    out.append(b"u" + (b"u" if wrap else b"") + b".")
    return b"".join(out)


def torch_zip(tensors: dict[str, list[float]], wrap: str | None = "model", name: str = "best") -> bytes:
    """A zip-format checkpoint (torch >= 1.6): data.pkl, data/<key>, version, byteorder."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/data.pkl", tensor_pickle(tensors, wrap, legacy=False))
        z.writestr(f"{name}/byteorder", "little")
        for i, values in enumerate(tensors.values()):
            z.writestr(f"{name}/data/{i}", np.asarray(values, dtype="<f4").tobytes())
        z.writestr(f"{name}/version", "3\n")
    return buf.getvalue()


def torch_legacy(tensors: dict[str, list[float]], wrap: str | None = "model") -> bytes:
    """A legacy (non-zip) checkpoint: magic, protocol, sys info, object, storage keys, storages."""
    magic = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."
    keys = b"\x80\x02](" + b"".join(_text(str(i)) for i in range(len(tensors))) + b"e."
    data = b"".join(struct.pack("<q", len(v)) + np.asarray(v, dtype="<f4").tobytes() for v in tensors.values())
    return (magic + b"\x80\x02M\xe9\x03." + b"\x80\x02}." + tensor_pickle(tensors, wrap, legacy=True) + keys
            + data)
