"""Meter control per rental platform, chosen by the profile's executor."""

from __future__ import annotations

from ..errors import ConfigError
from ..hosts.base import Host
from ..hosts.pool import HostSpec
from ..redact import Redactor
from .base import Meter, access
from .inbox import InBox
from .lambdalabs import Lambda
from .runpod import RunPod
from .vastai import VastAi

_API = {"runpod": RunPod, "vastai": VastAi, "lambda": Lambda}


def meter_for(executor: str, spec: HostSpec, host: Host, redactor: Redactor) -> Meter:
    """The Meter that can execute and confirm this profile action's executor."""
    if executor == "in-box":
        return InBox(host)
    cls = _API.get(executor)
    if cls is None:
        raise ConfigError(f"no executor {executor!r}", expected=sorted([*_API, "in-box", "manual", "none"]))
    api = spec.profile.api
    acc = access(spec.instance_id, spec.api_key_env, spec.api_base or (api.rest_base if api else None),
                 api.cli if api else None, redactor, spec.profile.platform)
    return cls(acc, redactor)
