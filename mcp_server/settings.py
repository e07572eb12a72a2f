"""Settings from the environment. One place reads RGT_* variables, and the one place every
tunable's default is declared: modules that need a default import the constant from here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, model_validator

from mcp_server import portable
from mcp_server.errors import ConfigError

APP = "remote-gpu-trainer"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
MAX_CHANNELS = 8  # sshd's MaxSessions is 10: leave room for the user's own sessions
OUTPUT_CAP_BYTES = 16 * 1024  # default window of paged text (tail_logs max_bytes)
LOG_LEVEL: LogLevel = "WARNING"
TEARDOWN_CONFIRM_S = 20.0
HTTP_TIMEOUT_S = 15.0
WATCH_INTERVAL_S = 30.0  # how often a host with subscribed runs is polled (backing off to 4x when quiet)
SLURM_POLL_S = 60.0  # the least time between two scheduler queries (squeue, sacct) of one Slurm cluster
# The launch's disk gate on the durable root; audit_box's A10/A11 fail below the same floors.
LAUNCH_MIN_FREE_GIB = 5.0
LAUNCH_MIN_FREE_INODES = 10_000
# The local box's durable root when neither RGT_LOCAL_ROOT nor RGT_HOME is set (with RGT_HOME set it
# is $RGT_HOME/local, so a server pointed at its own state directory writes nothing else).
LOCAL_ROOT = "~/rgt"


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


_LOG_LEVELS: dict[str, LogLevel] = {level: level for level in get_args(LogLevel)}


def _log_level(raw: str) -> LogLevel:
    level = _LOG_LEVELS.get(raw.upper())
    if level is None:
        raise ConfigError("RGT_LOG_LEVEL is not a log level", observed=raw, expected="DEBUG|INFO|WARNING|ERROR")
    return level


def _local_root(env: dict[str, str], home: Path) -> Path:
    """RGT_LOCAL_ROOT, else $RGT_HOME/local when RGT_HOME is set, else LOCAL_ROOT (~/rgt)."""
    raw = env.get("RGT_LOCAL_ROOT")
    if raw:
        root = Path(raw).expanduser()
        if not root.is_absolute():
            raise ConfigError("RGT_LOCAL_ROOT must be an absolute path (or start with ~)", observed=raw,
                              expected="e.g. /data/rgt or ~/rgt")
        return root
    return (home / "local").absolute() if env.get("RGT_HOME") else Path(LOCAL_ROOT).expanduser()


class Settings(BaseModel):
    """Everything the server reads from its environment, resolved once at start-up."""

    home: Path = Field(description="state directory: ledger, pulls, pinned host keys")
    config_path: Path = Field(description="inventory TOML file (may not exist)")
    ssh_config: Path | None = Field(description="OpenSSH client config to honour")
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    command_timeout_s: float = COMMAND_TIMEOUT_S
    max_channels: int = MAX_CHANNELS
    command_channel: bool = Field(default=True, description="warm SSH commands over one persistent channel per "
                                  "connection (RGT_SSH_COMMAND_CHANNEL=0 turns it off: one exec channel each)")
    log_level: LogLevel = LOG_LEVEL
    teardown_confirm_s: float = TEARDOWN_CONFIRM_S
    http_timeout_s: float = Field(default=HTTP_TIMEOUT_S, description="each request to a platform's API")
    watch_interval_s: float = Field(default=WATCH_INTERVAL_S, description="base poll interval for subscribed runs")
    http_token: str | None = Field(default=None, repr=False,
                                   description="RGT_HTTP_TOKEN: the bearer token HTTP clients send (else generated)")
    slurm_poll_s: float = Field(default=SLURM_POLL_S,
                                description="least seconds between two squeue/sacct queries of one Slurm cluster")
    pull_roots: tuple[Path, ...] = Field(default=(), description="local folders verify_artifacts may pull into, "
                                         "besides <home>/pulls (RGT_PULL_ROOTS, separated by os.pathsep)")

    local_root: Path = Field(default=Path(LOCAL_ROOT).expanduser(),
                             description="the local box's default durable root: run dirs, results, code snapshots "
                             "(RGT_LOCAL_ROOT; else $RGT_HOME/local when RGT_HOME is set; else ~/rgt)")

    @model_validator(mode="before")
    @classmethod
    def _local_root_in_home(cls, data: Any) -> Any:
        """Settings built for a state directory without a local root keep the local box inside it
        (<home>/local), as RGT_HOME does; only from_env, with no RGT_HOME, chooses ~/rgt."""
        if isinstance(data, dict) and data.get("local_root") is None and data.get("home") is not None:
            return {**data, "local_root": Path(data["home"]).absolute() / "local"}
        return data

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
        home = Path(env.get("RGT_HOME") or portable.state_dir(APP)).expanduser()
        local_root = _local_root(env, home)
        config = Path(
            env.get("RGT_CONFIG") or portable.config_dir(APP) / "hosts.toml"
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
            connect_timeout_s=_float_env(env, "RGT_CONNECT_TIMEOUT", CONNECT_TIMEOUT_S, 1, 120),
            command_timeout_s=_float_env(env, "RGT_COMMAND_TIMEOUT", COMMAND_TIMEOUT_S, 1, 600),
            max_channels=int(_float_env(env, "RGT_MAX_CHANNELS", MAX_CHANNELS, 1, 9)),
            command_channel=env.get("RGT_SSH_COMMAND_CHANNEL", "1").strip() != "0",
            log_level=_log_level(env.get("RGT_LOG_LEVEL", LOG_LEVEL)),
            teardown_confirm_s=_float_env(env, "RGT_TEARDOWN_CONFIRM_S", TEARDOWN_CONFIRM_S, 1, 30),
            http_timeout_s=_float_env(env, "RGT_HTTP_TIMEOUT", HTTP_TIMEOUT_S, 0.1, 120),
            watch_interval_s=_float_env(env, "RGT_WATCH_INTERVAL", WATCH_INTERVAL_S, 0.2, 3600),
            slurm_poll_s=_float_env(env, "RGT_SLURM_POLL", SLURM_POLL_S, 0, 3600),
            http_token=env.get("RGT_HTTP_TOKEN") or None,
            local_root=local_root,
            pull_roots=tuple(Path(p).expanduser() for p in env.get("RGT_PULL_ROOTS", "").split(os.pathsep) if p),
        )
