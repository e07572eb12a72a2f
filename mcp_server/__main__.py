"""Console entry: `remote-gpu-trainer-mcp [serve] [--transport stdio|http]`,
`remote-gpu-trainer-mcp call TOOL '<json>'` (one tool through a real in-memory MCP client),
`tools [NAME]`, `resources` and `read URI` (what the server publishes, through the same client) and
`remote-gpu-trainer-mcp stale [--months N]` (the knowledge base's facts due a re-check)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import ipaddress
import json
import logging
import os
import re
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from mcp_server import __version__, cli_text, statedir
from mcp_server.errors import RgtError

if TYPE_CHECKING:  # imported where used: main pauses the collector before the start's imports
    from mcp.server import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    from mcp_server.app import App
    from mcp_server.settings import Settings

EPILOG = """\
environment:
  RGT_HOME         state directory (ledger, pulls, pinned host keys, http-token); default: your state dir
  RGT_LOCAL_ROOT   the local box's durable root (run dirs, results); default $RGT_HOME/local when
                   RGT_HOME is set, else ~/rgt; scratch is <root>/scratch ([hosts.local] overrides both)
  RGT_CONFIG       inventory TOML; default ~/.config/remote-gpu-trainer/hosts.toml
  RGT_SSH_CONFIG   OpenSSH client config to honour; default ~/.ssh/config ("none" to ignore)
  RGT_CONNECT_TIMEOUT, RGT_COMMAND_TIMEOUT, RGT_MAX_CHANNELS, RGT_LOG_LEVEL,
  RGT_TEARDOWN_CONFIRM_S (how long teardown polls the platform for the meter to stop; default 20),
  RGT_HTTP_TIMEOUT (seconds per request to a platform's API; default 15),
  RGT_HTTP_TOKEN (the bearer token HTTP clients must send; default: generated into RGT_HOME/http-token)

examples:
  remote-gpu-trainer-mcp                      serve over stdio (what MCP clients run)
  remote-gpu-trainer-mcp --transport http --port 8765
                                              serve at http://127.0.0.1:8765/mcp (the endpoint path is /mcp;
                                              clients send the bearer token)
  remote-gpu-trainer-mcp call audit_box '{"host": "local"}'
  remote-gpu-trainer-mcp tools                the tools; `tools plan_teardown` shows one's arguments
  remote-gpu-trainer-mcp resources            every resource URI and URI template
  remote-gpu-trainer-mcp read references://run-remote/teardown
  remote-gpu-trainer-mcp stale --months 3     facts verified more than 3 months ago, or unsourced
"""


def _parser() -> argparse.ArgumentParser:
    from mcp_server.facts import DEFAULT_MONTHS
    from mcp_server.settings import LOG_LEVEL

    p = argparse.ArgumentParser(
        prog="remote-gpu-trainer-mcp",
        description="MCP server: run, verify and deliver deep-learning experiments on GPU boxes.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=__version__)
    p.add_argument("--log-level", default=LOG_LEVEL, choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sub = p.add_subparsers(dest="command")

    def serve_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                        help="stdio (default) or streamable HTTP on 127.0.0.1")
        sp.add_argument("--port", type=int, default=8765, help="HTTP port (with --transport http)")
        sp.add_argument("--host", default="127.0.0.1",
                        help="HTTP bind address (default 127.0.0.1); another needs --allow-remote")
        sp.add_argument("--allow-remote", action="store_true",
                        help="allow binding HTTP to a non-loopback address (clients still need the token)")
        sp.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                        help="with --allow-remote: a name or address clients reach the server by, accepted in "
                             "the Host and Origin headers besides the bind address and loopback (repeatable)")

    serve_args(p)
    serve_args(sub.add_parser("serve", help="serve over stdio or HTTP (the default command)",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter))
    call = sub.add_parser("call", help="run one tool: its summary on a terminal, its whole result as JSON otherwise",
                          epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    call.add_argument("tool", help="tool name, e.g. audit_box")
    call.add_argument("arguments", nargs="?", default="{}", help="tool arguments as a JSON object")
    call.add_argument("--json", action="store_true",
                      help="print the whole structured result as JSON, also on a terminal")
    tools = sub.add_parser("tools", help="list the tools; with NAME, that tool's arguments and an example call")
    tools.add_argument("name", nargs="?", help="a tool's name, e.g. plan_teardown")
    sub.add_parser("resources", help="list the resources and URI templates (references://, profiles://, ...)")
    read = sub.add_parser("read", help="print one resource: references://..., profiles://..., runs://..., "
                          "schemas://tools/NAME", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    read.add_argument("uri", help="the resource's URI, e.g. references://run-remote/teardown")
    read.add_argument("--json", action="store_true",
                      help="print the text as served (JSON unindented), also on a terminal")
    demo = sub.add_parser("demo", help="the whole lifecycle on this machine with a tiny CPU training run (~1 min)")
    demo.add_argument("--dir", help="where the demo writes everything (default: $RGT_HOME/demo/<time>)")
    stale = sub.add_parser("stale", help="list the knowledge base's facts due a re-check, by platform")
    stale.add_argument("--months", type=int, default=DEFAULT_MONTHS,
                       help=f"list facts verified more than this many months ago (default {DEFAULT_MONTHS}); "
                            "unsourced facts are always listed")
    return p


def _built(settings: Settings | None = None, *, only_tool: str | None = None, http_token: str | None = None,
           http_url: str | None = None) -> MCPServer[App]:
    """build_server, and the collector back on: main pauses it for the start, whose ~200k new
    objects (modules, classes, schemas) nearly all live as long as the process, so collecting
    among them is wasted work (~0.1-0.2 s of every start)."""
    from mcp_server.server import build_server

    try:
        return build_server(settings, only_tool=only_tool, http_token=http_token, http_url=http_url)
    finally:
        gc.enable()


def _serving(server: MCPServer[App]) -> MCPServer[App]:
    """`server`, with everything the start built set aside for good: it lives as long as the server,
    and a collection that walked it again (the first ones after the pause would) delays the first
    replies. The start's few cyclic leftovers (~3 MB) stay with it."""
    gc.freeze()
    return server


async def _call(tool: str, arguments: dict[str, Any], as_json: bool) -> int:
    """Print the result: on a terminal its short reading (what a model reads), else, or with
    --json, the whole structured result as JSON (what scripts parse)."""
    from mcp import Client

    async with Client(_built(only_tool=tool), read_timeout_seconds=120) as client:
        result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        print(text, file=sys.stderr)
        return 1
    if not as_json and sys.stdout.isatty():
        for c in result.content:
            print(getattr(c, "text", None) or f"see {getattr(c, 'uri', '')}".rstrip())
        return 0
    payload = result.structured_content
    if payload is None:
        payload = [getattr(c, "text", None) for c in result.content]
    print(json.dumps(payload, indent=2, ensure_ascii=False))
    return 0


async def _tools(name: str | None) -> int:
    """The tool list, or with `name` that tool's arguments (from its full schema resource)."""
    from mcp import Client

    async with Client(_built()) as client:
        listed = await client.list_tools()
        tool = next((t for t in listed.tools if t.name == name), None)
        page = await client.read_resource(f"schemas://tools/{name}") if tool is not None else None
    if name is None:
        for t in listed.tools:
            print(f"{t.name:22} {(t.description or '').splitlines()[0]}")
        print(f"\n{cli_text.TOOLS_HINT}")
        return 0
    if tool is None or page is None:
        print(f"no tool named {name!r}{cli_text.did_you_mean(name, (t.name for t in listed.tools))}; "
              f"`{cli_text.PROG} tools` lists them", file=sys.stderr)
        return 2
    full = json.loads(getattr(page.contents[0], "text", "{}"))
    print(cli_text.tool_help(name, tool.title, full.get("description") or "", full.get("inputSchema") or {}))
    return 0


async def _resources() -> int:
    from mcp import Client

    async with Client(_built()) as client:
        fixed = (await client.list_resources()).resources
        shaped = (await client.list_resource_templates()).resource_templates
    for line in cli_text.resource_lines([(str(r.uri), r.title) for r in fixed],
                                        [(t.uri_template, t.title) for t in shaped]):
        print(line)
    return 0


async def _read(uri: str, as_json: bool) -> int:
    """One resource's text: JSON indented on a terminal, as served when piped or with --json."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async with Client(_built(), read_timeout_seconds=120) as client:
        try:
            page = await client.read_resource(uri)
        except MCPError as exc:
            if not exc.message.startswith("Unknown resource"):
                print(exc.message, file=sys.stderr)
                return 1
            fixed = (await client.list_resources()).resources
            shaped = (await client.list_resource_templates()).resource_templates
            schemes = [cli_text.scheme_of(str(r.uri)) for r in fixed] + [cli_text.scheme_of(t.uri_template)
                                                                         for t in shaped]
            print(cli_text.unknown_resource(schemes), file=sys.stderr)
            return 2
    pretty = sys.stdout.isatty() and not as_json
    for c in page.contents:
        text = getattr(c, "text", None)
        if text is None:  # a binary resource: its bytes, as served
            sys.stdout.flush()
            sys.stdout.buffer.write(base64.b64decode(getattr(c, "blob", "")))
            continue
        shown = cli_text.shown_text(text, c.mime_type, pretty)
        print(shown, end="" if shown.endswith("\n") else "\n")
    return 0


def _stale(months: int) -> int:
    import datetime as dt

    from mcp_server import facts

    if months < 0:
        print("--months must be 0 or more", file=sys.stderr)
        return 2
    print(facts.report(facts.all_facts(), dt.date.today(), months), end="")
    return 0


def _demo(folder: str | None) -> int:
    import time
    from pathlib import Path

    from mcp import Client

    from mcp_server.demo.runner import prepare, run_demo
    from mcp_server.settings import Settings

    base = Path(folder).expanduser() if folder else Settings.from_env().home / "demo" / time.strftime("%Y%m%d-%H%M%S")
    if base.exists() and any(base.iterdir()):
        print(f"{base} is not empty: give --dir a new folder", file=sys.stderr)
        return 2
    base = base.resolve()
    settings = prepare(base)

    async def go() -> int:
        async with Client(_built(settings), read_timeout_seconds=120) as client:
            return await run_demo(base, lambda line: print(line, flush=True), client)
    return asyncio.run(go())


def _to_reader(command: Coroutine[Any, Any, int]) -> int:
    """Run a command that prints; a reader that stops early (`| head`) ends it without a traceback."""
    try:
        return asyncio.run(command)
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that raises nothing either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def main(argv: list[str] | None = None) -> int:
    gc.disable()  # until the server is built (_built): the start's objects live on, collecting them is waste
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: list[str] | None) -> int:
    from mcp_server.settings import Settings

    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        Settings.from_env()
    except RgtError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if args.command == "call":
        try:
            arguments = json.loads(args.arguments)
        except json.JSONDecodeError as exc:
            print(f"arguments are not valid JSON: {exc}", file=sys.stderr)
            return 2
        if not isinstance(arguments, dict):
            print("arguments must be a JSON object, e.g. '{\"host\": \"local\"}'", file=sys.stderr)
            return 2
        return _to_reader(_call(args.tool, arguments, args.json))
    if args.command == "tools":
        return _to_reader(_tools(args.name))
    if args.command == "resources":
        return _to_reader(_resources())
    if args.command == "read":
        return _to_reader(_read(args.uri, args.json))
    if args.command == "stale":
        return _stale(args.months)
    if args.command == "demo":
        return _demo(args.dir)
    if args.transport == "http":
        return _serve_http(args.host, args.port, args.allow_remote, args.allowed_host)
    from mcp_server.server import serve_stdio

    asyncio.run(serve_stdio(_serving(_built())))
    return 0


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


def _header_name(name: str) -> str | None:
    """How `name` appears in a Host header (an IPv6 address in brackets), or None when it is
    neither an address nor a plain host name (a wildcard, a scheme, a port, a path)."""
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return name.lower() if _NAME.fullmatch(name) else None
    return f"[{addr}]" if addr.version == 6 else str(addr)


def _transport_security(bind: str, names: list[str]) -> TransportSecuritySettings:
    """The Host/Origin checks against DNS rebinding, set here for every bind (the SDK sets them
    on its own only for 127.0.0.1, localhost and ::1): loopback names, the bind address unless
    it is a wildcard, and the names the user gave; never any host."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = list(LOOPBACK_NAMES)
    try:
        wildcard = ipaddress.ip_address(bind).is_unspecified
    except ValueError:
        wildcard = False
    for name in ([] if wildcard else [bind]) + names:
        shown = _header_name(name)
        if shown and shown not in hosts:
            hosts.append(shown)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[h for host in hosts for h in (host, f"{host}:*")],
        allowed_origins=[o for host in hosts for scheme in ("http", "https")
                         for o in (f"{scheme}://{host}", f"{scheme}://{host}:*")])


def _refusal(host: str, loopback: bool, allow_remote: bool, names: list[str]) -> str | None:
    """Why this HTTP bind is refused, with what to do instead; None when it is allowed."""
    if not loopback and not allow_remote:
        return (f"refusing to serve HTTP on {host}: it is not a loopback address, and anyone who reaches it could "
                "launch or tear down through your SSH keys. Pass --allow-remote to do it anyway (the bearer token "
                "is still required), or use 127.0.0.1 with an SSH tunnel.")
    if names and not allow_remote:
        return ("--allowed-host needs --allow-remote: without it the server accepts only loopback Host and Origin "
                "headers (127.0.0.1, localhost, [::1]). Drop --allowed-host, or add --allow-remote.")
    bad = next((n for n in names if _header_name(n) is None), None)
    if bad is not None:
        return (f"--allowed-host {bad!r} is not a host name or address: give one name per flag, like gpu-box.lan "
                "or 10.0.0.5 (no '*', scheme, port or path).")
    return None


def _serve_http(host: str, port: int, allow_remote: bool, names: list[str]) -> int:
    """Streamable HTTP: every request needs the bearer token and a Host (and Origin, when sent)
    this server answers to; a non-loopback address only on request."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    refused = _refusal(host, loopback, allow_remote, names)
    if refused:
        print(refused, file=sys.stderr)
        return 2
    from mcp_server.settings import Settings

    settings = Settings.from_env()
    try:
        token, created = statedir.http_token(settings.home, settings.http_token)
    except ValueError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if created:
        print(f"remote-gpu-trainer: HTTP clients must send 'Authorization: Bearer {token}' (saved, 0600, in "
              f"{settings.home / 'http-token'}; shown this once)", file=sys.stderr)
    url = f"http://{'127.0.0.1' if loopback else host}:{port}/mcp"
    _serving(_built(settings, http_token=token, http_url=url)).run(
        "streamable-http", host=host, port=port, transport_security=_transport_security(host, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
