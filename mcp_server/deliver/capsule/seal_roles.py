"""Which verified file becomes which capsule file.

With `roles` (capsule path -> path in the pull) exactly that mapping, every source a verified file.
Without, the default rule, in order:
1. a file already named as the layout wants keeps its path: `config.yaml`, `train.csv`, `best.pth`,
   `last.pth` and a known lockfile at the pull's root, anything under `test/<test-id>/`;
2. no `best.pth`: the one `*.pt`/`*.pth` in the pull (never `last.pth` or `latest.pth`) is best.pth;
3. no `test/`: the one `metrics.json` in the pull is `test/main/metrics.json`, with the
   `results.parquet` and the `vis/` folder beside it;
4. no `config.yaml`: the one `*.yaml`/`*.yml` at the pull's root is config.yaml.
Anything else stays out (a finding says so); `latest.pth` always does. Two candidates for one
role are never guessed between: a finding asks for `roles`."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from mcp_server.deliver.capsule.layout import (
    FORBIDDEN_FILES,
    METRICS,
    OPTIONAL,
    PROVENANCE,
    RECORD,
    REQUIRED,
    ROWS,
    TESTS,
    VIS,
    Finding,
)
from mcp_server.errors import InputError

LOCKFILES = ("requirements.lock", "uv.lock", "poetry.lock", "Pipfile.lock", "environment.yml", "conda-lock.yml",
             "pip-freeze.txt")
DEFAULT_TEST = "main"
_ROOT_NAMES = tuple(n for n in (*REQUIRED, *OPTIONAL) if n != RECORD) + LOCKFILES


def given_roles(roles: dict[str, str], pulled: Iterable[str]) -> dict[str, str]:
    """The caller's mapping, each capsule path a plain relative path and each source verified."""
    have = set(pulled)
    for target, source in roles.items():
        parts = target.split("/")
        if (not target or target.startswith("/") or "\\" in target or any(p in ("", ".", "..") for p in parts)
                or target in (RECORD, PROVENANCE) or posixpath.basename(target) in FORBIDDEN_FILES):
            raise InputError("a roles key is not a capsule path this server may write",
                             expected="a relative path such as best.pth or test/main/metrics.json (not run.json, "
                                      "provenance.json or latest.pth)", next_step="fix that roles entry")
        if source not in have:
            raise InputError("a roles value names a file the verified pull does not hold",
                             expected="a path as PULL_VERIFIED.json lists it under files",
                             next_step="read PULL_VERIFIED.json's files, or verify that file first")
    return dict(roles)


def default_roles(pulled: Iterable[str]) -> tuple[dict[str, str], list[Finding]]:
    """The default rule above: the mapping and what it left out or could not decide."""
    paths = sorted(pulled)
    roles = {p: p for p in paths if p in _ROOT_NAMES or _under_test(p)}
    findings: list[Finding] = []
    if "best.pth" not in roles:
        ckpts = [p for p in paths if p.endswith((".pt", ".pth"))
                 and posixpath.basename(p) not in ("last.pth", *FORBIDDEN_FILES)]
        _one(roles, findings, "best.pth", ckpts, "checkpoint (*.pt, *.pth)")
    if not any(_under_test(t) for t in roles):
        _metrics_folder(roles, findings, paths)
    if "config.yaml" not in roles:
        configs = [p for p in paths if "/" not in p and p.endswith((".yaml", ".yml")) and p not in LOCKFILES]
        _one(roles, findings, "config.yaml", configs, "root *.yaml config")
    used = set(roles.values())
    for p in paths:
        if p not in used:
            why = "forbidden in a sealed capsule" if posixpath.basename(p) in FORBIDDEN_FILES else "no capsule role"
            findings.append(Finding(kind="not_sealed", path=p, message=f"left out of the capsule: {why}",
                                    expected="name it in roles to keep it"))
    return roles, findings


def _under_test(path: str) -> bool:
    parts = path.split("/")
    return len(parts) >= 3 and parts[0] == TESTS


def _one(roles: dict[str, str], findings: list[Finding], target: str, candidates: list[str], what: str) -> None:
    if len(candidates) == 1:
        roles[target] = candidates[0]
    elif candidates:
        findings.append(Finding(kind="ambiguous_role", path=target, message=f"{len(candidates)} candidates for "
                                f"{target} ({what}): none was chosen", expected="roles naming the one to seal"))


def _metrics_folder(roles: dict[str, str], findings: list[Finding], paths: list[str]) -> None:
    found = [p for p in paths if posixpath.basename(p) == METRICS]
    before = len(findings)
    _one(roles, findings, f"{TESTS}/{DEFAULT_TEST}/{METRICS}", found, "metrics.json")
    if len(findings) > before or not found:
        return
    folder = posixpath.dirname(found[0])
    prefix = f"{folder}/" if folder else ""
    base = f"{TESTS}/{DEFAULT_TEST}/"
    if prefix + ROWS in paths:
        roles[base + ROWS] = prefix + ROWS
    for p in paths:
        if p.startswith(f"{prefix}{VIS}/"):
            roles[base + p[len(prefix):]] = p
