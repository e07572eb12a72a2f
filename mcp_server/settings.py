"""Settings from the environment. One place reads RGT_* variables."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from pydantic import BaseModel, Field

from mcp_server.errors import ConfigError

APP = "remote-gpu-trainer"


def _float_env(env: dict[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number", observed=raw, expected=f"{lo}..{hi}") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name} is out of range", observed=raw, expected=f"{lo}..{hi}")
    return value


def _log_level(raw: str) -> str:
    level = raw.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError("RGT_LOG_LEVEL is not a log level", observed=raw, expected="DEBUG|INFO|WARNING|ERROR")
    return level


class Settings(BaseModel):
    """Everything the server reads from its environment, resolved once at start-up."""

    home: Path = Field(description="state directory: ledger, pulls, pinned host keys")
    config_path: Path = Field(description="inventory TOML file (may not exist)")
    ssh_config: Path | None = Field(description="OpenSSH client config to honour")
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 30.0
    max_channels: int = 8
    output_cap_bytes: int = 16 * 1024
    log_level: str = "WARNING"
    teardown_confirm_s: float = 20.0

    @property
    def ledger_path(self) -> Path:
        return self.home / "ledger.sqlite"

    @property
    def known_hosts_path(self) -> Path:
        """Host keys pinned by `accept-new`; never the user's own ~/.ssh/known_hosts."""
        return self.home / "known_hosts"

    @property
    def pulls_dir(self) -> Path:
        return self.home / "pulls"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        home = Path(env.get("RGT_HOME") or platformdirs.user_state_dir(APP)).expanduser()
        config = Path(
            env.get("RGT_CONFIG") or Path(platformdirs.user_config_dir(APP)) / "hosts.toml"
        ).expanduser()
        ssh_raw = env.get("RGT_SSH_CONFIG")
        if ssh_raw is not None and ssh_raw.lower() == "none":
            ssh_config: Path | None = None
        else:
            ssh_config = Path(ssh_raw or "~/.ssh/config").expanduser()
        return cls(
            home=home,
            config_path=config,
            ssh_config=ssh_config,
            connect_timeout_s=_float_env(env, "RGT_CONNECT_TIMEOUT", 10.0, 1, 120),
            command_timeout_s=_float_env(env, "RGT_COMMAND_TIMEOUT", 30.0, 1, 600),
            max_channels=int(_float_env(env, "RGT_MAX_CHANNELS", 8, 1, 9)),
            output_cap_bytes=int(_float_env(env, "RGT_OUTPUT_CAP", 16 * 1024, 1024, 1 << 20)),
            log_level=_log_level(env.get("RGT_LOG_LEVEL", "WARNING")),
            teardown_confirm_s=_float_env(env, "RGT_TEARDOWN_CONFIRM_S", 20.0, 1, 30),
        )
