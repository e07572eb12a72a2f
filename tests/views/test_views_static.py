"""The MCP Apps views (issue 34) short of a browser (tests/ui drives them in one): every bound
`ui://` view resolves through a real MCP client as an MCP App, each bound tool names a listed view,
the files hold no network address, no markup built from text and no code built from text, each
fits its size, and a client without the extension reads exactly the results it read before."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from mcp_server import views
from mcp_server.server import build_server
from mcp_server.settings import Settings
from tests.conftest import structured
from tests.tools.test_plot_keys import crafted_run

VIEWS_DIR = Path(views.__file__).parent
FILES = {v.uri: VIEWS_DIR / v.file for v in views.VIEWS}
VIEW = {v.uri: v for v in views.VIEWS}
BINDINGS = {
    "launch_detached": "ui://rgt/monitor.html",
    "plot_run": "ui://rgt/monitor.html",
    "inspect_run": "ui://rgt/monitor.html",
    "list_runs": "ui://rgt/runs.html",
    "plan_teardown": "ui://rgt/teardown.html",
}
MAX_VIEW_BYTES = 60 * 1024
# What would reach the network, parse text as markup or run text as code.
FORBIDDEN = ("http://", "https://", "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
             "new Function", "srcdoc", "<script src", "<link", "@import", "url(", "fetch(", "XMLHttpRequest",
             "WebSocket", "localStorage", "sessionStorage", "<iframe", "<img")
# The elements the browser tests find, by view (the contract between the views and tests/ui).
TEST_IDS = {
    "ui://rgt/teardown.html": ("plan-state", "price", "stops-billing", "keeps-billing", "lost", "gates", "gate",
                               "confirm", "result", "refusal"),
    "ui://rgt/monitor.html": ("run-id", "run-name", "host", "run-state", "elapsed", "cost", "curve", "log",
                              "signatures", "gpu", "poll-status", "inspect", "cancel", "cancel-confirm"),
    "ui://rgt/runs.html": ("runs-table", "run-row", "state-filter", "next-page", "prev-page", "page-info",
                           "row-detail"),
}
# plot_run's structured keys before the views: what a client without the extension still reads.
PLOT_KEYS = {"host", "series", "runs", "image", "plot_unavailable", "flags"}


def apps_client() -> Client:
    """A client that negotiated MCP Apps, as a host that renders views does."""
    return Client(build_server(Settings.from_env()), read_timeout_seconds=120,
                  extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})])


def block(text: str, name: str) -> str:
    found = re.search(rf"/\* {name}:start(.*?)/\* {name}:end \*/", text, re.S)
    assert found, f"the {name} block is marked in the view"
    return found.group(1)


async def test_every_view_is_listed_and_reads_as_an_mcp_app_through_the_client(client) -> None:
    async with client.session() as c:
        listed = {str(r.uri): r for r in (await c.list_resources()).resources}
        read = {uri: (await c.read_resource(uri)).contents for uri in FILES}
    for uri in FILES:
        assert listed[uri].mime_type == APP_MIME_TYPE and listed[uri].title, uri
        (content,) = read[uri]
        assert content.mime_type == APP_MIME_TYPE, uri
        assert content.text == views.html(VIEW[uri]) and content.text.startswith("<!doctype html>")
        assert "include:" not in content.text, "the shared script is put in: the served page is one file"


async def test_each_bound_tool_names_a_listed_view_and_the_server_declares_the_extension(client) -> None:
    async with client.session() as c:
        tools = (await c.list_tools()).tools
        listed = {str(r.uri) for r in (await c.list_resources()).resources}
        declared = c.server_capabilities.extensions or {}
    bound = {t.name: t.meta["ui"]["resourceUri"] for t in tools if t.meta and "ui" in t.meta}
    assert bound == BINDINGS
    assert set(bound.values()) == set(FILES) and set(FILES) <= listed
    assert EXTENSION_ID in declared


@pytest.mark.parametrize("uri", sorted(FILES))
def test_a_view_reaches_no_network_builds_no_markup_or_code_from_text_and_fits_its_size(uri: str) -> None:
    text = views.html(VIEW[uri])
    raw = text.encode("utf-8")
    assert len(raw) <= MAX_VIEW_BYTES, f"{uri} is {len(raw)} bytes"
    found = [word for word in FORBIDDEN if word.lower() in text.lower()]
    assert found == [], f"{uri} holds {found}"
    assert text.count("<script") == 1 and "<script>" in text, "one inline script, nothing loaded"


@pytest.mark.parametrize("uri", sorted(FILES))
def test_a_view_carries_every_test_id_the_browser_tests_find(uri: str) -> None:
    text = views.html(VIEW[uri])
    missing = [i for i in TEST_IDS[uri] if f'data-testid="{i}"' not in text and f'testid: "{i}"' not in text]
    assert missing == []


def test_every_view_speaks_the_same_protocol_block_and_the_charts_are_one_block() -> None:
    texts = {uri: views.html(VIEW[uri]) for uri in FILES}
    bridges = {block(t, "bridge") for t in texts.values()}
    assert len(bridges) == 1, "the bridge block differs between the views"
    (bridge,) = bridges
    for method in ("ui/initialize", "ui/notifications/initialized", "ui/notifications/size-changed", "tools/call",
                   '"2026-01-26"'):
        assert method in bridge, method
    for uri, text in texts.items():
        assert '"ui/notifications/tool-input"' in text and '"ui/notifications/tool-result"' in text, uri
    charts = {block(texts[u], "chart") for u in ("ui://rgt/monitor.html", "ui://rgt/runs.html")}
    assert len(charts) == 1 and "createElementNS" in charts.pop()


def crafted_metrics(durable: Path) -> None:
    lines = [json.dumps({"step": i, "loss": 5.0 / i, "acc": i / 600}) for i in range(1, 600)]
    lines[300] = json.dumps({"step": 301, "loss": 99.0, "acc": 0.5})  # a spike the points must keep
    crafted_run(durable, "r1", "\n".join(lines) + "\nstep=600 loss=nan acc=1.0\n")


def content_kinds(result: Any) -> list[tuple[str, str | None]]:
    return [(c.type, getattr(c, "mime_type", None)) for c in result.content]


async def test_without_the_extension_every_bound_tool_answers_as_before_and_with_it_plot_run_adds_points(
        billed_box: Path, client) -> None:
    crafted_metrics(billed_box)
    calls = [("plot_run", {"host": "gpu1", "run_id": "r1", "save": False}), ("list_runs", {"host": "gpu1"}),
             ("plan_teardown", {"host": "gpu1", "action": "manual"})]
    async with client.session() as c, apps_client() as apps:
        answers = {tool: (await c.call_tool(tool, args), await apps.call_tool(tool, args)) for tool, args in calls}
    for tool, (plain, rich) in answers.items():
        assert content_kinds(plain) == content_kinds(rich), tool
        assert set(structured(rich)) - set(structured(plain)) == ({"points"} if tool == "plot_run" else set()), tool
    plain, rich = answers["plot_run"]
    before, after = structured(plain), structured(rich)
    assert set(before) == PLOT_KEYS and plain.content[0].text == rich.content[0].text
    assert ("image", "image/png") in content_kinds(plain) or before["plot_unavailable"]
    assert {k: v for k, v in after.items() if k != "points"} == before
    series = {(p["run_id"], p["key"]): p["xy"] for p in after["points"]}
    assert set(series) == {("r1", "loss"), ("r1", "acc")}
    for xy in series.values():
        assert 2 < len(xy) <= 200 and all(math.isfinite(v) for point in xy for v in point)
    assert [301, 99.0] in series[("r1", "loss")], "the spike is drawn"
