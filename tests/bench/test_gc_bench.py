"""The garbage-collection bench (bench/gc_bench.py) and its watch of the collector."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from bench import gc_bench
from bench._gcwatch import GCWatch


def test_the_watch_counts_a_full_collection_and_lets_go_of_the_collector() -> None:
    watch = GCWatch().start()
    gc.collect()
    seen = watch.stop()
    assert seen["gen2"]["collections"] >= 1
    assert seen["gen2"]["max_ms"] <= seen["gen2"]["total_ms"]
    assert watch._callback not in gc.callbacks  # noqa: SLF001 - bound methods compare equal
    gc.collect()
    assert watch.stop()["gen2"]["collections"] == seen["gen2"]["collections"]


def test_a_small_run_reports_the_quiet_collections_and_what_is_tracked() -> None:
    result = gc_bench.run(users=2, turns=10, threads=2, collections=3)
    assert result["settled_turns_per_s"] > 0
    assert set(result["during_flood"]) == {"gen0", "gen1", "gen2"}
    assert len(result["quiet_full_collection_ms"]["runs"]) == 3
    assert result["tracked_objects"] > 0
    assert sum(result["tracked_by_type"].values()) <= result["tracked_objects"]
