"""What a sealed capsule says about its birth: the provenance the run already carries, gathered
from the verification record (the box), the ledger's launch event for that run (command, engine,
code snapshot, git commit and dirty flag, the box's GPUs) and the capsule's own files (seed from
config.yaml, an env lockfile). Nothing is invented: what no source carries is null in run.json,
"unknown" in provenance.json where its schema takes a free string, null where it wants a
digest, commit or number, and each is a finding."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from mcp_server.deliver.capsule.layout import Finding
from mcp_server.deliver.capsule.seal_roles import LOCKFILES
from mcp_server.deliver.evidence.runs import SCHEME, provenance_hash
from mcp_server.deliver.evidence.schema import check
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.record import VerificationRecord

UNKNOWN = "unknown"
_GPU = re.compile(r"^GPU \d+: (.+?)(?: \(UUID.*)?$")  # the facts cut each line at 60 characters
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def launch_facts(ledger: Ledger | None, record: VerificationRecord) -> dict[str, Any]:
    """The ledger's newest launch event of the pulled run (empty without a run id or ledger)."""
    if ledger is None or not record.run_id:
        return {}
    event = ledger.latest("launch", host=record.host, run_id=record.run_id)
    return dict(event.data) if event else {}


def run_provenance(record: VerificationRecord, launch: dict[str, Any], files: dict[str, str],
                   config: Path | None) -> dict[str, Any]:
    """run.json's `provenance`: every field the run carries, null where it carries none."""
    lock = next((p for p in sorted(files) if p.rsplit("/", 1)[-1] in LOCKFILES), None)
    dirty = launch.get("git_dirty")
    return {
        "command": _text(launch.get("command")),
        "code_snapshot": _text(launch.get("code_snapshot")),
        "git_commit": _text(launch.get("git_commit")),
        "git_dirty": dirty if isinstance(dirty, bool) else None,
        "env_lock": {"path": lock, "sha256": files[lock]} if lock else None,
        "hardware": _hardware(launch.get("host_facts")),
        "seed": _seed(config),
        "box": {"host": record.host, "hostname": record.producer.hostname or None,
                "machine_id": record.producer.machine_id or None},
        "engine": _text(launch.get("backend")),
    }


def provenance_document(exp_id: str, run_id: str, created: str, prov: dict[str, Any],
                        files: dict[str, str]) -> tuple[dict[str, Any], list[Finding]]:
    """provenance.json (hash scheme canonical-json-sha256/v1) and a finding per unknown input."""
    commit = prov["git_commit"] if prov["git_commit"] and _COMMIT.match(prov["git_commit"]) else None
    hw = prov["hardware"] or {"gpu": UNKNOWN, "count": None}
    lock = prov["env_lock"] or {"path": UNKNOWN, "sha256": None}
    inputs: dict[str, Any] = {
        "config": {"path": "config.yaml", "sha256": files.get("config.yaml")},
        "code_git_sha": {"commit": commit, "dirty": prov["git_dirty"]},
        "data_hash": {"dataset": UNKNOWN, "sha256": None},
        "seed": {"value": prov["seed"]},
        "env_lock": lock,
        "hardware": hw,
    }
    doc = {"exp_id": exp_id, "run_id": run_id, "provenance_hash": provenance_hash(inputs), "hash_scheme": SCHEME,
           "hash_inputs": inputs, "artifacts": dict(sorted(files.items())), "created": created}
    unknown = {"$.hash_inputs.config.sha256": inputs["config"]["sha256"],
               "$.hash_inputs.code_git_sha.commit": commit, "$.hash_inputs.code_git_sha.dirty": prov["git_dirty"],
               "$.hash_inputs.data_hash": None, "$.hash_inputs.seed.value": prov["seed"],
               "$.hash_inputs.env_lock": lock["sha256"], "$.hash_inputs.hardware.count": hw.get("count"),
               "$.hash_inputs.hardware.gpu": None if hw.get("gpu") == UNKNOWN else hw.get("gpu")}
    findings = [Finding(kind="unknown_provenance", path=path,
                        message="the run does not carry this input: provenance.json records it as unknown "
                                "(null, or \"unknown\" where the schema takes text), never a guess")
                for path, value in unknown.items() if value is None]
    findings += [Finding(kind="invalid_provenance", path=e.json_path, expected=e.expected,
                         message="provenance.json does not match the shipped schema here")
                 for e in check("provenance", doc)]
    return doc, findings


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _hardware(facts: Any) -> dict[str, Any] | None:
    """The GPUs nvidia-smi -L listed at launch (`gpus=GPU 0: <model> (UUID: ...);...`)."""
    listed = facts.get("gpus") if isinstance(facts, dict) else None
    if not isinstance(listed, str) or not listed.strip(";").strip():
        return None
    models = [m.group(1) for line in listed.split(";") if (m := _GPU.match(line.strip()))]
    return {"gpu": models[0], "count": len(models)} if models else None


def _seed(config: Path | None) -> int | None:
    """A top-level integer `seed` in the run's own config.yaml (the run's word, never a guess)."""
    if config is None:
        return None
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    seed = data.get("seed") if isinstance(data, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None
