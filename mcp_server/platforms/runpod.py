"""RunPod: `runpodctl` when it is on the server's PATH, else the REST API (Bearer key).
A successful delete is not proof: terminate is confirmed only when the pod reads 404."""

from __future__ import annotations

import json

from mcp_server.errors import CommandFailed
from mcp_server.platforms.base import Access, PlatformState, cli, http
from mcp_server.redact import Redactor
from mcp_server.settings import HTTP_TIMEOUT_S


class RunPod:
    name = "runpod"

    def __init__(self, acc: Access, redactor: Redactor, http_timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.acc, self.redactor, self.http_timeout_s = acc, redactor, http_timeout_s

    def _url(self, suffix: str = "") -> str:
        return f"{(self.acc.rest_base or '').rstrip('/')}/pods/{self.acc.instance_id}{suffix}"

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.acc.api_key}"}

    async def status(self) -> PlatformState:
        if self.acc.cli:
            rc, out, err = await cli(self.acc.cli, ["get", "pod", self.acc.instance_id, "--output", "json"],
                                     self.acc.key_env, self.acc.api_key)
            if rc != 0 and "not found" in (out + err).lower():
                return PlatformState(state="gone", gone=True)
            if rc != 0:
                raise CommandFailed("runpodctl get pod failed", stderr=self.redactor.scrub(err + out))
            pod = json.loads(out)
            return PlatformState(state=str(pod.get("desiredStatus") or pod.get("status") or "unknown"))
        code, body = await http("GET", self._url(), self._auth(), timeout=self.http_timeout_s, redactor=self.redactor)
        if code == 404:
            return PlatformState(state="gone", gone=True)
        if code != 200 or not isinstance(body, dict):
            raise CommandFailed(f"RunPod GET pod answered {code}", observed=self.redactor.scrub(str(body))[:300])
        return PlatformState(state=str(body.get("desiredStatus", "unknown")))

    async def act(self, action: str) -> str:
        if self.acc.cli:
            verb = {"stop": "stop", "terminate": "remove"}[action]
            rc, out, err = await cli(self.acc.cli, [verb, "pod", self.acc.instance_id], self.acc.key_env,
                                     self.acc.api_key)
            return f"runpodctl {verb} pod: exit {rc}: {self.redactor.scrub((out + err).strip())[:300]}"
        method, url = ("POST", self._url("/stop")) if action == "stop" else ("DELETE", self._url())
        code, body = await http(method, url, self._auth(), timeout=self.http_timeout_s, redactor=self.redactor)
        return f"RunPod {method} answered {code}: {self.redactor.scrub(str(body))[:300]}"

    def stopped(self, action: str, state: PlatformState) -> bool:
        if action == "terminate":
            return state.gone
        return state.state.upper() in ("EXITED", "STOPPED")
