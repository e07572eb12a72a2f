"""Which machine holds a bundle and which one checked it: an identity read on the machine itself
(`scripts/verify_identity.sh`), and the rule that says when two identities are one machine.

The machine-id decides when both sides have one: it is what distinguishes two machines that
share a cloned image (and so the same SSH host keys). `RGT_MACHINE_ID` set on a box replaces it
and the record says so. Without a machine-id on both sides the SSH host key decides, then the
hostname; when in doubt two identities count as one machine, so an acceptance errs toward refusal.
`is_box` is the strict rule for the teardown gates, where doubt must mean two machines."""

from __future__ import annotations

import base64
import binascii
import hashlib

from pydantic import BaseModel, ConfigDict, Field

from mcp_server import portable, scripts
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.local import LocalHost


class HostIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    machine_id: str = Field(description="'' when the box has none")
    machine_id_source: str = Field(description="/etc/machine-id, /var/lib/dbus/machine-id or RGT_MACHINE_ID")
    hostname: str
    host_key: str = Field(description="SHA256 fingerprint of the box's own SSH host key ('' when none)")

    def describe(self) -> str:
        mid = f"machine-id {self.machine_id[:12]} from {self.machine_id_source}" if self.machine_id else "no machine-id"
        return f"{self.hostname or '?'} ({mid})"


async def read_identity(host: Host) -> HostIdentity:
    """The identity the box reports about itself."""
    res = await host.run(scripts.command("verify_identity"), timeout=30)
    res.check("reading the machine's identity")
    return _identity(parse_kv(res.text))


def _identity(kv: dict[str, str]) -> HostIdentity:
    return HostIdentity(machine_id=kv.get("machine_id", "")[:128], machine_id_source=kv.get("machine_id_source", ""),
                        hostname=kv.get("hostname", "")[:255], host_key=fingerprint(kv.get("host_key_blob", "")))


def fingerprint(blob: str) -> str:
    """OpenSSH's SHA256 fingerprint of a public key's base64 blob ('' when it is not one)."""
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return ""
    return "SHA256:" + base64.b64encode(hashlib.sha256(raw).digest()).decode().rstrip("=") if raw else ""


async def this_machine() -> HostIdentity:
    """The machine this server runs on, read by the same script as any box; where no POSIX shell
    runs (Windows), the same facts read in Python."""
    if not portable.current().posix:
        return _identity(portable.identity_without_shell())
    local = LocalHost()
    try:
        return await read_identity(local)
    finally:
        await local.close()


def same_machine(a: HostIdentity, b: HostIdentity) -> str | None:
    """Why `a` and `b` are one machine, or None when they are two."""
    if a.machine_id and b.machine_id:
        return f"the same machine-id {a.machine_id[:12]}" if a.machine_id == b.machine_id else None
    if a.host_key and b.host_key:
        return f"the same SSH host key {a.host_key}" if a.host_key == b.host_key else None
    if a.hostname == b.hostname:
        return f"no machine-id on both sides and the same hostname {a.hostname!r}"
    return None


def is_box(recorded: HostIdentity, box: HostIdentity, same_name: bool) -> bool:
    """Is the machine a record names (`recorded`) the box that reports `box` now? Strict, for the
    teardown gates: a machine-id on either side decides (both must have it and agree), then an SSH
    host key; with neither, only a record made through the same inventory name on the same hostname
    counts. Doubt means no: another machine's verification never lifts a gate."""
    if recorded.machine_id or box.machine_id:
        return recorded.machine_id == box.machine_id
    if recorded.host_key or box.host_key:
        return recorded.host_key == box.host_key
    return same_name and recorded.hostname == box.hostname
