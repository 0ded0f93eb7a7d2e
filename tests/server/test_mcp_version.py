"""The MCP server tells clients which release it is (``serverInfo.version``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from srvutil import stdio_mcp_params

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

import memoryos_actors  # noqa: E402


def test_mcp_server_info_carries_the_package_version(tmp_path: Path) -> None:
    params = stdio_mcp_params(tmp_path)
    seen: dict[str, str] = {}

    async def main() -> None:
        async with Client(params) as client:
            info = client.server_info
            seen["name"], seen["version"] = info.name, info.version

    asyncio.run(main())
    assert seen == {"name": "memoryos-actors", "version": memoryos_actors.__version__}
