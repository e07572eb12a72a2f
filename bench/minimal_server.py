"""The floor for bench_start: a server on the same SDK and the same API as ours (MCPServer, one
tool, served over stdio), so start-up is compared with what the SDK itself costs."""

from __future__ import annotations

from mcp.server import MCPServer


def main() -> None:
    server: MCPServer = MCPServer("minimal", version="1")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text it was given."""
        return text

    server.run("stdio")


if __name__ == "__main__":
    main()
