"""plot_run's domain side: read a run's metric sources from the box in one round trip, parse
them into series, summarise each, and save a rendered plot back into the run dir.

Every string from the box (the metrics text, series keys, source names, the run's state text)
passes the box-text cleaner tail_logs uses: no escape sequence or control character reaches
the agent; a key is one line of at most MAX_KEY characters."""

from __future__ import annotations

import base64
import secrets as _secrets

from pydantic import BaseModel, Field

from mcp_server import scripts, untrusted
from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.redact import Redactor
from mcp_server.run.jobs import tbevents
from mcp_server.run.jobs.metrics import Points, SeriesStats, merge, parse_csv, parse_text, summarize
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import check_run_id, run_dir_path
from mcp_server.run.jobs.sections import split_sections
from mcp_server.run.jobs.status import RunState, parse_state

FILE_WINDOW = 4 * 1024 * 1024
TB_WINDOW = 8 * 1024 * 1024  # first bytes of each TensorBoard event file
MAX_KEY = 128  # characters of a series key: a longer "key" is prose, not a metric name
_SAVE_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class RunCurves(BaseModel):
    run_id: str
    state: RunState | None
    sources: list[str] = Field(description="where the series came from: log, metrics.jsonl, workdir/metrics.csv ...")
    available: list[str] = Field(description="every series key found (the ones you can ask for)")
    series: list[SeriesStats] = Field(description="the numbers for each plotted series")
    partial: bool = Field(description="a source was larger than the window read (its newest 4 MiB were used)")


class RunData:
    """What one run's sources held: all series by key, and their summary."""

    def __init__(self, curves: RunCurves, data: dict[str, Points]) -> None:
        self.curves = curves
        self.data = data


def _sections(out: bytes, nonce: str) -> tuple[str, list[tuple[str, int, str]]]:
    head, found = split_sections(out, nonce)
    return head, [(f.name, f.size, f.content.decode("utf-8", "replace")) for f in found]


def _clean_keys(series: dict[str, Points]) -> dict[str, Points]:
    """The series under keys cleaned as box text, whitespace runs made one space; a key left
    empty or longer than MAX_KEY is dropped, a key cleaned into one already there keeps the first."""
    out: dict[str, Points] = {}
    for key, points in series.items():
        clean = " ".join(untrusted.clean(key).split())
        if clean and len(clean) <= MAX_KEY:
            out.setdefault(clean, points)
    return out


def _clean_state(state: RunState) -> RunState:
    return state.model_copy(update={"sync": untrusted.clean(state.sync) if state.sync is not None else None,
                                    "evidence": [untrusted.clean(e) for e in state.evidence]})


def _series_of(sections: list[tuple[str, int, str]]) -> tuple[dict[str, Points], list[str], bool]:
    data: dict[str, Points] = {}
    used, partial = [], False
    # A metrics file is what the job meant as its metrics: it wins over what the log says.
    for name, size, text in sorted(sections, key=lambda s: s[0] == "log"):
        if name.startswith("tfevents:"):
            parsed = tbevents.parse_events(base64.b64decode(text.strip() or ""))
            partial = partial or size > TB_WINDOW
            if parsed:
                used.append(name)
                merge(data, _clean_keys(parsed))
            continue
        if size > FILE_WINDOW:
            partial = True
            text = text.partition("\n")[2]  # the first line of a cut window is partial
        text = untrusted.clean(text)  # a coloured log line parses as its plain text
        parsed = parse_csv(text) if name.endswith(".csv") else parse_text(text)
        if parsed:
            used.append(name)
            merge(data, _clean_keys(parsed))
    return data, used, partial


async def read_run_metrics(host: Host, spec: HostSpec, run_id: str, redactor: Redactor) -> RunData:
    """One round trip: state and every metric source of the run, parsed here (summarise with `summarize_run`)."""
    run_dir = path_word(run_dir_path(spec.durable_root, check_run_id(run_id)), "run dir")
    nonce = _secrets.token_hex(8)
    tb = TB_WINDOW if tbevents.available() else 0
    res = await host.run(job_script("job_metrics_read", run_dir, quote(str(FILE_WINDOW)), quote(nonce), quote(str(tb))),
                         timeout=30, max_output=8 * FILE_WINDOW + tbevents.MAX_FILES * (tb * 4 // 3 + 512) + 65536)
    if res.stdout.startswith(b"RGT-NORUN"):
        raise NotFoundError(f"no run {run_id} under this box's durable root", host=spec.name,
                            path=spec.durable_root, next_step="list_runs shows the runs on the box")
    head, sections = _sections(res.stdout, nonce)
    state_line = next((ln[6:] for ln in head.splitlines() if ln.startswith("state=")), None)
    data, used, partial = _series_of([(untrusted.clean(n), s, redactor.scrub(t)) for n, s, t in sections])
    curves = RunCurves(run_id=run_id, state=_clean_state(parse_state(state_line)) if state_line else None, sources=used,
                       available=list(data), series=[], partial=partial)
    return RunData(curves, data)


def summarize_run(run: RunData, keys: list[str], *, trend_n: int, diverge_factor: float) -> None:
    """Fill the run's numbers for each of `keys` it has."""
    run.curves.series = [summarize(k, run.data[k], trend_n=trend_n, diverge_factor=diverge_factor)
                         for k in keys if k in run.data]


async def save_plot(host: Host, spec: HostSpec, run_id: str, name: str, png: bytes) -> str:
    """Write the PNG into the run dir (tmp + rename); the box path it now has."""
    if not name or set(name) - _SAVE_NAME_OK or name.startswith("."):
        raise InputError("plot file name must be letters, digits . _ -", observed=name)
    run_dir = path_word(run_dir_path(spec.durable_root, check_run_id(run_id)), "run dir")
    res = await host.run(scripts.command_words("job_metrics_save", run_dir, quote(name)), stdin=png, timeout=20)
    text = res.text
    if "RGT-NORUN" in text or "saved=" not in text:
        raise NotFoundError(f"could not save the plot into run {run_id}", host=spec.name,
                            path=f"{run_dir_path(spec.durable_root, run_id)}/{name}")
    return f"{run_dir_path(spec.durable_root, run_id)}/{name}"
