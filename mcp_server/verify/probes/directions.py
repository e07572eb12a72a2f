"""Which way is better for a metric, from its name. Never assumed silently: a name not in
the table gives None, and the probe asks for `direction`."""

from __future__ import annotations

import re
from typing import Literal

Direction = Literal["higher", "lower"]

HIGHER = frozenset({
    "psnr", "ssim", "ms-ssim", "map", "map50", "map75", "map50-95", "ap", "ap50", "ap75", "miou", "iou",
    "pa", "pixel_accuracy", "pixel_acc", "dice", "accuracy", "acc", "top1", "top5", "top1_acc",
    "top5_acc", "recall", "precision", "f1", "f1_score", "auc", "auroc", "auprc", "return",
    "reward", "episode_return", "mean_reward", "bleu", "rouge", "rouge-l", "meteor", "r2", "ndcg",
    "mrr", "hit_rate", "margins", "accuracies", "exact_match", "em", "pass@1", "win_rate",
})
LOWER = frozenset({
    "lpips", "nmse", "loss", "perplexity", "ppl", "fid", "kid", "error", "err", "error_rate",
    "top1_err", "top5_err", "wer", "cer", "mse", "mae", "rmse", "nll", "ce", "cross_entropy",
    "latency", "params", "flops", "macs", "chamfer", "epe", "abs_rel", "bpd", "bits_per_dim",
})
# Whole names checked before any prefix is stripped (slash-separated tracker names).
_FULL: dict[str, Direction] = {"rewards/margins": "higher", "rewards/accuracies": "higher", "rewards/chosen": "higher"}
_PREFIX = re.compile(r"^(?:train|val|valid|validation|test|eval|dev)[_./-]")


def normalise(name: str) -> str:
    """Tracker spellings to one key: 'val/mAP50' -> 'map50', 'test_loss' -> 'loss'."""
    key = name.strip().lower()
    key = key.rsplit("/", 1)[-1] if "/" in key else key
    while _PREFIX.match(key):
        key = _PREFIX.sub("", key, count=1)
    return key


def direction_of(name: str | None) -> Direction | None:
    """'higher' / 'lower' for a known metric name, else None."""
    if not name:
        return None
    full = name.strip().lower()
    for prefix in ("train/", "val/", "test/", "eval/"):
        full = full.removeprefix(prefix)
    if full in _FULL:
        return _FULL[full]
    key = normalise(name)
    base = re.split(r"[@(\[]", key)[0].strip("_-") or key
    for candidate in (key, base):
        if candidate in HIGHER:
            return "higher"
        if candidate in LOWER:
            return "lower"
    tokens = set(re.split(r"[_\-.@ ]+", base))
    if tokens & {"loss", "error", "err", "nll", "mse", "mae", "fid", "lpips", "perplexity", "latency"}:
        return "lower"
    if tokens & {"acc", "accuracy", "psnr", "ssim", "map", "miou", "iou", "dice", "f1", "recall",
                 "precision", "auc", "reward", "return", "bleu"}:
        return "higher"
    return None


def resolve(metric: str | None, given: Direction | None) -> tuple[Direction | None, list[str]]:
    """The direction to use (the caller's wins) and a warning when it contradicts the table."""
    table = direction_of(metric)
    if given and table and given != table:
        return given, [f"{metric} is {table}-is-better in the direction table; using the {given} you passed"]
    return given or table, []


def better(a: float, b: float, direction: Direction) -> bool:
    """a is strictly better than b."""
    return a > b if direction == "higher" else a < b
