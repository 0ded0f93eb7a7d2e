"""Placement of users on shards, the layout file, and rebalancing (no Ray needed)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inprocess import run_cli
from localhost import LocalCluster
from sysutil import SMALL, turn_text

from memoryos_actors import (
    ConfigError,
    CorruptDataError,
    DataDirLocked,
    InvalidInput,
    ManualClock,
    MemoryConfig,
    MemoryOS,
)
from memoryos_actors.cluster import read_layout, rebalance_shards, shard_dir, shard_of
from memoryos_actors.cluster._placement import ShardLayout, jump_hash, write_layout


@given(key=st.integers(min_value=0, max_value=2**64 - 1), n=st.integers(1, 500))
def test_jump_hash_moves_a_key_only_to_the_new_bucket_when_one_is_added(key: int, n: int) -> None:
    before, after = jump_hash(key, n), jump_hash(key, n + 1)
    assert 0 <= before < n
    assert after in (before, n)


@given(
    key=st.integers(min_value=0, max_value=2**64 - 1), n=st.integers(1, 300), m=st.integers(1, 300)
)
def test_jump_hash_keeps_keys_of_surviving_buckets_when_shrinking(key: int, n: int, m: int) -> None:
    small, large = sorted((n, m))
    if jump_hash(key, large) < small:
        assert jump_hash(key, small) == jump_hash(key, large)


def test_placement_is_pinned_so_stored_data_stays_findable() -> None:
    # What every past and future version must compute: a change would send users to a
    # shard that does not hold their files.
    assert {
        u: shard_of(u, 8) for u in ("alice", "bob", "carol", "dave", "\u00e9mile", "\U0001f600")
    } == {"alice": 1, "bob": 7, "carol": 3, "dave": 2, "\u00e9mile": 0, "\U0001f600": 0}
    assert [jump_hash(k, 1000) for k in (0, 1, 2**63, 2**64 - 1)] == [0, 549, 453, 313]
    assert shard_of("alice", 1) == 0


def test_another_process_with_another_hash_seed_places_users_the_same() -> None:
    import subprocess
    import sys

    users = [f"user-{i}" for i in range(50)] + ["\u00e9mile", "Z\u00fcrich"]
    code = (
        "import json, sys; from memoryos_actors.cluster import shard_of; "
        "print(json.dumps([shard_of(u, 7) for u in json.loads(sys.argv[1])]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(users)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    ).stdout
    assert json.loads(out) == [shard_of(u, 7) for u in users]


def test_users_spread_evenly_over_shards() -> None:
    counts = Counter(shard_of(f"user-{i}", 8) for i in range(16000))
    assert sorted(counts) == list(range(8))
    assert max(counts.values()) < 1.1 * 2000 and min(counts.values()) > 0.9 * 2000


def test_growing_from_four_to_five_shards_moves_about_a_fifth_of_the_users() -> None:
    users = [f"user-{i}" for i in range(10000)]
    moved = [u for u in users if shard_of(u, 4) != shard_of(u, 5)]
    assert all(shard_of(u, 5) == 4 for u in moved)
    assert 0.17 < len(moved) / len(users) < 0.23


@pytest.mark.parametrize("bad", [0, -1, 4097, 2.0, True, "3", None])
def test_a_bad_shard_count_is_invalid_input(bad: object) -> None:
    with pytest.raises(InvalidInput):
        shard_of("u", bad)  # type: ignore[arg-type]


def test_the_layout_round_trips_and_damage_is_named(tmp_path: Path) -> None:
    assert read_layout(tmp_path) is None
    write_layout(tmp_path, ShardLayout(3, rebalancing_from=2))
    assert read_layout(tmp_path) == ShardLayout(3, 2)
    (tmp_path / "shards.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(CorruptDataError, match="shards.json"):
        read_layout(tmp_path)


def _fill(data_dir: Path, shards: int, users: list[str], turns: int = 12) -> dict[str, list[str]]:
    cfg = MemoryConfig(**SMALL)
    with MemoryOS.open(
        data_dir, cfg, clock=ManualClock(1_700_000_000.0), cluster=LocalCluster(shards=shards)
    ) as mem:
        for i in range(1, turns + 1):
            for u in users:
                mem.add_turn(u, *turn_text(u, i))
        mem.flush()
        return {u: sorted(mem.stored_page_ids(u)) for u in users}


def _stored(data_dir: Path, shards: int, users: list[str]) -> dict[str, list[str]]:
    with MemoryOS.open(data_dir, MemoryConfig(**SMALL), cluster=LocalCluster(shards=shards)) as mem:
        assert mem.users() == sorted(users)
        return {u: sorted(mem.stored_page_ids(u)) for u in users}


def test_opening_with_another_shard_count_is_refused_until_rebalanced(tmp_path: Path) -> None:
    users = [f"user-{i}" for i in range(30)]
    before = _fill(tmp_path, 2, users)
    with pytest.raises(ConfigError, match="rebalance_shards"):
        MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=LocalCluster(shards=3))
    report = rebalance_shards(tmp_path, 3)
    assert (report.shards_before, report.shards_after) == (2, 3)
    assert report.moved and all(to == 2 for _frm, to in report.moved.values())
    assert _stored(tmp_path, 3, users) == before
    for u in users:
        assert (shard_dir(tmp_path, shard_of(u, 3)) / "users").is_dir()


def test_shrinking_moves_users_off_the_removed_shards_and_deletes_them(tmp_path: Path) -> None:
    users = [f"user-{i}" for i in range(30)]
    before = _fill(tmp_path, 4, users)
    report = rebalance_shards(tmp_path, 2)
    assert all(frm >= 2 for frm, _to in report.moved.values())
    assert sorted(Path(d).name for d in report.removed_dirs) == ["shard-0002", "shard-0003"]
    assert not shard_dir(tmp_path, 3).exists()
    assert _stored(tmp_path, 2, users) == before


def test_an_in_process_data_directory_becomes_a_sharded_one(tmp_path: Path) -> None:
    users = ["ann", "ben", "cy", "dee"]
    with MemoryOS.open(tmp_path, MemoryConfig(**SMALL)) as mem:
        for u in users:
            mem.add_turn(u, f"{u} likes tea", "noted")
    with pytest.raises(ConfigError, match="in-process"):
        MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=LocalCluster(shards=2))
    report = rebalance_shards(tmp_path, 2)
    assert report.shards_before == 0 and set(report.moved) == set(users)
    assert _stored(tmp_path, 2, users) == {u: ["p1"] for u in users}
    with pytest.raises(InvalidInput, match="sharded"):
        MemoryOS.open(tmp_path, MemoryConfig(**SMALL))


def test_an_interrupted_rebalance_is_refused_then_finished_by_running_it_again(
    tmp_path: Path,
) -> None:
    users = [f"user-{i}" for i in range(20)]
    before = _fill(tmp_path, 2, users)
    # What a crash half-way leaves: the layout says "moving", one user already moved.
    mover = next(u for u in users if shard_of(u, 3) == 2)
    from memoryos_actors.cluster._placement import _move_user

    write_layout(tmp_path, ShardLayout(3, rebalancing_from=2))
    shard_dir(tmp_path, 2).mkdir()
    _move_user(mover, shard_dir(tmp_path, shard_of(mover, 2)), shard_dir(tmp_path, 2))
    with pytest.raises(ConfigError, match="interrupted"):
        MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=LocalCluster(shards=3))
    with pytest.raises(ConfigError, match="finished"):
        rebalance_shards(tmp_path, 4)
    report = rebalance_shards(tmp_path, 3)
    assert mover not in report.moved
    layout = read_layout(tmp_path)
    assert layout is not None and (layout.shards, layout.rebalancing_from) == (3, None)
    assert _stored(tmp_path, 3, users) == before


def test_rebalancing_a_data_directory_in_use_is_refused(tmp_path: Path) -> None:
    with MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=LocalCluster(shards=2)) as mem:
        mem.add_turn("u", "q", "r")
        with pytest.raises(DataDirLocked):
            rebalance_shards(tmp_path, 3)
    layout = read_layout(tmp_path)
    assert layout is not None and (layout.shards, layout.generation) == (2, 1)


def test_importing_the_package_and_the_cluster_module_does_not_import_ray() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memoryos_actors, memoryos_actors.cluster as c; "
        "c.shard_of('u', 3); c.RayCluster(shards=3); c.rebalance_shards; "
        "print('ray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "False"


def test_a_bad_ray_cluster_setting_is_invalid_input(tmp_path: Path) -> None:
    from memoryos_actors.cluster import RayCluster

    for bad in (
        {"shards": 0},
        {"max_restarts": -2},
        {"max_concurrency": 0},
        {"retry_seconds": 0},
        {"num_cpus": -1},
    ):
        with pytest.raises(InvalidInput):
            RayCluster(**bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="RayCluster"):
        MemoryOS.open(tmp_path, cluster="ray")  # type: ignore[call-overload]


def test_the_rebalance_command_moves_users_and_reports_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    users = [f"user-{i}" for i in range(10)]
    before = _fill(tmp_path, 2, users, turns=3)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(tmp_path),
            "rebalance",
            "--shards",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    moved = [u for u in users if shard_of(u, 2) != shard_of(u, 3)]
    assert f"2 -> 3 shards: moved {len(moved)} users" in proc.stdout
    assert _stored(tmp_path, 3, users) == before


def test_the_cluster_module_exports_exactly_these_names() -> None:
    import memoryos_actors.cluster as cluster

    assert cluster.__all__ == [
        "ClusterMemoryOS",
        "InProcessCluster",
        "RayCluster",
        "RebalanceReport",
        "ShardInfo",
        "live_doors",
        "open_data_dir",
        "read_layout",
        "rebalance_shards",
        "shard_dir",
        "shard_namespace",
        "shard_of",
        "shared_shards",
        "stop_shards",
        "unshard",
    ]
    for name in cluster.__all__:
        assert getattr(cluster, name) is not None


def test_a_layout_file_with_too_small_a_count_is_refused_and_can_be_put_right(
    tmp_path: Path,
) -> None:
    users = [f"user-{i}" for i in range(20)]
    before = _fill(tmp_path, 3, users, turns=2)
    layout_file = tmp_path / "shards.json"
    good = json.loads(layout_file.read_text())
    # A hand edit or an older backup says 2 shards: shard-0002's users would be invisible,
    # and a write would make a second copy of one of them on another shard.
    layout_file.write_text(json.dumps({**good, "shards": 2}))
    with pytest.raises(CorruptDataError, match="shard-0002") as info:
        MemoryOS.open(tmp_path, MemoryConfig(**SMALL), cluster=LocalCluster(shards=2))
    assert '"shards" to 3' in str(info.value)
    run = run_cli("stats", data_dir=tmp_path)
    assert run.returncode != 0 and "shard-0002" in run.stderr and "Traceback" not in run.stderr
    layout_file.write_text(json.dumps(good))
    rebalance_shards(tmp_path, 2)
    assert _stored(tmp_path, 2, users) == before


@pytest.mark.parametrize("count", [True, "3", 3.0, None])
def test_a_shard_count_that_is_not_a_whole_number_is_refused(tmp_path: Path, count: object) -> None:
    _fill(tmp_path, 3, ["ann"], turns=1)
    layout_file = tmp_path / "shards.json"
    layout_file.write_text(json.dumps({**json.loads(layout_file.read_text()), "shards": count}))
    with pytest.raises(CorruptDataError, match="shards.json"):
        read_layout(tmp_path)
