"""The MCP server tells clients which release it is (``serverInfo.version``)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from srvutil import CONFIG_TOML

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402

import memoryos_actors  # noqa: E402


def test_mcp_server_info_carries_the_package_version(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(CONFIG_TOML)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryos_actors", "--data-dir", str(tmp_path / "data"), "--config",
              str(config), "mcp", "--tenant", "acme"],
        cwd=str(tmp_path),
    )
    seen: dict[str, str] = {}

    async def main() -> None:
        async with Client(params) as client:
            info = client.server_info
            seen["name"], seen["version"] = info.name, info.version

    asyncio.run(main())
    assert seen == {"name": "memoryos-actors", "version": memoryos_actors.__version__}
