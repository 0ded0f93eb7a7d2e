"""Shard deaths at exact moments (shards in this process, deaths injected by the host).

A real process death cannot be timed to land between "the turn is in the WAL" and "the
answer reaches the caller"; the in-process host can, deterministically. The same facade
code runs over Ray (see test_ray_faults.py for real SIGKILLs and node removal).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from localhost import LocalCluster
from sysutil import SMALL, turn_text

from memoryos_actors import ActorCrashed, ManualClock, MemoryConfig, MemoryOS
from memoryos_actors.cluster._backend import ShardDown


@pytest.fixture
def sharded(tmp_path: Path):
    cluster = LocalCluster(shards=2, retry_seconds=5.0)
    mem = MemoryOS.open(
        tmp_path / "data",
        MemoryConfig(**SMALL),
        clock=ManualClock(1_700_000_000.0),
        cluster=cluster,
    )
    try:
        yield mem, cluster.host
    finally:
        mem.close()


def test_a_turn_whose_answer_was_lost_in_a_shard_death_is_stored_once(sharded) -> None:
    mem, host = sharded
    shard = mem.shard_for("alice")
    for i in range(1, 11):
        mem.add_turn("alice", *turn_text("alice", i))
    host.die(shard, "after")  # the turn is written, then the shard dies before answering
    assert mem.add_turn("alice", "the lost answer", "ok") == "p11"
    assert host.restarts[shard] == 1
    assert mem.add_turn("alice", "next", "ok") == "p12"
    mem.flush()
    ids = mem.stored_page_ids("alice")
    assert Counter(ids).most_common(1)[0][1] == 1
    assert set(ids) == {f"p{i}" for i in range(1, 13)}


def test_a_turn_sent_to_a_shard_that_died_first_is_stored_by_the_retry(sharded) -> None:
    mem, host = sharded
    shard = mem.shard_for("bob")
    mem.add_turn("bob", "first", "ok")
    host.die(shard, "before", times=2)
    assert mem.add_turn("bob", "second", "ok") == "p2"
    assert host.restarts[shard] == 2
    assert mem.stats()["shard_retries"] == 2


def test_reads_and_profile_writes_are_sent_again_after_a_shard_death(sharded) -> None:
    from memoryos_actors import UserProfile

    mem, host = sharded
    mem.add_turn("cy", "I collect stamps", "nice")
    shard = mem.shard_for("cy")
    host.die(shard, "after")
    mem.set_user_profile("cy", UserProfile(name="Cy"))
    host.die(shard, "before")
    assert mem.retrieve("cy", "stamps").lpm_profile.name == "Cy"


def test_a_call_that_is_not_safe_to_repeat_gets_actor_crashed(sharded) -> None:
    mem, host = sharded
    mem.add_turn("dee", "hello", "hi")
    host.die(mem.shard_for("dee"), "after")
    with pytest.raises(ActorCrashed, match="may or may not"):
        mem.forget_user("dee")
    # It did happen; calling again by hand is safe and reports nothing left to remove.
    assert mem.forget_user("dee").removed_files == ()
    assert "dee" not in mem.users()


def test_a_shard_that_stays_down_past_retry_seconds_gives_actor_crashed(tmp_path) -> None:
    cluster = LocalCluster(shards=2, retry_seconds=0.2)
    with MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=cluster) as mem:
        assert cluster.host is not None
        cluster.host.die(mem.shard_for("eve"), "before", times=1000)
        with pytest.raises(ActorCrashed, match="did not come back"):
            mem.add_turn("eve", "hello", "hi")
        cluster.host.deaths.clear()
        assert mem.add_turn("eve", "hello", "hi") == "p1"


def test_the_other_shards_users_are_served_while_one_shard_restarts(sharded) -> None:
    mem, host = sharded
    a = "ann"
    b = next(f"b{i}" for i in range(100) if mem.shard_for(f"b{i}") != mem.shard_for(a))
    host.die(mem.shard_for(a), "before")
    mem.add_turn(b, "unaffected", "ok")
    assert host.restarts[mem.shard_for(b)] == 0
    assert mem.add_turn(a, "after the restart", "ok") == "p1"


def test_shard_info_waits_for_a_restarting_shard(sharded) -> None:
    mem, host = sharded

    calls = {"n": 0}
    real = host.result

    def flaky(handle, timeout):
        if handle[1] == "info" and calls["n"] == 0:
            calls["n"] += 1
            raise ShardDown("injected: restarting")
        return real(handle, timeout)

    host.result = flaky
    infos = mem.shard_info()
    assert [i.shard for i in infos] == [0, 1] and calls["n"] == 1


def test_a_relative_data_dir_reaches_the_shards_as_an_absolute_path(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with MemoryOS.open("rel-data", MemoryConfig(**SMALL), cluster=LocalCluster(shards=2)) as mem:
        assert all(Path(i.data_dir).is_absolute() for i in mem.shard_info())
        assert mem.data_dir == tmp_path / "rel-data"
