"""Which run a results file belongs to, in each layout projects use:

- capsule: the canonical `runs/<run-id>/` (results under `test/<test-id>/`), run record `run.json`;
- run: the legacy `results/<exp-id>/runs/<run-id>/` reached by its concrete path;
- selected_copy: a plain `selected/` directory, a copy of the chosen run (current guidance:
  selection is recorded, never a re-pointed link);
- selected_link: the legacy `selected -> runs/<run-id>` symlink. Still read, reported once
  as legacy (a disclosure, never blocking); a link that leaves `runs/` is a broken pointer;
- other: any other folder (a sweep cell's `best_metrics.json`): the folder is the run.

Pure path logic: the caller resolves symlinks on the box first."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Layout = Literal["capsule", "run", "selected_copy", "selected_link", "other"]


@dataclass(frozen=True)
class Place:
    """Where a results file's run lives."""

    layout: Layout
    run_dir: str
    run_id: str | None = None
    exp_dir: str | None = None
    selected: str | None = None  # the `selected` path as written, when the file is reached through one
    outside_runs: bool = False  # a `selected` link that does not name a run under runs/


def probes(written: str) -> list[str]:
    """The paths whose real location `place` needs: the file's folder, and for a path
    through `selected`, that entry and the experiment folder holding it."""
    out = [posixpath.dirname(written)]
    sel = _selected(written)
    if sel is not None:
        out += [sel, posixpath.dirname(sel)]
    return out


def place(written: str, real: Mapping[str, str], root: str) -> Place:
    """The run of the results file at `written` (project-absolute), given `real` paths."""
    folder = posixpath.dirname(written)
    real_dir = real.get(folder, folder)
    sel = _selected(written)
    if sel is not None:
        exp = posixpath.dirname(sel)
        real_exp = real.get(exp, exp)
        real_sel = real.get(sel, sel)
        if real_sel == posixpath.join(real_exp, "selected"):
            return Place("selected_copy", real_sel, exp_dir=real_exp, selected=sel)
        parent = posixpath.dirname(real_sel)
        outside = parent not in (posixpath.join(real_exp, "runs"), posixpath.join(root, "runs"))
        return Place("selected_link", real_sel, None if outside else posixpath.basename(real_sel), real_exp, sel,
                     outside)
    run = _under_runs(real_dir, root)
    if run is None:
        return Place("other", real_dir)
    runs_parent = posixpath.dirname(posixpath.dirname(run))
    if runs_parent == root:
        return Place("capsule", run, posixpath.basename(run))
    return Place("run", run, posixpath.basename(run), runs_parent)


def _selected(written: str) -> str | None:
    parts = written.split("/")[:-1]
    if "selected" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("selected")
    return "/".join(parts[: i + 1])


def _under_runs(path: str, root: str) -> str | None:
    """`.../runs/<id>` for a path at or below a run directory. Outside the project only a
    folder directly under `runs/` counts (the folders above it are someone else's)."""
    parts = path.split("/")
    inside = path.startswith(root.rstrip("/") + "/")
    first = len(root.rstrip("/").split("/")) if inside else len(parts) - 2
    for i in range(len(parts) - 2, first - 1, -1):
        if parts[i] == "runs" and parts[i + 1]:
            return "/".join(parts[: i + 2])
    return None
