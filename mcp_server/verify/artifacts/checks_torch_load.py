"""The load half of a PyTorch checkpoint check, when torch is installed: torch.load with
weights_only=True (an unsafe pickle load only when the call opts in), then every tensor walked
for non-finite and empty values, and expect_keys read from the loaded object."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from mcp_server.verify.artifacts.checks_base import CheckInput, Defect, Outcome, check_expected, describe_keys


def torch_load(inp: CheckInput, structure: str) -> Outcome:
    obj, how = _load(inp, structure)
    tensors = list(_tensors(obj, "", set()))
    if not tensors:
        raise Defect("empty", f"{how}: no tensors inside")
    bad = [k for k, t in tensors if not _finite(t)]
    if bad:
        raise Defect("non_finite", f"{how}: non-finite values (NaN/Inf) in {bad[:5]}")
    empty = [k for k, t in tensors if t.numel() == 0]
    if empty:
        raise Defect("empty", f"{how}: empty tensors {empty[:5]}")
    keys = [k if isinstance(k, str) else repr(k) for k in obj] if isinstance(obj, dict) else None
    expected = check_expected(keys, inp.expect_keys, describe_keys(keys, type(obj).__name__))
    return Outcome(detail=f"{how}: {len(tensors)} tensors, all finite{expected}", kind="torch")


def _load(inp: CheckInput, structure: str) -> tuple[Any, str]:
    import torch

    try:
        return torch.load(inp.path, map_location="cpu", weights_only=True), f"{structure}; weights_only load"
    except pickle.UnpicklingError as exc:
        if "global" not in str(exc).lower():
            # A stream the weights-only unpickler cannot parse at all is damage, not unsafety.
            raise Defect("load_error", f"{structure}; torch.load failed: {_weights_error(exc)}") from exc
        if not inp.allow_pickle:
            raise Defect("unsafe_pickle", f"{structure}; needs unsafe pickle to load (weights_only=True refused "
                                          "it): not loaded; pass allow_pickle=true only for a file you trust "
                                          f"({_weights_error(exc)})") from exc
    except Exception as exc:  # the loader's own words for a file it rejects, whatever their type
        raise Defect("load_error", f"{structure}; torch.load failed ({type(exc).__name__}: {str(exc)[:300]})") from exc
    try:
        obj = torch.load(inp.path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise Defect("load_error", f"{structure}; the unsafe load failed ({type(exc).__name__}: {str(exc)[:200]}); "
                                   "a missing module means this machine lacks the code that pickled it") from exc
    return obj, f"{structure}; UNSAFE pickle load (allow_pickle=true)"


def _finite(t: Any) -> bool:
    """Whether a tensor holds no NaN/Inf: sparse tensors by their values, and dtypes torch.isfinite
    does not cover (float8, complex32) widened first."""
    import torch

    if t.is_meta:
        return True
    if t.layout != torch.strided:
        t = t._values() if t.is_sparse else t.values()
    if not (t.is_floating_point() or t.is_complex()) or t.numel() == 0:
        return True
    try:
        # NaN and Inf propagate through a sum, so a finite sum proves every element finite, at a
        # tenth of isfinite's cost; a sum that overflowed falls through to the exact test.
        if bool(torch.isfinite(t.sum())):
            return True
        return bool(torch.isfinite(t).all())
    except (RuntimeError, NotImplementedError):
        return bool(torch.isfinite(t.to(torch.complex64 if t.is_complex() else torch.float32)).all())


def _weights_error(exc: Exception) -> str:
    """The one informative line of torch's long weights-only error."""
    text = str(exc)
    i = text.find("WeightsUnpickler error:")
    core = text[i + len("WeightsUnpickler error:"):] if i >= 0 else text
    return " ".join(core.split())[:200]


def _tensors(obj: object, prefix: str, seen: set[int]) -> Iterator[tuple[str, Any]]:
    """(name, tensor) for every tensor inside a loaded checkpoint (torch is untyped: Any)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield prefix or "tensor", obj
    elif isinstance(obj, dict | list | tuple) and id(obj) not in seen:
        seen.add(id(obj))
        pairs = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, v in pairs:
            name = (f"{prefix}.{k}" if prefix else str(k)) if isinstance(obj, dict) else f"{prefix}[{k}]"
            yield from _tensors(v, name, seen)
