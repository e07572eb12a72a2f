"""A tiny CPU training run for the demo: logistic regression on two noisy 2-D blobs, plain
Python (no numpy or torch). Logs `step=… loss=… acc=…` lines, writes metrics.jsonl, final.json
and the weights as safetensors into --out. About 8 s per seed; deterministic per seed.

It checkpoints as a preemptible run must: the full state (step, weights, RNG) to
--ckpt/last.json (default <out>/ckpt) every --save-every steps, written to a temp file, fsynced and renamed into
place; and it loads that file unconditionally at start, so a killed run started again continues
where it saved (the same losses it would have printed), and one started after it finished does
no work again."""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import struct
import sys
import time
from pathlib import Path


def blobs(rng: random.Random, n: int) -> list[tuple[float, float, int]]:
    out = []
    for i in range(n):
        label = i % 2
        cx = 1.0 if label else -1.0
        out.append((rng.gauss(cx, 1.1), rng.gauss(cx * 0.6, 1.1), label))
    return out


def sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def evaluate(w: list[float], data: list[tuple[float, float, int]]) -> tuple[float, float]:
    loss, right = 0.0, 0
    for x, y, label in data:
        p = sigmoid(w[0] * x + w[1] * y + w[2])
        loss -= math.log(p + 1e-12) if label else math.log(1.0 - p + 1e-12)
        right += (p >= 0.5) == bool(label)
    return loss / len(data), right / len(data)


def save_safetensors(path: Path, w: list[float]) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [len(w)], "data_offsets": [0, 4 * len(w)]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(struct.pack("<Q", len(header)) + header + struct.pack(f"<{len(w)}f", *w))


def save_state(path: Path, step: int, w: list[float], rng: random.Random) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump({"step": step, "w": w, "rng": rng.getstate()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_state(path: Path) -> tuple[int, list[float], tuple[object, ...]] | None:
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    version, internal, gauss = state["rng"]
    return int(state["step"]), [float(x) for x in state["w"]], (version, tuple(internal), gauss)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--pace", type=float, default=0.12, help="seconds per step, so the run can be watched")
    ap.add_argument("--save-every", type=int, default=10, help="steps between checkpoints")
    ap.add_argument("--ckpt", help="checkpoint folder (default: <out>/ckpt)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    train, test = blobs(rng, 400), blobs(random.Random(10_000 + args.seed), 400)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = Path(args.ckpt or out / "ckpt") / "last.json"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    w = [rng.gauss(0, 0.1) for _ in range(3)]
    start = 1
    if (saved := load_state(ckpt)) is not None:
        start, w, rng_state = saved[0] + 1, saved[1], saved[2]
        rng.setstate(rng_state)
        sys.stdout.write(f"resumed from {ckpt} at step {saved[0]}\n")
    with (out / "metrics.jsonl").open("a" if start > 1 else "w") as log:
        for step in range(start, args.steps + 1):
            batch = rng.sample(train, 32)
            grad = [0.0, 0.0, 0.0]
            for x, y, label in batch:
                err = sigmoid(w[0] * x + w[1] * y + w[2]) - label
                grad = [grad[0] + err * x, grad[1] + err * y, grad[2] + err]
            w = [wi - args.lr * g / len(batch) for wi, g in zip(w, grad, strict=True)]
            loss, acc = evaluate(w, test)
            log.write(json.dumps({"step": step, "loss": round(loss, 5), "acc": round(acc, 5)}) + "\n")
            log.flush()
            sys.stdout.write(f"step={step} loss={loss:.4f} acc={acc:.4f}\n")
            sys.stdout.flush()
            if step % args.save_every == 0 or step == args.steps:
                save_state(ckpt, step, w, rng)
            time.sleep(args.pace)
    loss, acc = evaluate(w, test)
    (out / "final.json").write_text(json.dumps({"accuracy": round(acc, 4), "loss": round(loss, 4),
                                                "seed": args.seed, "split": "test", "n": len(test)}) + "\n")
    save_safetensors(out / "weights.safetensors", w)
    sys.stdout.write(f"done: seed {args.seed} test accuracy {acc:.4f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
