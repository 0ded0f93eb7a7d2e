"""The network face of memoryos-actors: an HTTP JSON API and an MCP server.

Install the extras (``pip install ".[server,mcp]"`` in the source checkout) and run
``memoryos serve`` (HTTP; ``--mcp`` adds MCP over streamable HTTP at ``/mcp``) or
``memoryos mcp`` (MCP over stdio). Keys: ``memoryos keys add --tenant NAME``.

Names are loaded on first use; ``import memoryos_actors`` never imports this package,
and this package imports FastAPI, uvicorn, prometheus_client and mcp only when a name
that needs them is used.
"""

from __future__ import annotations

from .._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "ServerSettings": "memoryos_actors.server.app",
    "create_app": "memoryos_actors.server.app",
    "serve": "memoryos_actors.server.run",
    "serve_mcp_stdio": "memoryos_actors.server.run",
    "build_mcp": "memoryos_actors.server.mcp_server",
    "KeyStore": "memoryos_actors.server.keys",
    "KeyRecord": "memoryos_actors.server.keys",
    "RateLimiter": "memoryos_actors.server.ratelimit",
    "TokenBucket": "memoryos_actors.server.ratelimit",
}

# Written out (tools read it without importing the package); a test checks it names
# exactly the lazily loaded names above.
__all__ = [
    "KeyRecord",
    "KeyStore",
    "RateLimiter",
    "ServerSettings",
    "TokenBucket",
    "build_mcp",
    "create_app",
    "serve",
    "serve_mcp_stdio",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
