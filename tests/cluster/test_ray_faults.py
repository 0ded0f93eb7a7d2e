"""Ray shards under real faults: a shard process SIGKILLed under load, a node removed.

They share the session's loopback Ray cluster (``ray_cluster`` in tests/conftest.py).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
from sysutil import SMALL, turn_text
from waiting import wait_until

from memoryos_actors import ActorCrashed, MemoryConfig, MemoryOS

pytest.importorskip("ray")


def _assert_exactly_the_acknowledged_turns(mem, acked: dict[str, list[str]]) -> None:
    mem.flush()
    for user, ids in acked.items():
        stored = mem.stored_page_ids(user)
        assert [p for p, n in Counter(stored).items() if n > 1] == [], user
        assert set(stored) == set(ids), user


@pytest.mark.parametrize(
    "retry_seconds", [60.0, 0.01], ids=["facade-resends", "caller-resends-with-turn-key"]
)
def test_a_shard_killed_under_concurrent_load_loses_no_acknowledged_turn(
    ray_cluster, tmp_path: Path, retry_seconds: float
) -> None:
    # With a long retry budget the facade resends in-flight turns itself; with a tiny one
    # they fail with ActorCrashed and the writer resends them with the same turn key.
    from memoryos_actors.cluster import RayCluster

    cfg = MemoryConfig(**{**SMALL, "fsync": "interval"})
    mem = MemoryOS.open(tmp_path, cfg, cluster=RayCluster(shards=2, retry_seconds=retry_seconds))
    try:
        users = [f"user-{n}" for n in range(12)]
        victim = mem.shard_for(users[0])
        acked: dict[str, list[str]] = {u: [] for u in users}
        crashed: list[str] = []
        errors: list[BaseException] = []
        turns_per_user = 15

        def write(chunk: list[str]) -> None:
            try:
                for i in range(1, turns_per_user + 1):
                    for u in chunk:
                        while True:
                            try:
                                acked[u].append(
                                    mem.add_turn(u, *turn_text(u, i), turn_key=f"{u}/{i}")
                                )
                                break
                            except ActorCrashed:
                                crashed.append(u)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(users[k::4],)) for k in range(4)]
        for t in writers:
            t.start()
        # Kill once a third of the turns are acknowledged: the writers are mid-stream.
        wait_until(
            lambda: sum(map(len, acked.values())) >= len(users) * turns_per_user // 3,
            "a third of the turns to be acknowledged",
            timeout=120.0,
        )
        old = mem.shard_info()[victim]
        os.kill(old.pid, signal.SIGKILL)
        for t in writers:
            t.join()
        assert errors == []
        assert all(len(ids) == turns_per_user for ids in acked.values())
        new = mem.shard_info()[victim]
        assert new.pid != old.pid and new.incarnation == 1
        _assert_exactly_the_acknowledged_turns(mem, acked)
    finally:
        mem.close()


def test_removing_a_node_moves_its_shards_to_the_other_node_with_nothing_lost(
    ray_cluster, tmp_path: Path
) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from memoryos_actors.cluster import RayCluster

    node = ray_cluster.add_node(num_cpus=1, include_log_monitor=False)  # as the head
    removed = False
    # Both shards on the added node (soft: when it is gone, Ray places them elsewhere).
    pin = NodeAffinitySchedulingStrategy(node.node_id, soft=True)
    mem = MemoryOS.open(
        tmp_path, MemoryConfig(**SMALL), cluster=RayCluster(shards=2, scheduling_strategy=pin)
    )
    try:
        assert {info.node_id for info in mem.shard_info()} == {node.node_id}
        users = [f"user-{n}" for n in range(8)]
        acked: dict[str, list[str]] = {u: [] for u in users}
        for i in range(1, 16):
            for u in users:
                acked[u].append(mem.add_turn(u, *turn_text(u, i)))
        ray_cluster.remove_node(node)
        removed = True
        for i in range(16, 21):
            for u in users:
                acked[u].append(mem.add_turn(u, *turn_text(u, i)))
        infos = mem.shard_info()
        assert all(info.node_id != node.node_id for info in infos)
        assert all(info.incarnation == 1 for info in infos)
        _assert_exactly_the_acknowledged_turns(mem, acked)
    finally:
        mem.close()
        if not removed:
            ray_cluster.remove_node(node)
