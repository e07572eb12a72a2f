"""Reproduce a sealed capsule: its repro.sh (scripts/repro.sh with repro_onbox.py beside it)
written into the user's project, or run on a box as a detached run (launch_detached's own
machinery) whose report is read back as per-metric verdicts. A capsule is only ever read: on
`local` in place, on any other box as a push_code snapshot (sealed, read-only there)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.deliver.capsule.layout import confined
from mcp_server.deliver.capsule.repro_report import ReproReport, next_step, parse_report, shown
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word
from mcp_server.hosts.files import read_bytes, write_file
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.code.push import push_code
from mcp_server.run.jobs.engines import ENGINES
from mcp_server.run.jobs.launch import LaunchRequest, launch
from mcp_server.run.jobs.logs import tail_logs
from mcp_server.run.jobs.rundir import check_run_id, read_run_record, run_dir_path
from mcp_server.run.jobs.status import ENDED

REPORT = "repro/repro_report.json"  # under the reproduction's run dir
REPORT_MAX = 4 * 1024 * 1024
RUN_JSON_MAX = 1024 * 1024
CAPSULE_ENV = "RGT_REPRO_CAPSULE"  # marks a run as a reproduction, and says which capsule
SCRIPT, HELPER = "repro.sh", "repro_onbox.py"


class ReproStarted(BaseModel):
    host: str
    run_id: str = Field(description="the reproduction's run: wait_for_run on it, then read it")
    outcome: str = Field(description="the launch's outcome (running, exited_early, already_running)")
    capsule: str = Field(description="the capsule as the box reads it")
    snapshot: str | None = Field(default=None, description="the push_code snapshot that carried the capsule")
    rerun_of: str | None = Field(default=None, description="the capsule's source run on the box, when known")
    report_path: str


def sources() -> dict[str, bytes]:
    """repro.sh and the helper it calls, as shipped."""
    helper = importlib.resources.files("mcp_server.deliver.capsule").joinpath(HELPER).read_bytes()
    return {SCRIPT: scripts.load("repro").encode(), HELPER: helper}


def write_repro(project: Path) -> Path:
    """<project>/repro.sh (executable) and the repro_onbox.py it calls, each written atomically
    (temp file, rename); the capsules under <project>/runs/ are never touched. Returns repro.sh."""
    written = Path()
    for name, data in sources().items():
        path = confined(Path(project) / name, "write", what="project", done="no repro.sh was written")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o755 if name == SCRIPT else 0o644)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        written = path if name == SCRIPT else written
    return written


def _capsule_facts(capsule: Path) -> tuple[str, str | None]:
    """The capsule's run id and its source run on the box (None where run.json does not say);
    a run.json that cannot be read leaves repro.sh to refuse the capsule with its reason."""
    try:
        with (capsule / "run.json").open("rb") as f:
            run = json.loads(f.read(RUN_JSON_MAX))
    except (OSError, ValueError):
        run = {}
    run = run if isinstance(run, dict) else {}
    rid, source = run.get("run_id"), run.get("source")
    box_run = source.get("box_run_id") if isinstance(source, dict) else None
    try:
        box_run = check_run_id(box_run) if isinstance(box_run, str) else None
    except InputError:
        box_run = None
    return (rid if isinstance(rid, str) and rid else capsule.name), box_run


def _safe_name(prefix: str, run_id: str) -> str:
    return (prefix + re.sub(r"[^A-Za-z0-9._-]+", "_", run_id))[:64]


@contextlib.contextmanager
def _staged(capsule: Path) -> Iterator[tuple[Path, int]]:
    """A copy of the capsule outside any git tree (hard links where the filesystem allows), so
    push_code sends every file even where the project's .gitignore leaves out *.pth."""
    with tempfile.TemporaryDirectory(prefix="rgt-repro-push-") as tmp:
        root, count = Path(tmp) / "capsule", 0
        for src in sorted(capsule.rglob("*")):
            dest = root / src.relative_to(capsule)
            if src.is_symlink() or not src.is_file():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dest)
            except OSError:
                shutil.copy2(src, dest)
            count += 1
        yield root, count


async def _push(host: Host, spec: HostSpec, capsule: Path, run_id: str, ledger: Ledger | None) -> tuple[str, str]:
    """The capsule sent the way push_code sends code; (its path on the box, project/snapshot id)."""
    with _staged(capsule) as (root, count):
        total_mb = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 2**20 + 1
        pushed = await push_code(host, spec, str(root), _safe_name("capsule-", run_id), exclude=[],
                                 max_file_mb=total_mb, max_total_mb=total_mb, ledger=ledger)
    if pushed.files != count or pushed.skipped_total:
        why = "; ".join(f"{s.path}: {s.reason}" for s in pushed.skipped[:5])
        raise InputError(f"the capsule could not be sent whole: {count - pushed.files} of {count} files were left "
                         f"out ({why or 'symlinks'})", host=spec.name, path=str(capsule),
                         next_step="a capsule holds no secrets or symlinks: fix the files named, as a new capsule")
    return pushed.path, f"{pushed.project}/{pushed.snapshot_id}"


async def _install(host: Host, spec: HostSpec) -> str:
    """repro.sh and its helper on the box, in a folder named by their content; returns repro.sh."""
    files = sources()
    digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()[:16]
    folder = f"{spec.durable_root.rstrip('/')}/.rgt/repro/{digest}"
    for name, data in files.items():
        await write_file(host, f"{folder}/{name}", data)
    return f"{folder}/{SCRIPT}"


async def start_reproduction(host: Host, spec: HostSpec, capsule: Path, *, ledger: Ledger | None,
                             redactor: Redactor, workdir: str | None = None, code: str | None = None,
                             probe_s: float = 2.0) -> ReproStarted:
    """Run repro.sh on the box as a detached run (the launch wrapper, like any run). The
    evaluation command runs in `workdir` or the push_code snapshot `code` (default: the durable
    root); the run's report lands in <run dir>/repro/. `rerun_of` names the capsule's source run."""
    if spec.kind == "kubernetes":
        raise InputError("a reproduction runs on a box with a shell (local, ssh, a Slurm login node); not on a "
                         "Kubernetes host yet", host=spec.name, next_step="reproduce on an ssh box or on local")
    capsule = confined(capsule, "read", what="capsule", done="nothing was started")
    if not capsule.is_dir():
        raise NotFoundError("the capsule is not a directory on this machine", path=str(capsule),
                            next_step="give <project>/runs/<run-id> (or a runs/ dir holding capsules)")
    run_id, box_run = _capsule_facts(capsule)
    on_box, snapshot = (str(capsule), None) if spec.kind == "local" else await _push(host, spec, capsule, run_id,
                                                                                    ledger)
    script = await _install(host, spec)
    command = f'exec bash {path_word(script, "repro.sh")} {path_word(on_box, "capsule")} "$RGT_RUN_DIR/repro"'
    started = await launch(host, spec, LaunchRequest(
        command=command, name=_safe_name("repro-", run_id), workdir=workdir, code=code,
        env={CAPSULE_ENV: on_box}, rerun_of=box_run, relaunch=True, probe_s=probe_s, min_free_gib=0,
        min_free_inodes=0), ledger=ledger, redactor=redactor)
    return ReproStarted(host=spec.name, run_id=started.run_id, outcome=started.outcome, capsule=on_box,
                        snapshot=snapshot, rerun_of=box_run, report_path=f"{started.run_dir}/{REPORT}")


async def read_reproduction(host: Host, spec: HostSpec, run_id: str, *, redactor: Redactor | None = None,
                            report_max: int = REPORT_MAX) -> ReproReport:
    """The verdicts of a reproduction run once it ended (where it stands while it runs). A run
    that ended without a report could not run: its log's last lines say why."""
    record = await read_run_record(host, spec.durable_root, run_id)
    if CAPSULE_ENV not in record.env:
        raise InputError(f"run {run_id} is no reproduction (start_reproduction did not start it)", host=spec.name,
                         next_step="give the run id the reproduction's start returned")
    run_dir = run_dir_path(spec.durable_root, run_id)
    (state,) = await ENGINES[record.backend].status(host, [run_dir])
    path = f"{run_dir}/{REPORT}"
    base = ReproReport(host=spec.name, run_id=run_id, status="running", state=state, report_path=path,
                       next_step=next_step(None, run_id))
    if state.status not in ENDED:
        return base
    try:
        outcome, verdicts, env, problems = parse_report(await read_bytes(host, path, max_bytes=report_max))
    except (NotFoundError, ValueError) as exc:
        tail = await tail_logs(host, spec, redactor=redactor or Redactor(), run_id=run_id, lines=10)
        code = f", exit code {state.exit_code}" if state.exit_code is not None else ""
        why = ("it wrote no report" if isinstance(exc, NotFoundError) else str(exc))
        return base.model_copy(update={
            "status": "ended", "outcome": "could_not_run", "log_tail": shown(tail.text.splitlines()),
            "problems": [f"the run ended ({state.status}{code}) before a report was read: {why}"],
            "next_step": next_step("could_not_run", run_id)})
    return base.model_copy(update={"status": "ended", "outcome": outcome, "verdicts": verdicts, "env": env,
                                   "problems": problems, "next_step": next_step(outcome, run_id)})
