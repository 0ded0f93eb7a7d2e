"""Front doors without Ray: the door registry, who may open a sharded data directory
alone, and the layout generation a door routes by (issue #28)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from localhost import LocalCluster
from sysutil import SMALL
from waiting import wait_until

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.cluster import live_doors, read_layout, rebalance_shards, unshard
from memoryos_actors.cluster._placement import ShardLayout, write_layout
from memoryos_actors.cluster.doors import FrontDoor
from memoryos_actors.errors import DataDirLocked, LayoutChanged

_CFG = MemoryConfig(**SMALL)


def _sharded(path: Path, shards: int = 2) -> None:
    """Make ``path`` a sharded data directory holding one user per shard count."""
    with MemoryOS.open(path, _CFG, cluster=LocalCluster(shards=shards)) as mem:
        mem.add_turn("alice", "hello", "hi")


def test_live_doors_counts_the_doors_open_now(tmp_path: Path) -> None:
    _sharded(tmp_path)
    assert live_doors(tmp_path) == 0
    first, second = FrontDoor(tmp_path), FrontDoor(tmp_path)
    try:
        assert live_doors(tmp_path) == 2
        first.close()
        assert live_doors(tmp_path) == 1
        assert len(list((tmp_path / "doors").glob("*.json"))) == 1
    finally:
        first.close()
        second.close()
    assert live_doors(tmp_path) == 0
    assert list((tmp_path / "doors").glob("*.json")) == []


def test_a_door_killed_with_sigkill_is_not_counted_and_its_file_is_swept(
    tmp_path: Path,
) -> None:
    _sharded(tmp_path)
    script = (
        "import sys\n"
        "from memoryos_actors.cluster.doors import FrontDoor\n"
        "door = FrontDoor(sys.argv[1])\n"
        "door.set_url('http://127.0.0.1:9')\n"
        "print('open', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        assert live_doors(tmp_path) == 1
        with pytest.raises(DataDirLocked, match=rf"pid {proc.pid} at http://127\.0\.0\.1:9"):
            rebalance_shards(tmp_path, 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.stdout is not None:
            proc.stdout.close()
    # The kernel dropped the dead door's locks: it counts no more, and nothing is refused.
    assert len(list((tmp_path / "doors").glob("*.json"))) == 1
    assert live_doors(tmp_path) == 0
    with FrontDoor(tmp_path):
        pass
    assert list((tmp_path / "doors").glob("*.json")) == []
    assert rebalance_shards(tmp_path, 3).shards_after == 3


def test_what_needs_the_directory_alone_is_refused_while_a_door_lives(tmp_path: Path) -> None:
    _sharded(tmp_path)
    door = FrontDoor(tmp_path)
    try:
        door.set_url("http://127.0.0.1:8123")
        for attempt in (
            lambda: rebalance_shards(tmp_path, 3),
            lambda: unshard(tmp_path),
            lambda: MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2)),
        ):
            with pytest.raises(DataDirLocked, match=r"1 front door \(pid \d+ at http://127"):
                attempt()
        layout = read_layout(tmp_path)
        assert layout is not None and (layout.shards, layout.generation) == (2, 1)
    finally:
        door.close()
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2)) as mem:
        assert mem.users() == ["alice"]


def test_a_door_is_refused_while_the_directory_is_held_alone(tmp_path: Path) -> None:
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2)) as mem:
        mem.add_turn("alice", "hello", "hi")
        with pytest.raises(DataDirLocked, match=rf"process {os.getpid()}"):
            FrontDoor(tmp_path)
        with pytest.raises(DataDirLocked):
            MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2, shared=True))
    assert live_doors(tmp_path) == 0


def test_a_shared_facade_is_a_door_that_records_its_generation(tmp_path: Path) -> None:
    _sharded(tmp_path)
    # Shards in this process lock their directories, so only one such facade opens them
    # (several share shards through Ray: tests/server/test_front_doors.py).
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2, shared=True)) as mem:
        assert live_doors(tmp_path) == 1
        assert mem.users() == ["alice"]
        (door_file,) = (tmp_path / "doors").glob("*.json")
        doc = json.loads(door_file.read_text())
        assert doc["pid"] == os.getpid() and doc["generation"] == 1
    assert live_doors(tmp_path) == 0
    assert list((tmp_path / "doors").glob("*.json")) == []


def test_a_layout_without_generation_reads_as_generation_1(tmp_path: Path) -> None:
    (tmp_path / "shards.json").write_text(
        json.dumps(
            {
                "format": "memoryos-actors/shard-layout",
                "version": 1,
                "placement": "jump/blake2b-64",
                "shards": 2,
            }
        )
    )
    layout = read_layout(tmp_path)
    assert layout is not None and (layout.shards, layout.generation) == (2, 1)


def test_every_rebalance_increments_the_generation(tmp_path: Path) -> None:
    _sharded(tmp_path)
    first = read_layout(tmp_path)
    assert first is not None and first.generation == 1 and first.cluster_id
    rebalance_shards(tmp_path, 3)
    rebalance_shards(tmp_path, 2)
    layout = read_layout(tmp_path)
    assert layout is not None
    assert (layout.shards, layout.generation, layout.cluster_id) == (2, 3, first.cluster_id)
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2)) as mem:
        assert len(mem.stored_page_ids("alice")) == 1  # the user moved with the layout


def test_a_door_that_sees_another_generation_stops_routing(tmp_path: Path) -> None:
    _sharded(tmp_path)
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2, shared=True)) as mem:
        mem.add_turn("alice", "before", "ok")
        old = read_layout(tmp_path)
        assert old is not None
        # What a rebalance run where this door's locks do not reach (another machine)
        # leaves behind: the next generation.
        write_layout(tmp_path, ShardLayout(3, generation=2, cluster_id=old.cluster_id))

        def refused() -> bool:
            try:
                mem.retrieve("alice", "before")
            except LayoutChanged as exc:
                assert "generation 1 -> 2" in str(exc) and "restart" in str(exc)
                return True
            return False

        wait_until(refused, "the door to notice the new generation", timeout=30.0)
        for call in (
            lambda: mem.add_turn("alice", "after", "no"),
            lambda: mem.users(),
            lambda: mem.add_turn("bob", "after", "no"),
        ):
            with pytest.raises(LayoutChanged, match="generation 1 -> 2"):
                call()
        write_layout(tmp_path, old)
    with MemoryOS.open(tmp_path, _CFG, cluster=LocalCluster(shards=2)) as mem:
        assert mem.users() == ["alice"]  # bob's turn was never routed
        assert len(mem.stored_page_ids("alice")) == 2  # hello, before; not "after"


def test_shards_in_this_process_report_their_state_without_importing_ray(tmp_path: Path) -> None:
    """/readyz of a server over in-process shards asks each shard's info: that must not
    load Ray (seconds and hundreds of MB) in a process that does not use it."""
    _sharded(tmp_path)
    script = (
        "import sys\n"
        "from memoryos_actors import MemoryConfig, MemoryOS\n"
        "from memoryos_actors.cluster import InProcessCluster\n"
        "with MemoryOS.open(sys.argv[1], MemoryConfig(log_level='error'),\n"
        "                   cluster=InProcessCluster(shards=2)) as mem:\n"
        "    states = mem.shard_states()\n"
        "    info = mem.shard_info()\n"
        "print([s['state'] for s in states], len(info), 'ray' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "['up', 'up'] 2 False"
