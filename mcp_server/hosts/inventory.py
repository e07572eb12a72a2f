"""The inventory file ($RGT_CONFIG, TOML): named boxes with their facts. Secrets are
never in it, only the names of environment variables that hold them."""

from __future__ import annotations

import re
import tomllib
from ipaddress import IPv4Address
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcp_server.errors import ConfigError
from mcp_server.hosts.commands import check_path
from mcp_server.hosts.fallback_options import DEFAULT_DOH_RESOLVER, resolver_url_problem
from mcp_server.hosts.known_hosts import HostKeyPolicy
from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.hosts.notify_channels import Channel, load_channels
from mcp_server.hosts.slurm_options import SlurmOptions

_SECRETISH = re.compile(r"(secret|token|password|passwd|api_key|apikey)$", re.I)


class InventoryEntry(BaseModel):
    """One `[hosts.<name>]` table."""

    model_config = ConfigDict(extra="forbid")
    destination: str = Field(description='"local", "kubernetes", an ~/.ssh/config alias, or user@host[:port]')
    profile: str | None = Field(default=None, description="platform profile; default local/generic-ssh")
    durable_root: str | None = None
    scratch_root: str | None = None
    hourly_price: float | None = Field(default=None, ge=0)
    currency: str = "USD"
    host_key_policy: HostKeyPolicy = "strict"
    instance_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    python: str | None = None
    api_base: str | None = Field(default=None, pattern=r"^https?://[^\s]+$",
                                 description="platform REST base URL override (default: the profile's)")
    slurm: SlurmOptions | None = Field(default=None, description="a Slurm login node's job defaults")
    kubernetes: KubeOptions | None = Field(default=None, description="a Kubernetes namespace's job defaults")
    verify_roots: list[str] = Field(default_factory=list, max_length=16,
                                    description="more box directories verify_artifacts may read results from")
    log_roots: list[str] = Field(default_factory=list, max_length=16,
                                 description="more box directories tail_logs may read logs from")
    transport_fallback: Literal["off", "clash"] = Field(
        default="off", description='"clash": after a direct failure with path evidence (banner timeout, '
        "Clash fake IP, TUN), connect over one socket to the DoH-resolved address (knowledge run.md §7.6)")
    doh_resolver: str = Field(default=DEFAULT_DOH_RESOLVER, description="the fallback's DoH resolver (https)")
    doh_ca_file: str | None = Field(default=None, description="a CA bundle the resolver's certificate chains to")
    fallback_interface: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:@-]{1,64}$",
                                           description="the physical interface the fallback socket leaves from")
    fallback_local_address: IPv4Address | None = Field(
        default=None, description="or the physical interface's IPv4 address")
    forward_agent: bool = Field(default=False, description="forward the ssh-agent to the box (never to a hop); "
                                "off whatever ForwardAgent the ssh config says")

    @field_validator("durable_root", "scratch_root", "python")
    @classmethod
    def _box_path(cls, v: str | None) -> str | None:
        return None if v is None else check_path(v)

    @field_validator("doh_resolver")
    @classmethod
    def _resolver(cls, v: str) -> str:
        problem = resolver_url_problem(v)
        if problem:
            raise ValueError(f"not a DoH resolver URL ({problem}): https://host[:port][/dns-query|/resolve]")
        return v

    @field_validator("verify_roots", "log_roots")
    @classmethod
    def _box_paths(cls, v: list[str]) -> list[str]:
        return [check_path(p, "a verify_roots or log_roots entry") for p in v]


def _problems(exc: ValidationError) -> str:
    """Each problem as `field.path: what is wrong`, never the value (a URL may carry a password)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                     for e in exc.errors(include_input=False, include_url=False))


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hosts: dict[str, InventoryEntry] = Field(default_factory=dict)
    channels: list[Channel] = Field(default_factory=list, description="the `[notify.<name>]` tables: where an "
                                    "on-box patrol sends its escalations")

    @classmethod
    def load(cls, path: Path) -> Inventory:
        if not path.exists():
            return cls()
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("cannot read the inventory", path=str(path), observed=str(exc)) from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("inventory is not valid TOML", path=str(path), observed=str(exc),
                              next_step="fix the file (RGT_CONFIG points at it)") from exc
        for name, entry in (data.get("hosts") or {}).items():
            for key in entry if isinstance(entry, dict) else ():
                if _SECRETISH.search(key):
                    raise ConfigError(
                        f"inventory host {name!r} has a key {key!r} that looks like a secret",
                        path=str(path),
                        next_step="put secrets in environment variables and name the variable "
                        "with api_key_env",
                    )
        channels = load_channels(data)  # its own errors: they never quote a value (it may be a secret)
        data = {k: v for k, v in data.items() if k != "notify"}
        try:
            inv = cls.model_validate({**data, "channels": channels})
        except ValidationError as exc:
            raise ConfigError("inventory does not match the expected shape", path=str(path),
                              observed=_problems(exc)) from exc
        for name in inv.hosts:
            if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", name):
                raise ConfigError("inventory host name is not a safe name", path=str(path), observed=name)
        return inv
