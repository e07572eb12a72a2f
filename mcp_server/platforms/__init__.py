"""Meter control per rental platform, chosen by the profile's executor."""

from __future__ import annotations

from collections.abc import Callable

from mcp_server.errors import ConfigError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.platforms.base import Access, Meter, access
from mcp_server.platforms.inbox import InBox
from mcp_server.platforms.lambdalabs import Lambda
from mcp_server.platforms.runpod import RunPod
from mcp_server.platforms.vastai import VastAi
from mcp_server.redact import Redactor
from mcp_server.settings import HTTP_TIMEOUT_S

# One line per platform reached through its API: (access, redactor, HTTP timeout in s) -> Meter.
_API: dict[str, Callable[[Access, Redactor, float], Meter]] = {"runpod": RunPod, "vastai": VastAi, "lambda": Lambda}


def meter_for(executor: str, spec: HostSpec, host: Host, redactor: Redactor, *,
              http_timeout_s: float = HTTP_TIMEOUT_S) -> Meter:
    """The Meter that can execute and confirm this profile action's executor."""
    if executor == "in-box":
        return InBox(host)
    cls = _API.get(executor)
    if cls is None:
        raise ConfigError(f"no executor {executor!r}", expected=sorted([*_API, "in-box", "manual", "none"]))
    api = spec.profile.api
    acc = access(spec.instance_id, spec.api_key_env, spec.api_base or (api.rest_base if api else None),
                 api.cli if api else None, redactor, spec.profile.platform)
    return cls(acc, redactor, http_timeout_s)
