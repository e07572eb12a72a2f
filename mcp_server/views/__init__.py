"""The MCP Apps views: three self-contained HTML pages (inline script and style, no network),
each bound to existing tools and served as a `ui://` resource. What the views share (the host
bridge, the chart, the theme) is written once in `_bridge.js`, `_chart.js` and `_theme.css` and put
in where a view says `/* include:<name> */` when it is read, so every served page is still one file.
Plain data and a reader here; the adapter layer (tools/_views.py) registers them: only the adapter
layer talks to the SDK."""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class View:
    uri: str
    file: str
    title: str
    description: str


MONITOR = View("ui://rgt/monitor.html", "monitor.html", "Run monitor",
               "one run: state, elapsed, cost, curves, log tail, failure signatures, GPU; follows it, cancels it")
RUNS = View("ui://rgt/runs.html", "runs.html", "Run list",
            "a box's runs, paged, filtered by state, with elapsed and the box's cost; a row opens its tail and curve")
TEARDOWN = View("ui://rgt/teardown.html", "teardown.html", "Teardown confirmation",
                "a teardown plan: what stops billing, what keeps billing, what is lost, the gates; confirm when ready")
VIEWS = (MONITOR, RUNS, TEARDOWN)


_INCLUDE = re.compile(r"/\* include:(bridge|chart|theme) \*/")
_SHARED = {"bridge": "_bridge.js", "chart": "_chart.js", "theme": "_theme.css"}


def _read(name: str) -> str:
    """A file of this package (through importlib.resources: works from a wheel)."""
    return importlib.resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def html(view: View) -> str:
    """The view's page as served: its file with the shared script put in where it says so."""
    return _INCLUDE.sub(lambda m: _read(_SHARED[m.group(1)]).rstrip("\n"), _read(view.file))
