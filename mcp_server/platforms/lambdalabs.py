"""Lambda Cloud: REST with basic auth. There is no stop; terminate can hang, so it runs
under a client-side timeout and the state is re-queried before anything is retried."""

from __future__ import annotations

import base64

from mcp_server.errors import CommandFailed, TransportError
from mcp_server.platforms.base import Access, PlatformState, http
from mcp_server.redact import Redactor
from mcp_server.settings import HTTP_TIMEOUT_S

# Terminate is known to hang: wait less for it than for other calls (never more than the HTTP timeout).
TERMINATE_TIMEOUT_S = 10.0


class Lambda:
    name = "lambda"

    def __init__(self, acc: Access, redactor: Redactor, http_timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.acc, self.redactor, self.http_timeout_s = acc, redactor, http_timeout_s

    def _auth(self) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{self.acc.api_key}:".encode()).decode()}

    def _base(self) -> str:
        return (self.acc.rest_base or "").rstrip("/")

    async def status(self) -> PlatformState:
        code, body = await http("GET", f"{self._base()}/instances/{self.acc.instance_id}", self._auth(),
                                timeout=self.http_timeout_s, redactor=self.redactor)
        if code == 404:
            return PlatformState(state="gone", gone=True)
        if code != 200 or not isinstance(body, dict):
            raise CommandFailed(f"Lambda GET instance answered {code}", observed=self.redactor.scrub(str(body))[:300])
        st = str((body.get("data") or {}).get("status", "unknown"))
        return PlatformState(state=st, gone=st == "terminated")

    async def act(self, action: str) -> str:
        try:
            code, body = await http("POST", f"{self._base()}/instance-operations/terminate", self._auth(),
                                    {"instance_ids": [self.acc.instance_id]},
                                    timeout=min(TERMINATE_TIMEOUT_S, self.http_timeout_s), redactor=self.redactor)
        except TransportError as exc:
            # The call hung or dropped: it may still have acted. Re-query instead of retrying blind.
            now = await self.status()
            return f"terminate call did not answer ({exc.message}); re-queried: {now.state}"
        return f"Lambda terminate answered {code}: {self.redactor.scrub(str(body))[:300]}"

    def stopped(self, action: str, state: PlatformState) -> bool:
        return state.gone
