"""VP6 leakage audit on prepared split artifacts: duplicate ingestion (6a), the same item
across splits by id and by content hash, exact and normalised (6b), temporal order (6d),
group/subject overlap (6f) and selection on test (6h)."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from datetime import datetime
from itertools import combinations
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mcp_server.errors import InputError
from mcp_server.limits import IdStr, ValueStr
from mcp_server.verify.probes.parse import column, detect, parse_lines, parse_npy, parse_rows
from mcp_server.verify.probes.refs import FileRef, InputReader
from mcp_server.verify.probes.result import ProbeFinding, Verdict, listed, next_probe
from mcp_server.verify.probes.sources import MAX_INLINE

CATALOG = ["VP6"]
QUESTION = "Does any test (or validation) information reach training or selection?"
_ORDER: list[Verdict] = ["leak", "bug", "unverified", "clean"]
_EXAMPLES = 10


class Split(BaseModel):
    """One split: inline ids (+ hashes/groups/times), or a manifest file on a box
    (TXT one id per line, .npy of ids, CSV/TSV/JSONL/JSON table, or a file manifest with sha256)."""

    model_config = ConfigDict(extra="forbid")
    ids: list[ValueStr] | None = Field(default=None, max_length=MAX_INLINE)
    hashes: list[ValueStr] | None = Field(default=None, max_length=MAX_INLINE, description="content hash per id")
    groups: list[ValueStr] | None = Field(default=None, max_length=MAX_INLINE, description="entity key per id "
                                     "(patient, scene, speaker)")
    times: list[float | ValueStr] | None = Field(default=None, max_length=MAX_INLINE,
                                            description="timestamp per id (number or ISO-8601)")
    file: FileRef | None = None
    id_field: IdStr | None = Field(default=None, description="table column with the sample id "
                                 "(default `path` for file manifests)")
    hash_field: IdStr | None = Field(default=None, description="table column with the content hash "
                                   "(default `sha256` when present)")
    group_field: IdStr | None = None
    time_field: IdStr | None = None
    hash_rows: bool = Field(default=False, description="hash each table row's other fields as its content")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.ids is None) == (self.file is None):
            raise ValueError("give exactly one of `ids` or `file`")
        for name in ("hashes", "groups", "times"):
            extra = getattr(self, name)
            if extra is not None and (self.ids is None or len(extra) != len(self.ids)):
                raise ValueError(f"`{name}` must align with `ids` (same length)")
        return self


class Selection(BaseModel):
    """How the epoch, checkpoint, hyper-parameters or threshold were selected."""

    model_config = ConfigDict(extra="forbid")
    selection_split: IdStr | None = Field(default=None, description="split the selection metric was read on")
    test_evaluations: int | None = Field(default=None, ge=0, description="times the test split was scored "
                                         "during development")


class LeakageInputs(BaseModel):
    """Two or more prepared splits, compared pairwise."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["leakage"]
    splits: dict[IdStr, Split] = Field(min_length=2, max_length=8, description="split name -> its ids")
    id_kind: Literal["sample_id", "file_name"] = Field(
        default="sample_id", description="sample_id: an id names one sample, so a shared id is a shared "
        "sample; file_name: names can collide across splits (1.png in both), only hashes decide")
    train_split: IdStr = "train"
    test_split: IdStr = "test"
    selection: Selection | None = None


class _Data(BaseModel):
    ids: list[str]
    hashes: list[str] | None = None
    groups: list[str] | None = None
    times: list[float] | None = None


def norm_id(value: str, file_name: bool) -> str:
    """Case, Unicode form, whitespace and path separators folded; basenames for file names."""
    text = " ".join(unicodedata.normalize("NFKC", value).casefold().replace("\\", "/").split())
    return text.rsplit("/", 1)[-1] if file_name else text


def norm_hash(value: str) -> str:
    text = value.strip().lower()
    return text.split(":", 1)[1] if ":" in text else text


def _norm_cell(v: Any) -> str:
    try:
        return repr(float(v))
    except (TypeError, ValueError):
        return " ".join(unicodedata.normalize("NFKC", str(v)).casefold().split())


def _row_hash(row: dict[str, Any], skip: set[str]) -> str:
    body = {k: _norm_cell(v) for k, v in sorted(row.items()) if k not in skip}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _time(v: Any) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    text = str(v).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise InputError("timestamp is neither a number nor ISO-8601", observed=text[:40]) from None


async def _load(name: str, s: Split, reader: InputReader) -> _Data:
    if s.ids is not None:
        return _Data(ids=s.ids, hashes=s.hashes, groups=s.groups,
                     times=None if s.times is None else [_time(t) for t in s.times])
    assert s.file is not None
    data, path, kind = await reader.read(s.file), s.file.path, detect(s.file.format, s.file.path)
    if kind == "lines":
        return _Data(ids=parse_lines(data, path))
    if kind == "npy":
        arr = parse_npy(data, path)
        if arr.ndim != 1:
            raise InputError(f"split {name!r}: a .npy of ids must be 1-D", path=path, observed=str(arr.shape))
        return _Data(ids=[str(v) for v in arr.tolist()])
    rows = parse_rows(data, s.file.format, path)
    return _from_rows(name, s, rows, path)


def _from_rows(name: str, s: Split, rows: list[dict[str, Any]], path: str) -> _Data:
    if not rows:
        raise InputError(f"split {name!r} has no rows", path=path)
    id_field = s.id_field or ("path" if "path" in rows[0] else None)
    if id_field is None:
        raise InputError(f"split {name!r}: name the `id_field`", path=path, expected=sorted(rows[0])[:40])
    hash_field = s.hash_field or ("sha256" if "sha256" in rows[0] else None)
    ids = [str(v) for v in column(rows, id_field, path)]
    if s.hash_rows:
        skip = {id_field, *(f for f in (s.group_field, s.time_field) if f)}
        hashes: list[str] | None = [_row_hash(r, skip) for r in rows]
    else:
        hashes = [str(v) for v in column(rows, hash_field, path)] if hash_field else None
    groups = [str(v) for v in column(rows, s.group_field, path)] if s.group_field else None
    times = [_time(v) for v in column(rows, s.time_field, path)] if s.time_field else None
    return _Data(ids=ids, hashes=hashes, groups=groups, times=times)


class SplitDuplicates(BaseModel):
    """Items one split lists more than once (duplicate ingestion)."""

    rows: int
    duplicate_ids_exact: int
    duplicate_ids_normalised: int
    duplicate_examples: list[str]


class PairOverlap(BaseModel):
    """What two splits share: ids, content hashes (when both have them) and groups (likewise)."""

    id_overlap_exact: int
    id_overlap_normalised: int
    id_examples: list[str]
    hash_overlap: int | None = None
    hash_overlap_exact: int | None = None
    name_collisions_distinct_bytes: int | None = None
    group_overlap: int | None = None
    group_examples: list[str] | None = None
    verdict: Verdict = "clean"
    reason: str = ""
    note: str | None = None


def _dupes(d: _Data, file_name: bool) -> SplitDuplicates:
    exact = len(d.ids) - len(set(d.ids))
    normed = [norm_id(i, file_name) for i in d.ids]
    seen: set[str] = set()
    repeated = []
    for i in normed:
        if i in seen:
            repeated.append(i)
        seen.add(i)
    return SplitDuplicates(rows=len(d.ids), duplicate_ids_exact=exact, duplicate_ids_normalised=len(repeated),
                           duplicate_examples=listed(sorted(set(repeated)), _EXAMPLES))


def _pair(a: _Data, b: _Data, file_name: bool) -> PairOverlap:
    exact = set(a.ids) & set(b.ids)
    normed = {norm_id(i, file_name) for i in a.ids} & {norm_id(i, file_name) for i in b.ids}
    out = PairOverlap(id_overlap_exact=len(exact), id_overlap_normalised=len(normed),
                      id_examples=listed(sorted(normed), _EXAMPLES))
    if a.hashes is not None and b.hashes is not None:
        ha, hb = {norm_hash(h) for h in a.hashes}, {norm_hash(h) for h in b.hashes}
        shared = ha & hb
        by_hash_a = {norm_id(i, file_name): norm_hash(h) for i, h in zip(a.ids, a.hashes, strict=True)}
        by_hash_b = {norm_id(i, file_name): norm_hash(h) for i, h in zip(b.ids, b.hashes, strict=True)}
        distinct = sum(1 for i in normed if by_hash_a.get(i) != by_hash_b.get(i))
        out.hash_overlap, out.hash_overlap_exact = len(shared), len(set(a.hashes) & set(b.hashes))
        out.name_collisions_distinct_bytes = distinct
    if a.groups is not None and b.groups is not None:
        groups = set(a.groups) & set(b.groups)
        out.group_overlap, out.group_examples = len(groups), listed(sorted(groups), _EXAMPLES)
    return out


def _pair_verdict(p: PairOverlap, file_name: bool) -> tuple[Verdict, str]:
    if p.hash_overlap is not None:
        if p.hash_overlap:
            return "leak", f"{p.hash_overlap} identical content hash(es) on both sides"
    elif p.id_overlap_normalised:
        if file_name:
            return "unverified", f"{p.id_overlap_normalised} file name collision(s), no hashes to tell them apart"
        return "leak", f"{p.id_overlap_normalised} shared sample id(s) ({p.id_overlap_exact} exact)"
    if p.group_overlap:
        return "leak", f"{p.group_overlap} group/subject key(s) on both sides"
    return "clean", "no shared ids or content"


async def run(inp: LeakageInputs, reader: InputReader) -> ProbeFinding:
    file_name = inp.id_kind == "file_name"
    data = {n: await _load(n, s, reader) for n, s in inp.splits.items()}
    findings: list[tuple[Verdict, str]] = []
    m: dict[str, Any] = {"id_kind": inp.id_kind, "splits": {}, "pairs": {}}
    for name, d in data.items():
        dup = _dupes(d, file_name)
        m["splits"][name] = dup.model_dump()
        if dup.duplicate_ids_normalised:
            findings.append(("bug", f"split {name!r} lists {dup.duplicate_ids_normalised} item(s) twice "
                             "(duplicate ingestion, e.g. Train/ and train/ on a case-insensitive FS)"))
    for (na, a), (nb, b) in combinations(data.items(), 2):
        p = _pair(a, b, file_name)
        p.verdict, p.reason = _pair_verdict(p, file_name)
        if p.verdict != "clean":
            share = max(p.id_overlap_normalised, p.hash_overlap or 0) / max(1, min(len(a.ids), len(b.ids)))
            findings.append((p.verdict, f"{na} vs {nb}: {p.reason} ({share:.1%} of the smaller split)"))
        elif p.name_collisions_distinct_bytes:
            p.note = "name collisions with distinct bytes are not leakage"
        m["pairs"][f"{na}|{nb}"] = p.model_dump(exclude_none=True)
    findings += _temporal(inp, data, m) + _selection(inp, m)
    return _finish(findings, m)


def _temporal(inp: LeakageInputs, data: dict[str, _Data], m: dict[str, Any]) -> list[tuple[Verdict, str]]:
    train = data.get(inp.train_split)
    if train is None or train.times is None or not train.times:
        return []
    out: list[tuple[Verdict, str]] = []
    for name, d in data.items():
        if name == inp.train_split or not d.times:
            continue
        later = max(train.times) < min(d.times)
        m.setdefault("temporal", {})[name] = {"train_max_time": max(train.times), "min_time": min(d.times),
                                              "ordered": later}
        if not later:
            out.append(("leak", f"{name} has items not later than the newest {inp.train_split} item "
                        "(temporal split violated)"))
    return out


def _selection(inp: LeakageInputs, m: dict[str, Any]) -> list[tuple[Verdict, str]]:
    sel = inp.selection
    if sel is None:
        return []
    m["selection"] = sel.model_dump()
    out: list[tuple[Verdict, str]] = []
    if sel.selection_split and norm_id(sel.selection_split, False) == norm_id(inp.test_split, False):
        out.append(("leak", "the epoch/checkpoint/HP/threshold was selected on the test split"))
    if sel.test_evaluations is not None and sel.test_evaluations > 1:
        out.append(("leak", f"the test split was scored {sel.test_evaluations} times during development"))
    return out


def _finish(findings: list[tuple[Verdict, str]], m: dict[str, Any]) -> ProbeFinding:
    m["findings"] = [f"{v}: {r}" for v, r in findings]
    if not findings:
        return ProbeFinding(measurements=m, verdict="clean", reason="no overlap, duplicate or selection finding",
                            disclosure="No shared ids, content hashes, groups or selection on test were found "
                            "between the splits as given; this covers the prepared artifacts, not preprocessing fits.",
                            next_probe=next_probe("VP7", "fair comparison", "leakage clean; check the baselines"))
    verdict = min((v for v, _ in findings), key=_ORDER.index)
    text = "; ".join(r for v, r in findings if v == verdict)
    sentences = {
        "leak": f"Leakage found ({text}): the held-out number includes information the model saw in "
                "training or selection; re-evaluation cannot rescue it, only clean splits (and retraining "
                "where training saw the items) count.",
        "bug": f"Split preparation is broken ({text}); counts and metrics on these splits are inflated "
               "until it is fixed.",
        "unverified": f"Possible overlap not yet decided ({text}); a name collision is not leakage until the "
                      "bytes are compared: pass content hashes.",
    }
    nxt = next_probe("VP6", "leakage audit", "rebuild the splits and re-run this probe", "leakage")
    return ProbeFinding(measurements=m, verdict=verdict, reason=text, disclosure=sentences[verdict], next_probe=nxt)
