"""A big file pulled in short calls (issue 33, part 1): a 1.5 GiB file over the loopback sshd,
`verify_artifacts` with `budget_s: 2` called until done, against one unbudgeted call of the same
pull measured in the same run. Target: the budgeted pull's total time <= 2x the single call, and
no byte already hashed read again from disk (the server's REHASHED_BYTES counter)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import Bench  # noqa: E402

from mcp_server.app import App  # noqa: E402
from mcp_server.settings import Settings  # noqa: E402
from mcp_server.verify.artifacts import partial_hash  # noqa: E402
from mcp_server.verify.artifacts.request import VerifyRequest  # noqa: E402
from mcp_server.verify.artifacts.verifier import verify_artifacts  # noqa: E402

GIB = 1 << 30
SIZE = 3 * GIB // 2


async def pulled(app: App, root: Path, budget_s: float) -> tuple[float, int]:
    """Seconds until the pull of `root`'s big.bin is done, and the calls it took."""
    spec = app.pool.spec("box0")
    host = await app.pool.host(spec)
    started, calls = time.perf_counter(), 0
    while True:
        calls += 1
        req = VerifyRequest(root=str(root), roster=["big.bin"], budget_s=budget_s)
        result = await verify_artifacts(host, spec, req, pulls_dir=app.settings.pulls_dir, ledger=app.ledger)
        if result.done:
            assert result.passed, result.findings
            return time.perf_counter() - started, calls


async def main() -> None:
    b = Bench()
    try:
        one_root, short_root = b.durable / "one", b.durable / "short"
        one_root.mkdir()
        short_root.mkdir()
        with (one_root / "big.bin").open("wb") as f:  # random bytes: sparse zeros would flatter the hashing
            block = os.urandom(1 << 20)
            for _ in range(SIZE >> 20):
                f.write(block)
        os.link(one_root / "big.bin", short_root / "big.bin")
        app = App(Settings.from_env())
        one, _ = await pulled(app, one_root, 55)
        partial_hash.PARTIAL_HASHES.clear()
        before = partial_hash.REHASHED_BYTES
        short, calls = await pulled(app, short_root, 2)
        reread = partial_hash.REHASHED_BYTES - before
        await app.close()
        print(f"pull + verify {SIZE / GIB:.1f} GiB over loopback: budget_s=2 until done {short:.1f} s in {calls} calls "
              f"vs one call {one:.1f} s: ratio {short / one:.2f} (target <= 2.0) "
              f"{'OK' if short <= 2 * one else 'MISSED'}; bytes hashed again from disk: {reread} (target 0)")
    finally:
        b.close()


if __name__ == "__main__":
    asyncio.run(main())
