"""The checks that need every box of one job (audit_box with `hosts` and `one_job`):
A21 one shared filesystem (a file written on the first box must be seen, byte for byte, by every
other; removed afterwards) and A30 the multi-node fabric (NVSwitch fabric state and the fabric
manager's version against the driver on every node, the path MTU from the first node to each
peer with fragmentation forbidden, and the network interfaces NCCL will choose from)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass

from mcp_server import scripts
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.audit.model import Check, check

Box = tuple[Host, HostSpec]


async def _step(host: Host, mode: str, path: str, name: str, content: str = "") -> str:
    words = (quote(mode), path_word(path, "shared_path"), quote(name), quote(content))
    res = await host.run(scripts.command_words("audit_shared_fs", *words), timeout=20)
    res.check("checking the shared filesystem")
    return res.text.strip()


async def a21_shared_fs(boxes: list[Box], path: str | None) -> Check:
    title = "one shared filesystem across the job's boxes"
    (first, spec), peers = boxes[0], boxes[1:]
    where = path or spec.durable_root
    name, content = f".rgt-a21-{secrets.token_hex(6)}", secrets.token_hex(16)
    wrote = await _step(first, "write", where, name, content)
    if not wrote.startswith("written"):
        return check("A21", title, "FAIL", f"cannot write under {where} on {spec.name} ({wrote}): nothing to compare",
                     where)
    try:
        seen = await asyncio.gather(*(_step(h, "read", path or s.durable_root, name, content) for h, s in peers))
    finally:
        await _step(first, "remove", where, name)
    blind = [f"{s.name} ({r} under {path or s.durable_root})" for (_, s), r in zip(peers, seen, strict=True)
             if r != "seen"]
    ev = f"a file written on {spec.name} under {where} ({wrote.split()[-1] if ' ' in wrote else '?'})"
    if blind:
        return check("A21", title, "FAIL", f"{ev} is not seen by: {', '.join(blind)}: these boxes do not share that "
                     "filesystem; a multi-node job's checkpoints and data must be on one every node mounts (same "
                     "region/datacenter storage, or the cluster's shared space)", where)
    return check("A21", title, "PASS", f"{ev} is seen by {', '.join(s.name for _, s in peers)}", where)


@dataclass
class Node:
    name: str
    kv: dict[str, str]
    ifaces: list[str]  # "name mtu" of every interface that is up, loopback aside
    fabric: list[tuple[str, str, str]]  # per GPU: the Fabric block's State, Status, Health Summary

    def describe(self) -> str:
        states = sorted({f[0] for f in self.fabric}) or ["n/a"]
        return (f"{self.name}: driver {self.kv.get('driver') or 'none'}, fabric {'/'.join(states)}, "
                f"{', '.join(self.ifaces) or 'no interface up'}")


async def _node(host: Host, name: str) -> Node:
    res = await host.run(scripts.load("audit_fabric"), timeout=30)
    res.check("reading the node's fabric and network facts")
    lines = res.text.splitlines()
    ifaces = [line.removeprefix("iface=") for line in lines if line.startswith("iface=")]
    fabric = [parse_fabric(line.removeprefix("fabric=")) for line in lines if line.startswith("fabric=")]
    return Node(name, parse_kv(res.text), sorted(ifaces), fabric)


def parse_fabric(value: str) -> tuple[str, str, str]:
    state, status, summary = (value.split("|") + ["", ""])[:3]
    return state, status, summary


UNSUPPORTED = {"", "N/A", "Not Supported"}


def fabric_problem(state: str, status: str, summary: str) -> str | None:
    """What is wrong with one GPU's NVSwitch fabric, as `nvidia-smi -q` reports it; None when fine
    (or when the GPU has no fabric: PCIe cards, single-GPU setups)."""
    if state in UNSUPPORTED:
        return None
    if state != "Completed":
        return f"fabric registration {state!r}: the fabric manager has not (yet) set up NVLink; NCCL hangs at init"
    if status not in UNSUPPORTED and status != "Success":
        return f"fabric status {status!r}: NVLink is not usable"
    if summary == "Unhealthy":
        return "fabric health Unhealthy: degraded NVLink"
    return None


async def _mtu(host: Host, addr: str) -> dict[str, str]:
    res = await host.run(scripts.command("audit_mtu", addr), timeout=20)
    return parse_kv(res.text) if res.exit_status == 0 else {}


def _fabric_problems(n: Node) -> list[str]:
    found = sorted({p for f in n.fabric if (p := fabric_problem(*f))})
    out = [f"{n.name}: {p} ({sum(1 for f in n.fabric if fabric_problem(*f) == p)} GPU(s); MN1)" for p in found]
    if n.kv.get("fm_active") and n.kv["fm_active"] != "active":
        out.append(f"{n.name}: nvidia-fabricmanager is {n.kv['fm_active']}")
    driver, fm = n.kv.get("driver", ""), n.kv.get("fm_version", "")
    if driver and fm and driver != fm:
        out.append(f"{n.name}: fabric manager {fm} differs from driver {driver} (they must match exactly)")
    return out


async def a30_fabric(boxes: list[Box]) -> Check:
    title = "multi-node fabric and network path"
    nodes = await asyncio.gather(*(_node(h, s.name) for h, s in boxes))
    problems = [p for n in nodes for p in _fabric_problems(n)]
    warnings: list[str] = []
    first = nodes[0]
    if not first.kv.get("ping"):
        warnings.append(f"ping is not installed on {first.name}: the path MTU was not measured")
    else:
        for peer in nodes[1:]:
            addr = peer.kv.get("addr", "")
            m = await _mtu(boxes[0][0], addr) if addr else {}
            if m.get("size8972") == "ok":
                continue
            if m.get("size1472") == "ok":
                warnings.append(f"{first.name} -> {peer.name} ({addr}): 9000-byte frames do not pass, 1500-byte ones "
                                "do: if either side is set to jumbo frames, large collectives hang (MN4)")
            else:
                warnings.append(f"{first.name} -> {peer.name} ({addr or 'no address'}): no ICMP answer (down, or "
                                "firewalled)")
    if len({tuple(n.ifaces) for n in nodes}) > 1:
        warnings.append("the nodes' interfaces differ: set NCCL_SOCKET_IFNAME to the one that links them (MN2)")
    seen = "; ".join(n.describe() for n in nodes)
    if problems:
        return check("A30", title, "FAIL", "; ".join(problems + warnings) + f". Seen: {seen}")
    if warnings:
        return check("A30", title, "WARN", "; ".join(warnings) + f". Seen: {seen}")
    return check("A30", title, "PASS", f"9000-byte frames pass from {first.name} to every peer; {seen}")


async def cross_checks(boxes: list[Box], shared_path: str | None) -> list[Check]:
    """A21 and A30 over the boxes of one job (the first box writes and pings)."""
    if len(boxes) < 2:
        return [check(cid, title, "SKIP", "needs two or more reachable boxes of the job")
                for cid, title in (("A21", "one shared filesystem across the job's boxes"),
                                   ("A30", "multi-node fabric and network path"))]
    return [await a21_shared_fs(boxes, shared_path), await a30_fabric(boxes)]
