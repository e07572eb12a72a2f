"""A results file (results.json, a capsule's metrics.json, a cell's best_metrics.json) in
any accepted shape, read into one typed model: which metric, on which split, what value,
over how many samples and seeds, with what spread.

Shapes (the schema says which are valid; this reads a valid one):
- listed: `{exp_id, run_id, metrics: [{metric, split, value, n, variance}]}`;
- mapped: `{metric: {split: {value, n, variance}}}`;
- flat:   `{metric: value, ..., split, n, seeds}`, also with the metrics under a `metrics`
  object or grouped per split (`{"test": {metric: value, n}}`). `<metric>_std` (or `_sem`)
  is that metric's spread. Numbers that count training progress (epoch, step) are not
  metrics, and neither is text."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

Shape = Literal["listed", "mapped", "flat"]
SPLITS = ("train", "val", "test")
# Numbers in a flat file that describe the run, not its quality.
_NOT_METRICS = frozenset({
    "n", "seeds", "seed", "epoch", "epochs", "best_epoch", "step", "steps", "global_step", "iteration", "iter",
    "batch_size", "lr", "learning_rate", "time", "elapsed", "timestamp",
})
_SPREADS = ("_std", "_sem")


class MetricEntry(BaseModel):
    """One metric value of a run, as its results file states it."""

    metric: str
    split: str | None = None
    value: float
    n: int | None = None
    variance: float | None = None
    seeds: int | None = None


class ResultsFile(BaseModel):
    """Every metric of one results file, whatever shape it was written in."""

    shape: Shape
    exp_id: str | None = None
    run_id: str | None = None
    entries: list[MetricEntry]

    def table(self) -> dict[tuple[str, str | None], MetricEntry]:
        """(metric lower-cased, split) -> entry; a later duplicate wins, as in the file."""
        return {(e.metric.lower(), e.split): e for e in self.entries}


def read_results(data: dict[str, Any]) -> ResultsFile:
    """The entries of a schema-valid results file."""
    ids = {"exp_id": _text(data.get("exp_id")), "run_id": _text(data.get("run_id"))}
    if isinstance(data.get("metrics"), list):
        return ResultsFile(shape="listed", entries=[_listed(e) for e in data["metrics"]], **ids)
    if any(isinstance(v, dict) and k not in SPLITS and k != "metrics" for k, v in data.items()):
        return ResultsFile(shape="mapped", entries=_mapped(data), **ids)
    return ResultsFile(shape="flat", entries=_flat(data), **ids)


def lookup(table: dict[tuple[str, str | None], MetricEntry], metric: str, split: str | None) -> MetricEntry | None:
    """The entry for (metric, split). A file that names no split stands for the split asked
    for; asked for no split, the only entry, else the test one."""
    key = metric.lower()
    if split is not None:
        return table.get((key, split)) or table.get((key, None))
    found = sorted((k[1] or "", e) for k, e in table.items() if k[0] == key)
    if len(found) == 1:
        return found[0][1]
    return next((e for s, e in found if s == "test"), None)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _spread(e: dict[str, Any]) -> tuple[float | None, int | None]:
    var = e.get("variance") or {}
    return var.get("value"), var.get("seeds")


def _listed(e: dict[str, Any]) -> MetricEntry:
    variance, seeds = _spread(e)
    return MetricEntry(metric=e["metric"], split=e.get("split"), value=e["value"], n=e.get("n"), variance=variance,
                       seeds=seeds)


def _mapped(data: dict[str, Any]) -> list[MetricEntry]:
    out = []
    for metric, splits in data.items():
        if metric in ("exp_id", "run_id") or not isinstance(splits, dict):
            continue
        for split, e in splits.items():
            variance, seeds = _spread(e)
            out.append(MetricEntry(metric=metric, split=split, value=e["value"], n=e.get("n"), variance=variance,
                                   seeds=seeds))
    return out


def _flat(data: dict[str, Any]) -> list[MetricEntry]:
    out = _block(data, None, None, None)
    for split in SPLITS:
        if isinstance(data.get(split), dict):
            out += _block(data[split], split, data.get("n"), data.get("seeds"))
    return out


def _block(block: dict[str, Any], split: str | None, n: int | None, seeds: int | None) -> list[MetricEntry]:
    """One flat block: its own split, n and seeds win over the enclosing ones."""
    split = block.get("split") if isinstance(block.get("split"), str) else split
    n = block.get("n", n)
    seeds = block.get("seeds", seeds)
    values = {k: v for k, v in block.items() if _number(v) and k not in SPLITS}
    if isinstance(block.get("metrics"), dict):
        values.update({k: v for k, v in block["metrics"].items() if _number(v)})
    spreads = {k[: -len(s)]: float(v) for k, v in values.items() for s in _SPREADS
               if k.endswith(s) and k[: -len(s)] in values}
    return [MetricEntry(metric=k, split=split, value=v, n=n, variance=spreads.get(k), seeds=seeds)
            for k, v in values.items()
            if k.lower() not in _NOT_METRICS and not any(k.endswith(s) and k[: -len(s)] in values for s in _SPREADS)]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
