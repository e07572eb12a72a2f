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
from mcp_server.paths import policy
from mcp_server.run.audit.model import Check, check

Box = tuple[Host, HostSpec]
MARKER = ".rgt-a21-"  # A21's marker files' names begin so


def _scope(host: Host, spec: HostSpec, mode: str) -> policy.Scope:
    """Where A21 may put its marker: under the box's durable or scratch root, outside the
    server's control trees; a peer only reads the marker back (off the deny list and .rgt/)."""
    if mode == "read":
        return policy.anywhere(host, "the folders A21 reads")
    return policy.box_scope(spec.durable_root, [spec.durable_root, spec.scratch_root],
                            "the roots A21 writes its marker in", this_machine=host.kind == "local")


async def _step(box: Box, mode: str, path: str, name: str, content: str = "") -> str:
    host, spec = box
    scope = _scope(host, spec, mode)
    words = (quote(mode), path_word(path, "shared_path"), quote(name), quote(content), *scope.words())
    res = await host.run(policy.library() + scripts.command_words("audit_shared_fs", *words), timeout=20)
    res.check("checking the shared filesystem")
    text = res.text.strip()
    if text.startswith(("RGT-DENIED", "RGT-OUTSIDE")):
        raise policy.refusal(text, what="shared_path", host=spec.name, scope=scope,
                             done="no marker was written" if mode in ("check", "write") else "A21 did not run")
    return text


async def confine_shared(box: Box, path: str) -> None:
    """Refuse, before anything runs, a shared_path where the path policy keeps A21 from writing
    its marker (checked on the box, nothing written)."""
    await _step(box, "check", path, f"{MARKER}check")


async def a21_shared_fs(boxes: list[Box], path: str | None) -> Check:
    title = "one shared filesystem across the job's boxes"
    spec, peers = boxes[0][1], boxes[1:]
    where = path or spec.durable_root
    name, content = f"{MARKER}{secrets.token_hex(6)}", secrets.token_hex(16)
    wrote = await _step(boxes[0], "write", where, name, content)
    if not wrote.startswith("written"):
        return check("A21", title, "FAIL", f"cannot write under {where} on {spec.name} ({wrote}): nothing to compare",
                     where)
    try:
        seen = await asyncio.gather(*(_step((h, s), "read", path or s.durable_root, name, content)
                                      for h, s in peers))
    finally:
        await _step(boxes[0], "remove", where, name)
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

    def links(self) -> dict[str, int]:
        """Interface name -> MTU, bridges and container plumbing aside (NCCL skips docker*; veth
        and bridge names differ per node without meaning anything)."""
        out = {}
        for entry in self.ifaces:
            name, _, mtu = entry.partition(" ")
            if mtu.isdigit() and not name.startswith(VIRTUAL):
                out[name.split("@")[0]] = int(mtu)
        return out


VIRTUAL = ("docker", "veth", "br-", "virbr", "cni", "flannel", "cali", "kube", "vxlan", "tunl")
UNSUPPORTED = {"", "N/A", "Not Supported"}


def parse_node(name: str, text: str) -> Node:
    """What audit_fabric.sh printed on one node."""
    lines = text.splitlines()
    ifaces = [line.removeprefix("iface=") for line in lines if line.startswith("iface=")]
    fabric = [parse_fabric(line.removeprefix("fabric=")) for line in lines if line.startswith("fabric=")]
    return Node(name, parse_kv(text), sorted(ifaces), fabric)


async def _node(host: Host, name: str) -> Node:
    res = await host.run(scripts.load("audit_fabric"), timeout=30)
    res.check("reading the node's fabric and network facts")
    return parse_node(name, res.text)


def parse_fabric(value: str) -> tuple[str, str, str]:
    state, status, summary = (value.split("|") + ["", ""])[:3]
    return state, status, summary


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


def fabric_findings(n: Node) -> tuple[list[str], list[str]]:
    """One node's fabric and fabric-manager problems: (FAIL reasons, WARN reasons)."""
    found = sorted({p for f in n.fabric if (p := fabric_problem(*f))})
    fails = [f"{n.name}: {p} ({sum(1 for f in n.fabric if fabric_problem(*f) == p)} GPU(s); MN1)" for p in found]
    warns = []
    driver, fm, active = n.kv.get("driver", ""), n.kv.get("fm_version", ""), n.kv.get("fm_active", "")
    if driver and fm and driver != fm:
        fails.append(f"{n.name}: fabric manager {fm} differs from driver {driver}; it refuses to start unless they "
                     f"match exactly: install nvidia-fabricmanager {driver} (same branch and version), or re-rent")
    if active and active != "active":
        down = (f"{n.name}: nvidia-fabricmanager is {active} (`sudo systemctl start nvidia-fabricmanager`; "
                "`journalctl -u nvidia-fabricmanager` says why it stopped)")
        if n.fabric and all(f[0] in UNSUPPORTED for f in n.fabric):
            # Hopper and later report a fabric state on NVSwitch boards; N/A everywhere is a PCIe
            # board with nothing to manage, or an older NVSwitch board that cannot say.
            warns.append(down + ": no GPU reports a fabric, so on PCIe cards this is harmless; on an NVSwitch "
                         "board (HGX/DGX A100) NCCL hangs at init until it runs")
        else:
            fails.append(down + ": NVLink is not set up and NCCL hangs at init (MN1)")
    return fails, warns


def path_finding(first: Node, peer: Node, probe: dict[str, str]) -> str | None:
    """What the 8972- and 1472-byte unfragmentable pings from `first` to `peer` say; None when the
    path carries what both ends are set to send."""
    addr = peer.kv.get("addr", "") or "no address"
    if probe.get("size8972") == "ok":
        return None
    where = f"{first.name} -> {peer.name} ({addr})"
    if probe.get("size1472") == "ok":
        jumbo = [f"{n.name} {i} mtu {m}" for n in (first, peer) for i, m in sorted(n.links().items()) if m > 1500]
        if not jumbo:
            return None
        return (f"{where}: 9000-byte frames do not pass, 1500-byte ones do, yet {', '.join(jumbo)}: frames that "
                "large are dropped and large collectives hang; set one MTU end to end, or 1500 on both (MN4)")
    top = max(first.links().values(), default=0)
    if 0 < top < 1500:
        return (f"{where}: the path MTU was not measured: {first.name}'s interfaces are at most MTU {top}, below the "
                f"1500-byte probe; check with `ping -M do -s {top - 28} {addr}` and give every node the same MTU")
    return f"{where}: no answer to a 1500-byte ping (down, firewalled, or ICMP blocked)"


def interface_findings(nodes: list[Node]) -> list[str]:
    """NCCL_SOCKET_IFNAME hints from the interface names, and same-named interfaces whose MTU differs."""
    links = [n.links() for n in nodes]
    out = []
    for name in sorted(set.intersection(*(set(x) for x in links))):
        mtus = {x[name] for x in links}
        if len(mtus) > 1:
            seen = ", ".join(f"{n.name} {x[name]}" for n, x in zip(nodes, links, strict=True))
            out.append(f"{name} has different MTUs ({seen}): large frames from the bigger side are dropped (MN4)")
    if len({frozenset(x) for x in links}) > 1:
        common = sorted(set.intersection(*(set(x) for x in links)))
        each = "; ".join(f"{n.name}: {', '.join(sorted(x)) or 'none'}" for n, x in zip(nodes, links, strict=True))
        if common:
            out.append(f"the nodes' interfaces differ ({each}): set NCCL_SOCKET_IFNAME to the one of "
                       f"{', '.join(common)} that links them, identically on every rank (MN2)")
        else:
            names = sorted({i for x in links for i in x})
            out.append(f"no interface name is common to all nodes ({each}): set NCCL_SOCKET_IFNAME to a list "
                       f"covering each node's link, e.g. ={','.join(names)} (MN2)")
    return out


def judge_a30(nodes: list[Node], probes: list[dict[str, str]] | None) -> Check:
    """A30's verdict. `probes`: the ping results from the first node to each peer, in order; None
    when the first node has no ping."""
    title = "multi-node fabric and network path"
    first, peers = nodes[0], nodes[1:]
    fails, warnings = [], []
    for n in nodes:
        f, w = fabric_findings(n)
        fails += f
        warnings += w
    if probes is None:
        warnings.append(f"ping is not installed on {first.name}: the path MTU was not measured (install iputils-ping)")
    else:
        warnings += [pw for peer, p in zip(peers, probes, strict=True) if (pw := path_finding(first, peer, p))]
    warnings += interface_findings(nodes)
    seen = "; ".join(n.describe() for n in nodes)
    if fails:
        return check("A30", title, "FAIL", "; ".join(fails + warnings) + f". Seen: {seen}")
    if warnings:
        return check("A30", title, "WARN", "; ".join(warnings) + f". Seen: {seen}")
    jumbo = probes is not None and all(p.get("size8972") == "ok" for p in probes)
    size = "9000-byte" if jumbo else "1500-byte"
    return check("A30", title, "PASS", f"{size} frames pass from {first.name} to every peer; {seen}")


async def a30_fabric(boxes: list[Box]) -> Check:
    nodes = await asyncio.gather(*(_node(h, s.name) for h, s in boxes))
    probes = None
    if nodes[0].kv.get("ping"):
        probes = list(await asyncio.gather(*(_mtu(boxes[0][0], n.kv["addr"]) if n.kv.get("addr") else _none()
                                             for n in nodes[1:])))
    return judge_a30(list(nodes), probes)


async def _none() -> dict[str, str]:
    return {}


async def cross_checks(boxes: list[Box], shared_path: str | None) -> list[Check]:
    """A21 and A30 over the boxes of one job (the first box writes and pings)."""
    if len(boxes) < 2:
        return [check(cid, title, "SKIP", "needs two or more reachable boxes of the job")
                for cid, title in (("A21", "one shared filesystem across the job's boxes"),
                                   ("A30", "multi-node fabric and network path"))]
    return [await a21_shared_fs(boxes, shared_path), await a30_fabric(boxes)]
