"""vast.ai: the `vastai` CLI when it is on the server's PATH, else the REST API.
Destroy is eventually consistent: after a 200, 404 / destroyed / exited / no instance are terminal."""

from __future__ import annotations

import json

from mcp_server.errors import CommandFailed
from mcp_server.platforms.base import Access, PlatformState, cli, http
from mcp_server.redact import Redactor
from mcp_server.settings import HTTP_TIMEOUT_S

_GONE = {"destroyed", "deleted", "gone"}


class VastAi:
    name = "vastai"

    def __init__(self, acc: Access, redactor: Redactor, http_timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.acc, self.redactor, self.http_timeout_s = acc, redactor, http_timeout_s

    def _url(self) -> str:
        return f"{(self.acc.rest_base or '').rstrip('/')}/instances/{self.acc.instance_id}/"

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.acc.api_key}"}

    @staticmethod
    def _state(inst: object) -> PlatformState:
        if not isinstance(inst, dict):
            return PlatformState(state="gone", gone=True)
        st = str(inst.get("actual_status") or inst.get("cur_state") or "unknown")
        return PlatformState(state=st, gone=st in _GONE)

    async def status(self) -> PlatformState:
        if self.acc.cli:
            rc, out, err = await cli(self.acc.cli, ["show", "instance", self.acc.instance_id, "--raw"],
                                     self.acc.key_env, self.acc.api_key)
            if rc != 0 and ("not found" in (out + err).lower() or "404" in out + err):
                return PlatformState(state="gone", gone=True)
            if rc != 0:
                raise CommandFailed("vastai show instance failed", stderr=self.redactor.scrub(err + out))
            return self._state(json.loads(out) if out.strip() not in ("", "null") else None)
        code, body = await http("GET", self._url(), self._auth(), timeout=self.http_timeout_s, redactor=self.redactor)
        if code == 404:
            return PlatformState(state="gone", gone=True)
        if code != 200:
            raise CommandFailed(f"vast.ai GET instance answered {code}", observed=self.redactor.scrub(str(body))[:300])
        return self._state(body.get("instances") if isinstance(body, dict) else None)

    async def act(self, action: str) -> str:
        if self.acc.cli:
            rc, out, err = await cli(self.acc.cli, [action, "instance", self.acc.instance_id], self.acc.key_env,
                                     self.acc.api_key)
            return f"vastai {action} instance: exit {rc}: {self.redactor.scrub((out + err).strip())[:300]}"
        if action == "stop":
            code, body = await http("PUT", self._url(), self._auth(), {"state": "stopped"},
                                    timeout=self.http_timeout_s, redactor=self.redactor)
        else:
            code, body = await http("DELETE", self._url(), self._auth(), timeout=self.http_timeout_s,
                                    redactor=self.redactor)
        return f"vast.ai {action} answered {code}: {self.redactor.scrub(str(body))[:300]}"

    def stopped(self, action: str, state: PlatformState) -> bool:
        if action == "destroy":
            return state.gone
        return state.gone or state.state in ("exited", "stopped", "inactive")
