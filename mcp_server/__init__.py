"""remote-gpu-trainer MCP server."""

__version__ = "0.1.0"
