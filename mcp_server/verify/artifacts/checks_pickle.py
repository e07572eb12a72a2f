"""Reading a pickle without running it.

A restricted Unpickler whose `find_class` never imports anything: every global the stream
names becomes an inert stand-in class of ours, so nothing in the file executes, whatever it
names. torch's tensor-rebuild functions become records of which storage a tensor views, and
torch's persistent ids become storage records (type, key, element count). This was chosen over
walking opcodes with `pickletools`: the unpickler already runs the pickle machine (memo, marks,
dict and list building), so top-level keys come out as real keys, and with no global ever
resolved it is as inert as reading opcodes. Refusing unknown globals instead would leave a
checkpoint holding an argparse Namespace or a numpy scalar unreadable without torch."""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, TypeGuard, cast

from mcp_server.verify.artifacts.checks_base import CheckInput, Defect, Outcome


@dataclass(frozen=True)
class StorageRef:
    key: str
    type_name: str  # e.g. "torch.FloatStorage"
    numel: int


@dataclass(frozen=True)
class TensorRef:
    storage: StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    def last_element(self) -> int:
        """Index of the last storage element this view reads (-1 for an empty tensor)."""
        if any(d == 0 for d in self.shape):
            return -1
        return self.offset + sum((d - 1) * s for d, s in zip(self.shape, self.stride, strict=True))


class Stub:
    """An instance of whatever global the pickle names: it records arguments and state, runs nothing."""

    global_name: ClassVar[str] = "?"
    args: tuple[object, ...]
    items: dict[object, object]
    state: object

    def __new__(cls, *args: object, **kwargs: object) -> Stub:
        # Set here, not in __init__: the NEWOBJ opcode calls __new__ alone.
        self = object.__new__(cls)
        self.args, self.items, self.state = args, {}, None
        return self

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object) -> Stub:
        return type(self)(*args)

    def __setitem__(self, key: object, value: object) -> None:
        self.items[key] = value

    def append(self, value: object) -> None:
        self.items[len(self.items)] = value

    def extend(self, values: list[object]) -> None:
        for v in values:
            self.append(v)

    def add(self, value: object) -> None:
        self.append(value)

    def __setstate__(self, state: object) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{self.global_name}>"


class StateDict(dict[object, object]):
    """collections.OrderedDict as a torch state_dict pickles it: items, then a BUILD of `_metadata`."""

    def __setstate__(self, state: object) -> None:
        self.state = state


_STUBS: dict[str, type[Stub]] = {}
# Protocol 0-2 pickles name modules by their Python 2 names; the stock unpickler maps them the same way.
_PY2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _stub_class(name: str) -> type[Stub]:
    if name not in _STUBS:
        _STUBS[name] = cast(type[Stub], type(name.rpartition(".")[2] or "Stub", (Stub,), {"global_name": name}))
    return _STUBS[name]


@dataclass
class Inert:
    """What an inert read of one pickle found."""

    obj: object
    storages: dict[str, StorageRef] = field(default_factory=dict)
    tensors: list[TensorRef] = field(default_factory=list)
    globals: set[str] = field(default_factory=set)
    other_tensors: int = 0  # tensor rebuilds whose storage layout is not read here

    def unsafe_globals(self) -> list[str]:
        """Globals torch's weights-only unpickler would refuse (so torch.load needs allow_pickle)."""
        return sorted(g for g in self.globals if g not in _WEIGHTS_ONLY and not _WEIGHTS_ONLY_PATTERN.match(g))


# Approximates torch's weights-only allowlist (torch/_weights_only_unpickler.py, torch 2.x):
# tensor rebuilds, storages, tensor types, dtypes, qschemes and a few builtins.
_WEIGHTS_ONLY = frozenset({
    "_codecs.encode", "builtins.bytearray", "builtins.complex", "builtins.set", "collections.Counter",
    "collections.OrderedDict", "torch.Size", "torch.Tensor", "torch.device", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.storage.TypedStorage", "torch.storage.UntypedStorage",
    "torch._tensor._rebuild_from_type_v2",
})
_WEIGHTS_ONLY_PATTERN = re.compile(
    r"^torch\._utils\._rebuild_\w+$"
    r"|^torch\.(cuda\.)?(sparse\.)?\w+(Storage|Tensor)$"
    r"|^torch\.(u?int\d+|float\d+\w*|bfloat16|complex\d+|bool|bits\w+|q?u?int\d+|quint\w+|per_\w+)$")


class InertUnpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], torch: bool) -> None:
        super().__init__(file)
        self.found = Inert(obj=None)
        self.torch = torch
        self.special: dict[str, Any] = {
            "collections.OrderedDict": StateDict,
            "torch._utils._rebuild_tensor": self._tensor, "torch._utils._rebuild_tensor_v2": self._tensor,
            "torch._utils._rebuild_tensor_v3": self._tensor,
            "torch._utils._rebuild_parameter": _first, "torch._utils._rebuild_parameter_with_state": _first,
            "torch._tensor._rebuild_from_type_v2": _from_type,
        }

    def find_class(self, module: str, name: str, /) -> Any:
        full = f"{_PY2_MODULES.get(module, module)}.{name}"
        self.found.globals.add(full)
        if full in self.special:
            return self.special[full]
        if full.startswith("torch._utils._rebuild_"):  # qtensor, sparse, nested...: a tensor all the same
            self.found.other_tensors += 1
        return _stub_class(full)

    def persistent_load(self, pid: Any) -> Any:
        if not self.torch:
            return _stub_class("persistent_id")(pid)
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise Defect("load_error", f"pickle refers to a persistent object {str(pid)[:80]} that is not a torch "
                                       "storage")
        _, kind, key, _location, numel = pid[:5]
        if not (isinstance(key, str) and isinstance(numel, int) and numel >= 0):
            raise Defect("load_error", f"malformed torch storage record {str(pid)[:120]}")
        ref = StorageRef(key=key, type_name=getattr(kind, "global_name", str(kind)), numel=numel)
        self.found.storages.setdefault(key, ref)
        return ref

    def _tensor(self, storage: object, offset: object, shape: object, stride: object, *rest: object) -> object:
        if not isinstance(storage, StorageRef):
            return _stub_class("torch.Tensor")(storage, offset, shape, stride)
        if not (isinstance(offset, int) and _ints(shape) and _ints(stride) and len(shape) == len(stride)):
            raise Defect("load_error", f"malformed tensor record on storage {storage.key}")
        ref = TensorRef(storage=storage, offset=offset, shape=shape, stride=stride)
        self.found.tensors.append(ref)
        return ref


def _ints(value: object) -> TypeGuard[tuple[int, ...]]:
    return isinstance(value, tuple) and all(isinstance(v, int) for v in value)


def _first(data: object, *rest: object) -> object:
    return data


def _from_type(func: object, new_type: object, args: object, state: object) -> object:
    # Only our own callables exist in an inert read, so calling one runs nothing from the file.
    if callable(func) and isinstance(args, tuple):
        return func(*args)
    return _stub_class("torch.Tensor")(func, args)


def inert_load(file: IO[bytes], torch: bool = False) -> Inert:
    """One pickle from `file`, read without resolving any global; the file is left after its STOP."""
    up = InertUnpickler(file, torch=torch)
    try:
        up.found.obj = up.load()
    except (Defect, pickle.UnpicklingError):
        raise
    except Exception as exc:
        # A malformed stream makes the pickle machine raise anything (TypeError, AttributeError,
        # IndexError...) as it applies opcodes to the wrong values: that is damage to the file.
        raise pickle.UnpicklingError(f"{type(exc).__name__}: {exc}") from exc
    return up.found


def top_keys(obj: object) -> list[str] | None:
    """The top-level keys of a dict-like object as text; None when it is not dict-like."""
    items = obj.items if isinstance(obj, Stub) else obj if isinstance(obj, dict) else None
    if items is None:
        return None
    return [k if isinstance(k, str) else repr(k) for k in items]


def type_label(obj: object) -> str:
    if isinstance(obj, Stub):
        return obj.global_name
    if isinstance(obj, TensorRef):
        return "a single tensor"
    return type(obj).__name__


class Bounded:
    """A read-only view of a file that never reads past `end`: a pickle's length fields are untrusted,
    and a plain file read allocates the requested length before reading."""

    def __init__(self, raw: IO[bytes], end: int) -> None:
        self.raw, self.end = raw, end

    def read(self, n: int = -1) -> bytes:
        left = max(0, self.end - self.raw.tell())
        return self.raw.read(left if n is None or n < 0 else min(n, left))

    def readinto(self, buf: memoryview | bytearray) -> int:
        data = self.read(len(buf))
        buf[: len(data)] = data
        return len(data)

    def readline(self, limit: int = -1) -> bytes:
        left = max(0, self.end - self.raw.tell())
        return self.raw.readline(left if limit < 0 else min(limit, left))

    def tell(self) -> int:
        return self.raw.tell()

    def seek(self, pos: int) -> int:
        return self.raw.seek(pos)


def check_pickle(inp: CheckInput) -> Outcome:
    """A .pkl: every pickle stream in it parses to its STOP and together they fill the file. Read
    inertly, so it is checked whether or not allow_pickle is set; nothing in it is ever run."""
    count = 0
    with inp.path.open("rb") as raw:
        f = Bounded(raw, inp.size)
        while f.tell() < inp.size:
            try:
                inert_load(cast(IO[bytes], f))
            except (pickle.UnpicklingError, EOFError, ValueError) as exc:
                where = f"pickle stream {count + 1}" if count else "the pickle stream"
                raise Defect("load_error", f"{where} does not parse ({type(exc).__name__}: {str(exc)[:200]}); "
                                           "cut short or not a pickle") from exc
            count += 1
    return Outcome(detail=f"{count} pickle stream(s) parse to the end of the file (read inertly: "
                          "no code in it was run, nothing was imported)")
