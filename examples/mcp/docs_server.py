"""A read-only MCP server on the official SDK: the MCP how-to page's copy-paste example.

runner run examples/mcp/search_docs.yaml --mcp examples/mcp/servers.yaml
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("docs")

PAGES = {
    "retry": "Retry a transient failure with backoff and jitter, never past the deadline.",
    "keys": "One operation key per write intent; a retry reuses it.",
}


class Page(BaseModel):
    topic: str
    text: str


class Found(BaseModel):
    pages: list[Page]


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search(query: str) -> Found:
    """Search the runner's documentation by topic word."""
    return Found(pages=[Page(topic=k, text=v) for k, v in PAGES.items() if query.lower() in k])


if __name__ == "__main__":
    server.run()
