"""Back from shards to one plain data directory (issue #25): ``unshard`` and the shards in
the caller's process (``InProcessCluster``, ``open_data_dir``)."""

from __future__ import annotations

import os
from pathlib import Path

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.cluster import (
    InProcessCluster,
    open_data_dir,
    rebalance_shards,
    shard_dir,
    unshard,
)
from memoryos_actors.store.userstore import list_users, user_path

USERS = [f"user-{n}" for n in range(8)]
CFG = MemoryConfig(log_level="error", heat_tick_seconds=3600.0)


def _fill(data: Path) -> None:
    with MemoryOS.open(data, CFG, cluster=InProcessCluster(shards=3)) as mem:
        for n, user in enumerate(USERS):
            mem.add_turn(user, f"I keep {n} kites in the shed.", "Noted.")


def test_unshard_brings_every_user_back_and_an_interrupted_run_finishes(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _fill(data)
    # Interrupted half way: every user on shard 0, some already moved out of it.
    rebalance_shards(data, 1)
    (data / "users").mkdir()
    for user in USERS[:3]:
        os.rename(user_path(shard_dir(data, 0), user), user_path(data, user))
    report = unshard(data)
    assert report.shards_after == 0 and set(report.moved) >= set(USERS[3:])
    assert not (data / "shards.json").exists() and not list(data.glob("shard-*"))
    assert list_users(data) == sorted(USERS)
    with open_data_dir(data, CFG) as mem:  # a plain directory again
        assert isinstance(mem, MemoryOS)
        assert all(mem.user_state(u).turns == 1 for u in USERS)
    assert unshard(data).moved == {}  # nothing left to do


def test_open_data_dir_opens_a_sharded_directory_with_its_recorded_count(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _fill(data)
    with open_data_dir(data, CFG) as mem:
        assert not isinstance(mem, MemoryOS) and mem.shards == 3
        assert sorted(mem.users()) == sorted(USERS)
        mem.add_turn("user-0", "And a red one.", "Nice.")
        assert mem.user_state("user-0").turns == 2
