"""Host-key policy: which known_hosts files we trust, how a first-seen key is pinned under
`accept-new`, and the refusals (unknown key, changed key) with both fingerprints. A changed
key is never accepted automatically, whatever the policy."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Literal

from mcp_server.errors import HostKeyError
from mcp_server.portable_io import O_BINARY

HostKeyPolicy = Literal["strict", "accept-new"]


def known_hosts_text(files: tuple[Path, ...]) -> str:
    """The trusted keys of every readable file, as one known_hosts text."""
    chunks = []
    for f in files:
        with contextlib.suppress(OSError):
            chunks.append(f.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(chunks)


def known_hosts_label(host: str, port: int) -> str:
    """How known_hosts names a host: `host`, or `[host]:port` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def pin_key(path: Path, label: str, public_key: str) -> None:
    """Append `label key` to the server's own known_hosts file (never the user's)."""
    line = f"{label} {public_key.strip()}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | O_BINARY, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def changed_key_error(host_name: str, label: str, shown: str, trusted: list[str]) -> HostKeyError:
    """The box presents a key other than the one we trust for it."""
    return HostKeyError(
        f"HOST KEY CHANGED for {label}: refused (a changed key is never accepted "
        "automatically; it can mean a rebuilt box or a man-in-the-middle)",
        host=host_name, observed=shown, expected=", ".join(trusted),
        next_step="confirm the new fingerprint on the provider's console, then remove the old "
        f"entry for {label} from known_hosts (ssh-keygen -R '{label}') and connect again",
    )


def unknown_key_error(host_name: str, label: str, shown: str, host: str, port: int) -> HostKeyError:
    """No key is trusted for the box and the policy is strict."""
    return HostKeyError(
        f"unknown host key for {label}: refused (strict host-key checking)",
        host=host_name, observed=shown, expected="a key listed in known_hosts",
        next_step="verify this fingerprint with the provider, then add it "
        f"(ssh-keyscan -p {port} {host} >> ~/.ssh/known_hosts), or set "
        'host_key_policy = "accept-new" for this host in the inventory to pin it on first use',
    )
