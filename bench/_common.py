"""Shared benchmark scaffolding: a private loopback sshd (the test fixture's), an isolated
RGT_HOME, an inventory, and a median timer. Benchmarks print ratios against baselines
measured in the same run; machines here are noisy, so compare ratios, not seconds."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.relay import DelayedLink  # noqa: E402
from tests.support.sshd import Sshd  # noqa: E402


class Bench:
    def __init__(self, aliases: int = 1) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="rgt-bench-"))
        self.sshd = Sshd(self.root / "sshd")
        self.sshd.start()
        self.ssh_config = self.root / "ssh_config"
        self.ssh_config.write_text("".join(self.sshd.client_config(f"box{i}") for i in range(aliases)))
        self.durable = self.root / "durable"
        self.durable.mkdir()
        os.environ.update(RGT_HOME=str(self.root / "home"), RGT_CONFIG=str(self.root / "hosts.toml"),
                          RGT_SSH_CONFIG=str(self.ssh_config))
        lines = []
        for i in range(aliases):
            lines += [f"[hosts.box{i}]", f'destination = "box{i}"', f'durable_root = "{self.durable}"']
        (self.root / "hosts.toml").write_text("\n".join(lines) + "\n")

    def close(self) -> None:
        self.sshd.stop()

    async def delayed_alias(self, alias: str, one_way_s: float) -> DelayedLink:
        """Inventory host `alias`: box0's sshd reached through a DelayedLink (its own ssh alias and
        known_hosts line, as a box on another port would have)."""
        link = DelayedLink(self.sshd.port, one_way_s)
        await link.start()
        known = self.root / f"known_hosts_{alias}"
        known.write_text(self.sshd.known_hosts_line().replace(f":{self.sshd.port} ", f":{link.port} ", 1) + "\n")
        config = self.sshd.client_config(alias, known).replace(f"Port {self.sshd.port}", f"Port {link.port}")
        self.ssh_config.write_text(self.ssh_config.read_text() + config)
        with (self.root / "hosts.toml").open("a") as f:
            f.write(f'[hosts.{alias}]\ndestination = "{alias}"\ndurable_root = "{self.durable}"\n')
        return link


async def median_s(fn: Callable[[], Awaitable[object]], n: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        await fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def report(name: str, value: float, baseline: float, target: str, ok: bool) -> None:
    print(f"{name:58} {value * 1e3:9.2f} ms vs {baseline * 1e3:9.2f} ms  ratio {value / baseline:6.2f}  "
          f"target {target:8} {'OK' if ok else 'MISSED'}")
