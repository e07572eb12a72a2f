"""The cost meter: what a billed box has cost since the server first saw it."""

from __future__ import annotations

import time

from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger


def accrued(ledger: Ledger, spec: HostSpec, now: float | None = None) -> str | None:
    """'12.40 USD over 6.2 h at 2.00 USD/h', or None when the box has no hourly price."""
    if spec.hourly_price is None or not spec.profile.billed:
        return None
    first = ledger.first_seen(spec.name)
    if first is None:
        return None
    hours = max(0.0, ((now or time.time()) - first) / 3600)
    return (f"{hours * spec.hourly_price:.2f} {spec.currency} over {hours:.1f} h at "
            f"{spec.hourly_price:.2f} {spec.currency}/h (since first seen by this server)")
