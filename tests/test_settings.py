"""Settings: every tunable has one default (the constants in settings.py), each RGT_* variable
overrides it within a range, and a bad value is refused with the range that is accepted."""

from __future__ import annotations

import pytest

from mcp_server import settings as s
from mcp_server.errors import ConfigError

BASE = {"RGT_HOME": "/tmp/rgt-home", "RGT_CONFIG": "/tmp/hosts.toml", "RGT_SSH_CONFIG": "none"}


def test_the_defaults_are_the_module_constants() -> None:
    got = s.Settings.from_env(BASE)
    assert (got.connect_timeout_s, got.command_timeout_s, got.max_channels) == (
        s.CONNECT_TIMEOUT_S, s.COMMAND_TIMEOUT_S, s.MAX_CHANNELS)
    assert (got.log_level, got.teardown_confirm_s, got.http_timeout_s) == (
        s.LOG_LEVEL, s.TEARDOWN_CONFIRM_S, s.HTTP_TIMEOUT_S)
    assert got == s.Settings(home=got.home, config_path=got.config_path, ssh_config=None)


def test_http_timeout_defaults_to_15_seconds_and_can_be_shortened() -> None:
    assert s.Settings.from_env(BASE).http_timeout_s == 15.0
    assert s.Settings.from_env({**BASE, "RGT_HTTP_TIMEOUT": "0.5"}).http_timeout_s == 0.5


@pytest.mark.parametrize("raw", ["0.05", "121", "soon"])
def test_an_http_timeout_outside_its_range_is_refused_with_the_range(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        s.Settings.from_env({**BASE, "RGT_HTTP_TIMEOUT": raw})
    assert "RGT_HTTP_TIMEOUT" in str(err.value) and "0.1..120" in str(err.value)


@pytest.mark.parametrize(("raw", "level"), [("debug", "DEBUG"), ("Warning", "WARNING"), ("", "WARNING")])
def test_the_log_level_is_read_case_insensitively(raw: str, level: str) -> None:
    env = {**BASE, "RGT_LOG_LEVEL": raw} if raw else BASE
    assert s.Settings.from_env(env).log_level == level


def test_an_unknown_log_level_is_refused() -> None:
    with pytest.raises(ConfigError, match="RGT_LOG_LEVEL"):
        s.Settings.from_env({**BASE, "RGT_LOG_LEVEL": "loud"})
