"""A35: a run detached from the SSH session dies with it where systemd-logind has KillUserProcesses
on and the user is not exempt. logind's answers are in busctl's own output form (signature, then
value: `b true`, `as 1 "root"`, as busctl(1) prints properties), or logind.conf's `Key=value` lines;
this machine has no systemd, so the live audit tests see the SKIP (no session scope)."""

from __future__ import annotations

import pytest

from mcp_server.run.audit.session_checks import logout_verdict

SCOPE = "scope=session-42.scope"


def probe(user: str, *lines: str, scope: str = SCOPE) -> str:
    return "\n".join([scope, f"user={user}", *lines])


def test_no_logind_session_means_nothing_kills_runs_at_logout() -> None:
    status, ev = logout_verdict(probe("root", scope="scope="))
    assert status == "SKIP" and "no logind session" in ev


def test_kill_user_processes_on_fails_for_a_user_it_applies_to_and_says_what_to_ask() -> None:
    status, ev = logout_verdict(probe("alice", 'bus=b true', 'bus=as 1 "root"', "bus=as 0"))
    assert status == "FAIL" and "tmux" in ev and "setsid" in ev and "KillExcludeUsers=alice" in ev
    assert "session-42.scope" in ev and "busctl" in ev


@pytest.mark.parametrize(("user", "lines", "why"), [
    ("root", ['bus=b true', 'bus=as 1 "root"', "bus=as 0"], "in KillExcludeUsers"),
    ("alice", ['bus=b true', 'bus=as 1 "root"', 'bus=as 2 "bob" "carol"'], "not in KillOnlyUsers"),
    ("alice", ['bus=b false', 'bus=as 1 "root"', "bus=as 0"], "KillUserProcesses=no"),
])
def test_an_exempt_user_or_the_setting_off_passes_and_says_why(user: str, lines: list[str], why: str) -> None:
    status, ev = logout_verdict(probe(user, *lines))
    assert status == "PASS" and why in ev


def test_without_busctl_logind_conf_decides_and_its_last_line_wins() -> None:
    on = logout_verdict(probe("alice", "conf=KillUserProcesses=yes"))
    assert on[0] == "FAIL" and "logind.conf" in on[1]
    assert logout_verdict(probe("alice", "conf=KillUserProcesses=yes", "conf=KillUserProcesses=no"))[0] == "PASS"
    exempt = logout_verdict(probe("alice", "conf=KillUserProcesses=yes", "conf=KillExcludeUsers=root alice"))
    assert exempt[0] == "PASS"


def test_a_session_whose_setting_cannot_be_read_is_a_warning_with_a_way_to_find_out() -> None:
    status, ev = logout_verdict(probe("alice"))
    assert status == "WARN" and "log out" in ev
