"""The single-thread floor bench (bench/floor.py) runs the real cores and reports each
stage: a small run, so a change to the cores' API breaks this test, not the next
measurement."""

from __future__ import annotations

import json
import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from bench import floor


def test_a_small_run_goes_through_every_stage() -> None:
    result = floor.run(users=2, turns=20)
    assert result["turns_total"] == 40
    assert result["settled_turns_per_s"] > 0
    stages = result["stage_us_per_turn"]
    assert set(stages) == set(floor.STAGES)
    assert all(stages[name] > 0 for name in floor.STAGES)
    # 20 turns a user with STM's 7 pages: 13 pages each left STM and were placed, and
    # segments gathered enough new pages for their summaries.
    assert result["pages_placed"] == 2 * (20 - 7)
    assert result["segment_summaries"] >= 2


def test_main_writes_the_median_run_with_the_command(tmp_path: Path) -> None:
    argv = ["--users", "1", "--turns", "12", "--repeat", "3", "--out-dir", str(tmp_path)]
    assert floor.main(argv) == 0
    written = json.loads((tmp_path / "floor.json").read_text("utf-8"))
    assert written["bench"] == "floor"
    assert written["turns_total"] == 12
    runs = sorted(written["runs_settled_turns_per_s"])
    assert len(runs) == 3
    assert written["settled_turns_per_s"] == runs[1]
