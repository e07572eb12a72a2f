"""Where an evidence plan waits between propose and apply: in the server's own state folder,
`<RGT_HOME>/evidence-plans/<plan-hash>.json`, named by the hash of its content. The token the
ledger keeps is bound to that hash, so apply reads the plan the server made and re-checks that
it still hashes to it; a plan the client sends back is never trusted. Also here: the JSON diff
(RFC 6902 operations) a plan shows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mcp_server.errors import GateRefused
from mcp_server.ledger import Ledger
from mcp_server.statedir import secure_state
from mcp_server.verify.artifacts.state import write_json_atomic

PLANS = "evidence-plans"


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plan_hash(content: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(content).encode("utf-8")).hexdigest()


def _folder(ledger: Ledger) -> Path:
    folder = ledger.path.parent / PLANS
    secure_state(folder, [])
    return folder


def store(ledger: Ledger, content: dict[str, Any]) -> str:
    """Keep the plan; its hash (the file's name, and what the token is bound to)."""
    digest = plan_hash(content)
    write_json_atomic(_folder(ledger) / f"{digest}.json", canonical(content))
    return digest


def load(ledger: Ledger, digest: str) -> dict[str, Any]:
    """The stored plan the token names, refused unless it still hashes to that name."""
    path = _folder(ledger) / f"{digest}.json"
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GateRefused("the plan this token belongs to is gone from the server's state folder", path=str(path),
                          next_step="propose the evidence again and apply with the new token") from exc
    if not isinstance(content, dict) or plan_hash(content) != digest:
        raise GateRefused("the stored plan no longer matches the hash its token was issued for", path=str(path),
                          next_step="propose the evidence again and apply with the new token")
    return content


def json_diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning `old` into `new` (lists compared position by position)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops = [{"op": "remove", "path": f"{path}/{_key(k)}"} for k in old if k not in new]
        for k, v in new.items():
            ops += json_diff(old[k], v, f"{path}/{_key(k)}") if k in old else [
                {"op": "add", "path": f"{path}/{_key(k)}", "value": v}]
        return ops
    if isinstance(old, list) and isinstance(new, list):
        ops = []
        for i in range(min(len(old), len(new))):
            ops += json_diff(old[i], new[i], f"{path}/{i}")
        ops += [{"op": "add", "path": f"{path}/{i}", "value": new[i]} for i in range(len(old), len(new))]
        ops += [{"op": "remove", "path": f"{path}/{i}"} for i in reversed(range(len(new), len(old)))]
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _key(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
