"""preflight of the demo's tiny script (issue 31), through the real MCP client on this machine:
the whole drill's wall time, from the start call to the verdict (target <= 60 s on 2 cores), and
its overhead over the script's own running time. Baselines, measured in the same run: the time
the drill's attempts ran (what the same starts and steps cost by hand, restarts included on both
sides; target <= 1.5x) and one straight run of the script to its end by hand."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402

from mcp_server.demo.runner import prepare  # noqa: E402
from mcp_server.server import build_server  # noqa: E402

ARGS = "--seed 1 --out pf --steps 40 --save-every 5 --pace 0.03"


async def one_preflight(base: Path) -> tuple[float, float, str]:
    """Wall seconds start -> verdict, seconds the drill's attempts ran, and the verdict."""
    settings = prepare(base)
    async with Client(build_server(settings)) as c:
        started = time.perf_counter()
        res = await c.call_tool("preflight", {"host": "demo", "command": f"{sys.executable} train_tiny.py {ARGS}",
                                              "workdir": str(base / "work"), "checkpoints": ["pf/ckpt/*.json"],
                                              "planned_steps": 60, "grace_s": 2, "attempt_s": 30})
        run_id = (res.structured_content or {})["run_id"]
        while not (await c.call_tool("wait_for_run", {"host": "demo", "run_id": run_id, "timeout_s": 30})
                   ).structured_content["ended"]:  # type: ignore[index]
            pass
        out = (await c.call_tool("preflight", {"host": "demo", "run_id": run_id})).structured_content or {}
        wall = time.perf_counter() - started
    record = next((base / "box" / ".rgt" / "runs").glob("*/preflight/drill.json"))
    attempts = json.loads(record.read_text())["attempts"]
    ran = sum(a["ended"] - a["started"] for a in attempts)
    return wall, ran, str(out.get("verdict"))


def straight(base: Path) -> float:
    work = base / "work"
    started = time.perf_counter()
    subprocess.run([sys.executable, "train_tiny.py", *ARGS.replace("--out pf", "--out byhand").split()], cwd=work,
                   check=True, capture_output=True)
    return time.perf_counter() - started


def main(n: int = 3) -> None:
    walls, rans, hands = [], [], []
    for _ in range(n):
        base = Path(tempfile.mkdtemp(prefix="rgt-bench-preflight-"))
        wall, ran, verdict = asyncio.run(one_preflight(base))
        assert verdict == "GO", verdict
        walls.append(wall)
        rans.append(ran)
        hands.append(straight(base))
    w, r, h = statistics.median(walls), statistics.median(rans), statistics.median(hands)
    print(f"preflight of the demo's tiny script ({ARGS}), median of {n}:")
    print(f"  whole preflight, start call -> verdict: {w:.1f} s   (target <= 60 s)")
    print(f"  the drill's attempts ran:               {r:.1f} s   overhead {w / r:.2f}x (target <= 1.5x)")
    print(f"  one straight run by hand:               {h:.1f} s   the drill's restarts and kills cost {w / h:.2f}x")


if __name__ == "__main__":
    main()
