"""A tiny run for the capsule tests, run by the box's own python3 (no third-party packages): it
writes what a capsule holds, with an accuracy that depends on its seed (0.80 + 0.02 * (seed - 1)).
The checkpoint and the parquet rows are made by the test beforehand (torch and pyarrow live in
the test's environment, not the box's) and copied in as the run's outputs."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--assets", required=True)
    args = ap.parse_args()
    assets, test = Path(args.assets), Path("test/main")
    (test / "vis" / "ours" / "pred").mkdir(parents=True, exist_ok=True)
    Path("config.yaml").write_text(f"seed: {args.seed}\nlr: 0.2\n")
    Path("train.csv").write_text("epoch,loss\n0,1.2\n1,0.9\n")
    shutil.copyfile(assets / "best.pth", "best.pth")
    shutil.copyfile(assets / "results.parquet", test / "results.parquet")
    (test / "vis" / "ours" / "pred" / "0.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    acc = round(0.80 + 0.02 * (args.seed - 1), 4)
    (test / "metrics.json").write_text(json.dumps({"accuracy": acc, "split": "test", "n": 400, "seed": args.seed}))


if __name__ == "__main__":
    main()
