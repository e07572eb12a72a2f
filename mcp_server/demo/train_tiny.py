"""A tiny CPU training run for the demo: logistic regression on two noisy 2-D blobs, plain
Python (no numpy or torch). Logs `step=… loss=… acc=…` lines, writes metrics.jsonl, final.json,
the weights as safetensors, config.yaml and train.csv into --out. About 8 s per seed; deterministic per seed.

It checkpoints as a preemptible run must: the full state (step, weights, RNG) to
--ckpt/last.json (default <out>/ckpt) every --save-every steps, written to a temp file, fsynced and renamed into
place; and it loads that file unconditionally at start, so a killed run started again continues
where it saved (the same losses it would have printed), and one started after it finished does
no work again.

`--eval CHECKPOINT --config CONFIG --out DIR` trains nothing: it loads the weights (the
safetensors file training wrote, as a capsule's best.pth), rebuilds the test set from the config's
seed and writes DIR/metrics.json with the same fields final.json has, so a capsule's repro.sh can
re-derive the test metrics the training wrote."""

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


def load_safetensors(path: Path) -> list[float]:
    raw = path.read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    start, end = json.loads(raw[8:8 + size])["w"]["data_offsets"]
    body = raw[8 + size + start:8 + size + end]
    return list(struct.unpack(f"<{len(body) // 4}f", body))


def read_config(path: Path) -> dict[str, str]:
    """A flat YAML mapping (`key: value` lines) or a JSON object, as strings."""
    text = path.read_text()
    if text.lstrip().startswith("{"):
        return {str(k): str(v) for k, v in json.loads(text).items()}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not key.startswith((" ", "#")):
            out[key.strip()] = value.split(" #")[0].strip().strip("'\"")
    return out


def held_out(seed: int) -> list[tuple[float, float, int]]:
    return blobs(random.Random(10_000 + seed), 400)


def final_metrics(w: list[float], test: list[tuple[float, float, int]], seed: int) -> dict[str, object]:
    loss, acc = evaluate(w, test)
    return {"accuracy": round(acc, 4), "loss": round(loss, 4), "seed": seed, "split": "test", "n": len(test)}


def evaluate_checkpoint(checkpoint: Path, config: Path, out: Path) -> int:
    seed = int(read_config(config)["seed"])
    out.mkdir(parents=True, exist_ok=True)
    metrics = final_metrics(load_safetensors(checkpoint), held_out(seed), seed)
    (out / "metrics.json").write_text(json.dumps(metrics) + "\n")
    sys.stdout.write(f"evaluated {checkpoint}: test accuracy {metrics['accuracy']}\n")
    return 0


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


def write_run_files(out: Path, args: argparse.Namespace) -> None:
    """What a capsule keeps beside the weights: the resolved config and the training curve as CSV."""
    (out / "config.yaml").write_text(f"seed: {args.seed}\nsteps: {args.steps}\nlr: {args.lr}\n")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    (out / "train.csv").write_text("step,loss,acc\n" + "".join(f"{r['step']},{r['loss']},{r['acc']}\n" for r in rows))


def arguments() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--pace", type=float, default=0.12, help="seconds per step, so the run can be watched")
    ap.add_argument("--save-every", type=int, default=10, help="steps between checkpoints")
    ap.add_argument("--ckpt", help="checkpoint folder (default: <out>/ckpt)")
    ap.add_argument("--eval", metavar="CHECKPOINT", help="evaluate these weights instead of training")
    ap.add_argument("--config", help="--eval: the run's config (its seed names the test set)")
    return ap


def main() -> int:
    ap = arguments()
    args = ap.parse_args()
    if args.eval:
        if not args.config:
            ap.error("--eval needs --config")
        return evaluate_checkpoint(Path(args.eval), Path(args.config), Path(args.out))
    if args.seed is None:
        ap.error("the following arguments are required: --seed")
    rng = random.Random(args.seed)
    train, test = blobs(rng, 400), held_out(args.seed)
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
    final = final_metrics(w, test, args.seed)
    (out / "final.json").write_text(json.dumps(final) + "\n")
    save_safetensors(out / "weights.safetensors", w)
    write_run_files(out, args)
    sys.stdout.write(f"done: seed {args.seed} test accuracy {final['accuracy']:.4f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
