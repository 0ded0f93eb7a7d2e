"""The front ends' door to the disk (:mod:`memoryos_actors.operations`) hands each call on
unchanged: the names the CLI and the server use mean what the modules behind them mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors import operations as ops
from memoryos_actors.errors import DataDirLocked, InvalidInput


def test_memory_ids_parse_and_an_agent_trait_takes_another_assistant() -> None:
    assert ops.parse_memory_id("page:p12").kind == "page"
    assert ops.agent_trait_id("agent_trait:acme:bot:a2", "bot") == "agent_trait:bot:a2"
    assert "agent_trait" in ops.MEMORY_KINDS
    with pytest.raises(InvalidInput):
        ops.parse_memory_id("nonsense")


def test_the_disk_tools_read_a_data_directory(tmp_path: Path) -> None:
    with MemoryOS.open(tmp_path, MemoryConfig(log_level="error")) as mem:
        mem.add_turn("ann", "hello", "hi")
        locked, pid = ops.lock_holder(tmp_path)
        assert locked and pid is not None
        with pytest.raises(DataDirLocked):
            ops.DataDirLock(tmp_path)
    assert ops.user_exists(tmp_path, "ann") and ops.list_users(tmp_path) == ["ann"]
    assert ops.user_stored_stats(tmp_path, "ann")["turns"] == 1
    assert ops.stored_stats(tmp_path)["stored"]["users"] == 1
    assert ops.server_info(tmp_path).parent == tmp_path
    with ops.DataDirLock(tmp_path):
        assert not ops.repair_user(tmp_path, "ann").changed


def test_an_export_round_trips_through_the_operations(tmp_path: Path) -> None:
    with MemoryOS.open(tmp_path / "d", MemoryConfig(log_level="error")) as mem:
        mem.add_turn("ann", "hello", "hi")
        path = mem.export_user("ann", tmp_path / "ann.json")
    payload = ops.read_export(path)
    copy = ops.write_export(tmp_path / "copy.json", payload)
    assert ops.read_export(copy) == payload
