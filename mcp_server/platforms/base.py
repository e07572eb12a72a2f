"""Meter control: one small interface per rental platform (status, act, is-it-stopped),
driven by profile data. Credentials come only from an environment variable named in the
inventory or profile; their values are never in arguments, output, logs or the ledger."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, Field

from mcp_server.errors import ConfigError, TransportError
from mcp_server.redact import Redactor
from mcp_server.settings import HTTP_TIMEOUT_S


class PlatformState(BaseModel):
    state: str = Field(description="the platform's own word for the instance state, or 'gone'")
    gone: bool = False


class MeterOutcome(BaseModel):
    executed: bool = Field(description="the server ran the platform's verb")
    confirmed: bool = Field(description="the platform's state says the meter stopped (polled until terminal)")
    final_state: str | None = None
    polls: int = 0
    evidence: list[str] = Field(default_factory=list)


class Meter(Protocol):
    name: str

    async def status(self) -> PlatformState: ...

    async def act(self, action: str) -> str:
        """Run the verb; return what the platform answered (redacted)."""
        ...

    def stopped(self, action: str, state: PlatformState) -> bool: ...


@dataclass
class Access:
    """How to reach a platform for one instance: the key's value, never printed."""

    instance_id: str
    api_key: str
    rest_base: str | None
    cli: str | None
    key_env: str


def access(instance_id: str | None, key_env: str | None, rest_base: str | None, cli: str | None,
           redactor: Redactor, platform: str) -> Access:
    if not instance_id:
        raise ConfigError(f"the inventory entry has no instance_id for {platform}",
                          next_step="add instance_id = \"<the platform's id>\" to the host in the inventory")
    if not key_env or not os.environ.get(key_env):
        raise ConfigError(
            f"the {platform} API key is not in the server's environment (variable {key_env or '<none named>'})",
            next_step=f"set {key_env or 'api_key_env'} in the MCP client config's env (never in a tool argument)")
    key = os.environ[key_env]
    redactor.add(key)
    return Access(instance_id=instance_id, api_key=key, rest_base=rest_base,
                  cli=shutil.which(cli) if cli else None, key_env=key_env)


def _http(method: str, url: str, headers: dict[str, str], body: Any, timeout: float) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw.strip() else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            payload = json.loads(raw) if raw.strip() else None
        except ValueError:
            payload = raw.decode("utf-8", "replace")[:300]
        return exc.code, payload


async def http(method: str, url: str, headers: dict[str, str], body: Any = None,
               timeout: float = HTTP_TIMEOUT_S, redactor: Redactor | None = None) -> tuple[int, Any]:
    """One JSON request with a client-side timeout (platform calls have been seen to hang)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(_http, method, url, headers, body, timeout), timeout + 1)
    except (TimeoutError, OSError) as exc:
        msg = str(exc) if redactor is None else redactor.scrub(str(exc))
        raise TransportError(
            f"{method} {url.split('?')[0]} failed: {type(exc).__name__} {msg}".strip(),
            next_step="the platform may still have acted: the state is re-queried before any retry") from exc


async def cli(binary: str, args: list[str], key_env: str, key: str,
              timeout: float = 30.0) -> tuple[int, str, str]:
    """Run a platform CLI with its key in the environment (never in argv): exit code, stdout and
    stderr apart, so a warning on stderr (runpodctl's deprecation notices) never breaks the JSON."""
    env = {**os.environ, key_env: key}
    proc = await asyncio.create_subprocess_exec(binary, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        what = f"{os.path.basename(binary)} {' '.join(args[:2])}"
        raise TransportError(f"{what} did not answer in {timeout:g} s") from None
    return proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


async def confirm(meter: Meter, action: str, bound_s: float, interval_s: float = 1.0) -> MeterOutcome:
    """Poll the platform until its state says the meter stopped, within a bound."""
    deadline = time.monotonic() + bound_s
    polls, last = 0, None
    evidence = []
    while True:
        polls += 1
        try:
            last = await meter.status()
            if meter.stopped(action, last):
                evidence.append(f"platform state after {polls} poll(s): {last.state}")
                return MeterOutcome(executed=True, confirmed=True, final_state=last.state, polls=polls,
                                    evidence=evidence)
        except TransportError as exc:
            evidence.append(f"poll {polls}: {exc.message}")
        if time.monotonic() + interval_s > deadline:
            break
        await asyncio.sleep(interval_s)
    evidence.append(f"NOT confirmed within {bound_s:g} s: the platform still reports "
                    f"{last.state if last else 'nothing readable'}; check the console — it may still be billing")
    return MeterOutcome(executed=True, confirmed=False, final_state=last.state if last else None, polls=polls,
                        evidence=evidence)
