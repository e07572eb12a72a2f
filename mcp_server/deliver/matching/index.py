"""Phrase indexes over the evidence: metric keywords (which rows a word like `PSNR` or
`top-1 accuracy` speaks of) and row names (aliases like `Ours`, experiment ids, dataset
qualifiers, splits, claim ids) that narrow the rows down.

Phrases are found by whole words, case-insensitively, longest first, so `fpsnr` is not
PSNR and `delta PSNR` is one keyword, not `delta` followed by PSNR. Lookup is by first word,
so the cost per line is one dict probe per word however many claims there are."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")  # what one spelling was added with
P = TypeVar("P")  # what a found phrase carries: the items of all its spellings, merged
_WORD = re.compile(r"[^\W_]+")
_SPLIT = re.compile(r"[\s_\-]+")

# Words that name a metric under another spelling; applied token by token.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "acc": ("accuracy",), "accuracy": ("acc",), "top1": ("top-1", "top 1"), "top5": ("top-5", "top 5"),
    "f1": ("f1-score", "f1 score"), "ppl": ("perplexity",), "perplexity": ("ppl",),
    "psnr": ("psnr",), "miou": ("mean iou",), "auc": ("auroc",), "map": ("mean ap",),
}
# Metric names a number may stand next to even when no claim uses them.
BUILTIN_METRICS = (
    "psnr", "ssim", "ms-ssim", "lpips", "fid", "kid", "inception score", "accuracy", "acc", "top-1",
    "top-5", "top1", "top5", "f1", "f1-score", "auc", "auroc", "ap", "map", "miou", "iou", "dice",
    "bleu", "rouge", "rouge-l", "meteor", "cider", "wer", "cer", "perplexity", "ppl", "mse", "mae",
    "rmse", "nmse", "nll", "recall", "ndcg", "mrr", "epe", "chamfer distance", "latency",
    "throughput", "flops", "gflops",
)
GENERIC_FIRST = frozenset({
    "delta", "mean", "avg", "average", "val", "valid", "test", "train", "best", "final", "total",
    "eval", "log", "rel", "abs", "max", "min", "std", "top", "overall", "macro", "micro",
})
DELTA_WORDS = frozenset({"delta", "diff", "gain", "improvement", "drop", "change", "Δ"})
_MAX_VARIANTS = 32


@dataclass(frozen=True, slots=True)
class PhraseHit(Generic[P]):
    start: int
    end: int
    payload: P


class PhraseIndex(Generic[ItemT, P]):
    """Whole-word, case-insensitive phrase finder; longest phrase wins at each position."""

    def __init__(self) -> None:
        self._raw: dict[str, list[ItemT]] = {}
        self._by_first: dict[str, list[tuple[int, dict[str, P]]]] = {}
        self._odd: list[tuple[str, P]] = []

    def add(self, phrase: str, item: ItemT) -> None:
        key = phrase.strip().lower()
        if key:
            self._raw.setdefault(key, []).append(item)

    def freeze(self, merge: Callable[[list[ItemT]], P]) -> None:
        """Group phrases by first word, then by length, so a probe is a few dict lookups."""
        buckets: dict[str, dict[int, dict[str, P]]] = {}
        for key, items in self._raw.items():
            m = _WORD.match(key)
            payload = merge(items)
            if m and m.start() == 0:
                buckets.setdefault(m.group(), {}).setdefault(len(key), {})[key] = payload
            else:
                self._odd.append((key, payload))
        self._by_first = {w: sorted(by_len.items(), key=lambda kv: -kv[0]) for w, by_len in buckets.items()}

    def find(self, lower: str) -> list[PhraseHit[P]]:
        """Non-overlapping occurrences in an already lower-cased line, left to right."""
        hits: list[PhraseHit[P]] = []
        blocked = 0
        by_first = self._by_first
        for m in _WORD.finditer(lower):
            s = m.start()
            if s < blocked:
                continue
            bucket = by_first.get(m.group())
            if bucket is None:
                continue
            for length, table in bucket:
                e = s + length
                payload = table.get(lower[s:e])
                if payload is not None and (e >= len(lower) or not lower[e - 1].isalnum() or not lower[e].isalnum()):
                    hits.append(PhraseHit(s, e, payload))
                    blocked = e
                    break
        for phrase, payload in self._odd:
            for m2 in re.finditer(re.escape(phrase), lower):
                if _ends_word(lower, m2.end(), phrase) and not any(h.start <= m2.start() < h.end for h in hits):
                    hits.append(PhraseHit(m2.start(), m2.end(), payload))
        if self._odd:
            hits.sort(key=lambda h: h.start)
        return hits


def _ends_word(text: str, end: int, phrase: str) -> bool:
    return end >= len(text) or not phrase[-1].isalnum() or not text[end].isalnum()


def variants(phrase: str) -> set[str]:
    """Spellings of a multi-word name: `top1_acc` -> `top1 acc`, `top1-acc`, `top1\\_acc`."""
    phrase = phrase.strip().lower()
    parts = [p for p in _SPLIT.split(phrase) if p]
    out = {phrase}
    if "_" in phrase:
        out.add(phrase.replace("_", "\\_"))
    if len(parts) > 1:
        out |= {sep.join(parts) for sep in (" ", "_", "-", "\\_")}
    return out


def metric_phrases(metric: str) -> tuple[set[str], set[str], bool]:
    """(exact spellings, derived spellings, is-a-delta-metric) of a metric key."""
    key = metric.strip().lower()
    parts = [p for p in _SPLIT.split(key) if p]
    exact = variants(key)
    derived: set[str] = set()
    options = [(p, *SYNONYMS.get(p, ())) for p in parts]
    for combo in itertools.islice(itertools.product(*options), _MAX_VARIANTS):
        derived |= variants(" ".join(combo))
    first = parts[0] if parts else ""
    if len(first) >= 2 and any(c.isalpha() for c in first) and first not in GENERIC_FIRST:
        derived.add(first)
        derived.update(SYNONYMS.get(first, ()))
    delta = any(p in DELTA_WORDS for p in parts) or key.startswith("Δ")
    return exact, derived - exact, delta


def qualifiers(metric: str) -> set[str]:
    """The words after a metric key's first one (`psnr_set5` -> `set5`): they tell rows of
    one metric on different datasets apart."""
    parts = [p for p in _SPLIT.split(metric.strip().lower()) if p]
    return {p for p in parts[1:] if len(p) >= 2 and p not in GENERIC_FIRST and any(c.isalpha() for c in p)}


@dataclass
class KeywordEntry:
    """What a metric phrase points at: evidence rows and results-only rows, best match first."""

    rows: tuple[int, ...] = ()
    pseudo: tuple[int, ...] = ()
    delta: bool = False
    builtin: bool = False


@dataclass
class NameEntry:
    """What a row name points at, by kind (alias, qualifier, claim)."""

    alias: frozenset[int] = field(default_factory=frozenset)
    qualifier: frozenset[int] = field(default_factory=frozenset)
    claim: frozenset[int] = field(default_factory=frozenset)
    split: str | None = None  # the split this word names (val, test), if it is a split word
    context: NameEntry | None = None  # the same without aliases: what a caption may narrow by


# (row id or -1 for a builtin metric, strength, pseudo row, delta metric)
KeywordItem = tuple[int, int, bool, bool]
# (kind: alias, qualifier, claim or split:<name>; row id or -1 for no row)
NameItem = tuple[str, int]


def merge_keywords(items: list[KeywordItem]) -> KeywordEntry:
    """Keep the strongest rows of each kind (evidence, pseudo)."""
    ev = [(s, r) for r, s, p, _ in items if r >= 0 and not p]
    ps = [(s, r) for r, s, p, _ in items if r >= 0 and p]
    top_ev = max((s for s, _ in ev), default=0)
    top_ps = max((s for s, _ in ps), default=0)
    return KeywordEntry(
        rows=tuple(sorted({r for s, r in ev if s == top_ev})),
        pseudo=tuple(sorted({r for s, r in ps if s == top_ps})),
        delta=any(d for *_, d in items),
        builtin=any(r < 0 for r, *_ in items),
    )


SPLIT_WORDS: dict[str, tuple[str, ...]] = {"test": ("test",), "val": ("val", "validation", "dev")}


def merge_names(items: list[NameItem]) -> NameEntry:
    """Row ids by kind; a split word also names its split."""
    by: dict[str, set[int]] = {"alias": set(), "qualifier": set(), "claim": set()}
    split = None
    for kind, row in items:
        if kind.startswith("split:"):
            split, kind = kind[6:], "qualifier"
        if row >= 0:
            by[kind].add(row)
    entry = NameEntry(frozenset(by["alias"]), frozenset(by["qualifier"]), frozenset(by["claim"]), split)
    entry.context = NameEntry(frozenset(), entry.qualifier, entry.claim, split) if entry.alias else entry
    return entry


def lower_line(line: str) -> str:
    """Lower-case without changing the length (a few characters grow when lowered)."""
    low = line.lower()
    return low if len(low) == len(line) else "".join(c.lower() if len(c.lower()) == 1 else c for c in line)


def add_all(index: PhraseIndex[ItemT, P], phrases: Iterable[str], item: ItemT) -> None:
    """Add one item under several spellings."""
    for phrase in phrases:
        index.add(phrase, item)


KeywordIndex = PhraseIndex[KeywordItem, KeywordEntry]
NameIndex = PhraseIndex[NameItem, NameEntry]
