"""A35: whether a run detached from the SSH session outlives it. Where systemd-logind has
KillUserProcesses on (upstream's compiled-in default since v230; most distributions build it off,
some clusters turn it on), ending a session kills every process left in its scope, tmux and setsid
included, unless the user is excluded (KillExcludeUsers, root by default) or not listed in
KillOnlyUsers. A box with no logind session (a container, no systemd) has nothing that does this."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from mcp_server.run.audit.model import Check, Facts, Status, check

TITLE = "detached runs outlive the SSH session"
_ON = ("yes", "true", "1", "on")


@dataclass
class Logind:
    kill: bool | None = None  # KillUserProcesses; None when unread
    exclude: list[str] = field(default_factory=lambda: ["root"])
    only: list[str] = field(default_factory=list)


def from_busctl(lines: list[str]) -> Logind:
    """busctl's answers, in the order the probe asks: `b true`, `as 1 "root"`, `as 0`."""
    out = Logind()
    for n, line in enumerate(lines[:3]):
        kind, _, value = line.partition(" ")
        if n == 0 and kind == "b":
            out.kill = value.strip() == "true"
        elif n in (1, 2) and kind == "as":
            setattr(out, "exclude" if n == 1 else "only", shlex.split(value)[1:])
    return out


def from_conf(lines: list[str]) -> Logind:
    """logind.conf's own `Key=value` lines (the last of each wins), for a box without busctl."""
    out = Logind()
    for line in lines:
        key, _, value = line.partition("=")
        if key == "KillUserProcesses":
            out.kill = value.strip().lower() in _ON
        elif key == "KillExcludeUsers":
            out.exclude = value.split()
        elif key == "KillOnlyUsers":
            out.only = value.split()
    return out


def logout_verdict(text: str) -> tuple[Status, str]:
    """The probe's `logind` section (scope=, user=, bus=, conf= lines) -> status and evidence."""
    got: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        got.setdefault(key, []).append(value)
    scope, user = (got.get("scope") or [""])[0], (got.get("user") or ["?"])[0]
    if not scope:
        return "SKIP", ("the probe's shell is in no logind session (a container, or no systemd): nothing ends "
                        "runs at logout")
    said, where = (from_busctl(got["bus"]), "busctl") if got.get("bus") else (from_conf(got.get("conf", [])),
                                                                              "logind.conf")
    if said.kill is None:
        return "WARN", (f"in logind session {scope}, but KillUserProcesses could not be read: if it is on, tmux and "
                        "setsid runs die when the SSH session ends; launch a `sleep 600`, log out, log in and look")
    ev = f"logind session {scope}; {where}: KillUserProcesses={'yes' if said.kill else 'no'}"
    if not said.kill:
        return "PASS", ev
    if user in said.exclude:
        return "PASS", ev + f", but {user} is in KillExcludeUsers"
    if said.only and user not in said.only:
        return "PASS", ev + f", but {user} is not in KillOnlyUsers"
    return "FAIL", (ev + f": when the SSH session of {user} ends, logind kills everything it started, tmux and "
                    f"setsid runs included. Ask the admin for KillUserProcesses=no or KillExcludeUsers={user} in "
                    "/etc/systemd/logind.conf, or run under the scheduler (backend slurm)")


def a35_logout(f: Facts) -> Check:
    status, evidence = logout_verdict(f.text("logind"))
    return check("A35", TITLE, status, evidence)
