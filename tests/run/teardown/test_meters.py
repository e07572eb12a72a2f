"""Platform meters on their own, against the loopback platform double: the HTTP timeout is the
meter's parameter (the server passes its setting), so a hanging platform costs only that long."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcp_server.errors import TransportError
from mcp_server.platforms.base import Access, confirm, http
from mcp_server.platforms.lambdalabs import Lambda
from mcp_server.redact import Redactor
from tests.support.platforms import Double

KEY = "lam_live_" + "3Zq8Rw1" * 3


@pytest.fixture
def double() -> Iterator[Double]:
    d = Double(KEY)
    yield d
    d.close()


def _access(double: Double, iid: str) -> Access:
    return Access(instance_id=iid, api_key=KEY, rest_base=double.base, cli=None, key_env="LAMBDA_API_KEY")


async def test_a_call_past_its_timeout_is_a_transport_error_that_says_the_platform_may_have_acted(double) -> None:
    double.add("lam-1", "active", mode="hang")
    with pytest.raises(TransportError) as caught:
        await http("POST", f"{double.base}/instance-operations/terminate", {"Authorization": f"Bearer {KEY}"},
                   {"instance_ids": ["lam-1"]}, timeout=0.3)
    assert "may still have acted" in (caught.value.next_step or "")


async def test_a_hanging_lambda_terminate_is_requeried_within_the_meters_timeout(double) -> None:
    double.add("lam-1", "active", mode="hang")
    meter = Lambda(_access(double, "lam-1"), Redactor(), http_timeout_s=0.3)
    answer = await meter.act("terminate")
    assert "did not answer" in answer and "re-queried: gone" in answer and KEY not in answer
    outcome = await confirm(meter, "terminate", bound_s=2)
    assert outcome.confirmed and outcome.final_state == "gone"
    assert double.calls.count("POST /instance-operations/terminate") == 1
