"""The doctor's host-key step: the keys the box presents (`ssh-keyscan`), their SHA256
fingerprints, and what the trusted known_hosts files say for `[host]:port` (`ssh-keygen -F`).
Only fingerprints leave this module; nothing is ever added to a known_hosts file."""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from mcp_server.hosts.doctor_models import DoctorStep, EffectiveSettings, HostKeyVerdict, failed, passed
from mcp_server.hosts.doctor_openssh import run_tool
from mcp_server.hosts.known_hosts import known_hosts_label

_KEY_TYPES = "ed25519,ecdsa,rsa"


@dataclass(frozen=True)
class KeyPrint:
    """One public key by type and OpenSSH SHA256 fingerprint."""

    key_type: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.key_type} {self.fingerprint}"


def fingerprint(blob_b64: str) -> str | None:
    """OpenSSH's `SHA256:` fingerprint of a base64 key blob (None when it is not base64)."""
    try:
        blob = base64.b64decode(blob_b64, validate=True)
    except (binascii.Error, ValueError):
        return None
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def key_prints(text: str) -> list[KeyPrint]:
    """Fingerprints of known_hosts-format lines (`names type blob`); comments and markers skipped."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3 or fields[0].startswith(("#", "@")):
            continue
        if (fp := fingerprint(fields[2])) is not None:
            found.append(KeyPrint(fields[1], fp))
    return list(dict.fromkeys(found))


def host_label(settings: EffectiveSettings) -> str:
    """The name known_hosts files the box under: HostKeyAlias, else host or [host]:port."""
    return settings.host_key_alias or known_hosts_label(settings.host, settings.port)


async def presented_keys(host: str, port: int, timeout_s: float) -> list[KeyPrint]:
    run = await run_tool(["ssh-keyscan", "-T", str(max(1, round(timeout_s))), "-p", str(port),
                          "-t", _KEY_TYPES, "--", host], timeout_s + 1)
    return key_prints(run.stdout)


async def trusted_keys(label: str, files: list[Path], timeout_s: float) -> list[KeyPrint]:
    """Keys the files trust for `label` (hashed entries included: ssh-keygen does the matching)."""
    found: list[KeyPrint] = []
    for f in files:
        if f.is_file():
            run = await run_tool(["ssh-keygen", "-F", label, "-f", str(f)], timeout_s)
            found += key_prints(run.stdout)
    return list(dict.fromkeys(found))


def judge(shown: list[KeyPrint], trusted: list[KeyPrint]) -> HostKeyVerdict:
    """known: a presented key is trusted; changed: keys are trusted but none is presented."""
    if set(shown) & set(trusted):
        return "known"
    return "changed" if trusted else "unknown"


async def host_key_step(settings: EffectiveSettings, files: list[Path],
                        timeout_s: float) -> tuple[DoctorStep, HostKeyVerdict]:
    """Compare the presented keys with the trusted ones for the box's known_hosts name."""
    start = time.monotonic()
    label = host_label(settings)
    shown = await presented_keys(settings.host, settings.port, timeout_s)
    if not shown:
        return failed("host_key", time.monotonic() - start, "other_error",
                      "the box presented no host key to ssh-keyscan", [f"name: {label}"]), "not_checked"
    trusted = await trusted_keys(label, files, timeout_s)
    verdict = judge(shown, trusted)
    took = time.monotonic() - start
    evidence = [f"name: {label}", *(f"presented: {k}" for k in shown), *(f"trusted: {k}" for k in trusted)]
    if verdict == "known":
        return passed("host_key", took, "the presented key is trusted", evidence), verdict
    if verdict == "changed":
        return failed("host_key", took, "host_key_mismatch",
                      "HOST KEY CHANGED: the box presents a key other than the trusted one; refused",
                      evidence), verdict
    searched = [f"searched: {f}" for f in files if f.is_file()] or ["searched: no known_hosts file exists"]
    return failed("host_key", took, "host_key_unknown", "no trusted key for this box",
                  evidence + searched), verdict
