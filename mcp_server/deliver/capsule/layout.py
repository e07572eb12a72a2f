"""The canonical software capsule `<project>/runs/<run-id>/` (knowledge deliver-head.md §4):
its paths, and the layout check, which reports what is missing or forbidden and never fixes it.

    run.json  config.yaml  train.csv  best.pth   (required)     last.pth (optional)
    test/<test-id>/metrics.json  results.parquet  vis/...        (every declared test)
    provenance.json                                              (this server's birth certificate)
`latest.pth` is forbidden in a sealed capsule, and so are top-level config/ data/ results/ vis/."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_server.errors import InputError
from mcp_server.paths.local import LocalScope, check_local
from mcp_server.paths.policy import Intent
from mcp_server.paths.serving import current_settings

RECORD = "run.json"
PROVENANCE = "provenance.json"
REQUIRED = (RECORD, "config.yaml", "train.csv", "best.pth")
OPTIONAL = ("last.pth",)
FORBIDDEN_FILES = ("latest.pth",)
FORBIDDEN_DIRS = ("config", "data", "results", "vis")
TESTS = "test"
METRICS = "metrics.json"
ROWS = "results.parquet"
VIS = "vis"
RUNS = "runs"
RECORD_SCHEMA = "remote-gpu-trainer/capsule/v1"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_CHUNK = 1 << 20


class Finding(BaseModel):
    """Something about a capsule or its sources worth knowing; never silently fixed."""

    kind: str = Field(description="e.g. missing_file, forbidden_file, incomplete_test, tampered, unknown_provenance")
    path: str | None = Field(default=None, description="capsule-relative path (or JSON path) it is about")
    message: str
    expected: str | None = None
    actual: str | None = None


def check_id(value: str, what: str) -> str:
    """A run or test id that is also one folder name (manifest_scaffold's rule)."""
    if not _ID.match(value) or ".." in value:
        raise InputError(f"{what} is not a usable id",
                         expected="letters, digits, '.', '_' or '-', starting with a letter or digit (at most 128)",
                         next_step=f"pass the {what} as list_runs or run.json names it")
    return value


def confined(value: Path, intent: Intent, what: str, done: str) -> Path:
    """A local path as verify_artifacts confines its dest: inside <RGT_HOME>/pulls or a folder of
    RGT_PULL_ROOTS, every symlink resolved, never on the deny list."""
    settings = current_settings()
    roots = (settings.pulls_dir, *settings.pull_roots)
    scope = LocalScope(roots, "the folders verify_artifacts writes into",
                       next_step="use a folder under RGT_HOME/pulls, or add the project's folder to RGT_PULL_ROOTS "
                                 "(separated by ':')")
    return check_local(value, intent, scope, what=what, done=done, base=roots[0])


def runs_dir(project: Path) -> Path:
    return project / RUNS


def capsule_dir(project: Path, run_id: str) -> Path:
    return runs_dir(project) / check_id(run_id, "run id")


def metrics_rel(test_id: str) -> str:
    """A test's metrics file, relative to its capsule."""
    return f"{TESTS}/{check_id(test_id, 'test id')}/{METRICS}"


def file_sha256(path: Path) -> str:
    """`sha256:<hex>` of a file, read in chunks (the digest form EVIDENCE rows pin)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def declared_tests(capsule: Path) -> list[str]:
    """The tests run.json declares; without a readable run.json, the folders under test/."""
    try:
        tests = json.loads((capsule / RECORD).read_text(encoding="utf-8")).get("tests")
    except (OSError, ValueError, AttributeError):
        tests = None
    if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
        return tests
    root = capsule / TESTS
    return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def check_layout(capsule: Path) -> list[Finding]:
    """Every way the folder departs from the canonical capsule, as findings."""
    out = [Finding(kind="missing_file", path=name, message=f"{name} is required in every capsule",
                   expected="present") for name in REQUIRED if not (capsule / name).is_file()]
    out += [Finding(kind="forbidden_file", path=name, message=f"{name} is forbidden in a sealed capsule: freeze "
                    "best.pth (and last.pth) instead") for name in FORBIDDEN_FILES if (capsule / name).exists()]
    out += [Finding(kind="forbidden_dir", path=name + "/", message=f"a top-level {name}/ is not part of the "
                    "canonical capsule (results live under test/<test-id>/)")
            for name in FORBIDDEN_DIRS if (capsule / name).is_dir()]
    tests = declared_tests(capsule)
    if not tests:
        out.append(Finding(kind="no_tests", path=TESTS + "/", message="no declared test: each needs "
                           "test/<test-id>/{metrics.json, results.parquet, vis/}", expected="at least one test"))
    for test in tests:
        out += _test_findings(capsule, test)
    return out


def _test_findings(capsule: Path, test: str) -> list[Finding]:
    base = capsule / TESTS / test
    missing = [name for name in (METRICS, ROWS) if not (base / name).is_file()]
    vis = base / VIS
    if not (vis.is_dir() and any(p.is_file() for p in vis.rglob("*"))):
        missing.append(VIS + "/ (non-empty)")
    if not missing:
        return []
    return [Finding(kind="incomplete_test", path=f"{TESTS}/{test}/", message=f"test {test} lacks "
                    + ", ".join(missing), expected="metrics.json, results.parquet and a non-empty vis/")]
