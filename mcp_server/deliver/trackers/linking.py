"""Tying a tracker run to this server's run. The launch exports RGT_RUN_ID to the job
(scripts/job_wrapper.sh), but no tracker records the process environment: W&B's offline log keeps
argv, program, host and hardware, MLflow the source file and user, TensorBoard nothing. So the id is
found only where the user's script put it: the config key / MLflow param `rgt_run_id`, an MLflow tag
`rgt_run_id` or a W&B tag `rgt_run_id=<id>`, else (forensics) a known run id inside the run's name or
event folder. `SNIPPETS` is what a script adds, one line per tracker."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_server.deliver.trackers.models import Backend, ConfigValue, MatchedBy
from mcp_server.verify.probes.control_diff import flatten

KEY = "rgt_run_id"
_TAG = re.compile(rf"^{KEY}[=:](.+)$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")  # rundir.check_run_id's shape
MAX_CONFIG_KEYS = 1000
MAX_VALUE_CHARS = 500

SNIPPETS: dict[Backend, str] = {
    "wandb": 'wandb.init(config={"rgt_run_id": os.environ.get("RGT_RUN_ID")})  # or tags=[f"rgt_run_id={...}"]',
    "mlflow": 'mlflow.set_tag("rgt_run_id", os.environ.get("RGT_RUN_ID", ""))  # or mlflow.log_param(...)',
    "tensorboard": 'SummaryWriter(log_dir=os.path.join("runs", os.environ.get("RGT_RUN_ID", "local")))',
}


def snippet(backend: Backend) -> str:
    """The line a training script adds so its `backend` run carries this server's run id."""
    return SNIPPETS[backend]


def explicit_id(config: dict[str, ConfigValue], tags: list[str]) -> tuple[str | None, MatchedBy | None]:
    """The run id the run logged on purpose: the config key (MLflow: param) first, then a tag."""
    value = config.get(KEY)
    if isinstance(value, str) and _ID.match(value):
        return value, "config"
    for tag in tags:
        m = _TAG.match(tag)
        if m and _ID.match(m.group(1)):
            return m.group(1), "tag"
    return None, None


def id_in_name(names: list[str | None], known: list[str]) -> str | None:
    """The longest known run id that appears in one of `names` (a run or folder name): the longest,
    so `train-…-ab12` is not taken for a shorter id that prefixes it."""
    hits = [k for k in known if any(n and k in n for n in names)]
    return max(hits, key=len) if hits else None


def flat_config(raw: dict[str, Any]) -> tuple[dict[str, ConfigValue], bool]:
    """Nested config to dotted keys with scalar values (a longer text cut), at most MAX_CONFIG_KEYS
    keys; True when keys were left out."""
    flat = flatten(raw)
    out: dict[str, ConfigValue] = {}
    for key in sorted(flat)[:MAX_CONFIG_KEYS]:
        out[key] = scalar(flat[key])
    return out, len(flat) > MAX_CONFIG_KEYS


def scalar(value: Any) -> ConfigValue:
    """A config leaf as a JSON scalar; anything else (an empty list, an object) as its JSON text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= MAX_VALUE_CHARS else f"{text[:MAX_VALUE_CHARS]}… ({len(text)} characters)"
