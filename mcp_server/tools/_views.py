"""The MCP Apps extension (`io.modelcontextprotocol/ui`): the views as `ui://` resources, and the
`_meta` a bound tool carries so that a host with the extension renders its view. A client without
the extension ignores both and reads the same results as before."""

from __future__ import annotations

from typing import Any

from mcp.server.apps import Apps

from mcp_server.views import VIEWS, View, html


def views_extension() -> Apps:
    """The extension with every view registered. No CSP domains are declared: a view reaches
    nothing but its host, so hosts apply their strictest default policy."""
    apps = Apps()
    for view in VIEWS:
        apps.add_html_resource(view.uri, html(view), name=view.file.removesuffix(".html") + "-view",
                               title=view.title, description=view.description, prefers_border=True)
    return apps


def shows(view: View) -> dict[str, Any]:
    """A bound tool's `_meta`: its results are rendered in `view`."""
    return {"ui": {"resourceUri": view.uri}}
