"""The single-thread floor of the offline write path: the work a stored turn needs, done
in one thread with no actors, to set the throughput bench's numbers against.

Each turn of ``--users`` x ``--turns`` (the throughput bench's synthetic turns, users
interleaved one turn at a time as in its flood) goes through the same cores and the same
offline backend the memory system uses, in the order it uses them: the page is built and
its WAL record written (one WAL per user, fsync ``interval``), the offline backend gives
its chain meta, the meta's WAL record is written, the page enters STM; a page pushed out
of STM is embedded (the default hashing embedder, the text MTM embeds) and inserted into
MTM, and a segment that has gathered ``summary_every_pages`` new pages gets its offline
summary. Left out, so the floor is if anything too high: actors, messages and threads,
admission, snapshots, persona updates and LPM.

What it reports is the most turns/s one Python thread can settle on this machine with
nothing but the work itself; the throughput bench (``bench/throughput.py``) settles the
same turns through the actor system. Per-stage times are wall time around each part.

    python bench/floor.py --users 100 --turns 100
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py, throughput.py
from _out import add_out_dir, run_header, write_result  # noqa: E402
from throughput import turn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STAGES = ("page", "wal", "meta", "embed", "insert", "summary")


@dataclasses.dataclass
class _User:
    stm: Any
    mtm: Any
    wal: Any
    prev: Any = None
    unsummarised: dict[str, int] = dataclasses.field(default_factory=dict)


def run(users: int, turns: int) -> dict[str, Any]:
    """Store ``users`` x ``turns`` turns in one thread; the result's numbers."""
    from memoryos_actors import MemoryConfig
    from memoryos_actors.actors import persist
    from memoryos_actors.actors.mtm import page_text
    from memoryos_actors.clock import SystemClock
    from memoryos_actors.gateway.embedders import HashingEmbedder
    from memoryos_actors.gateway.offline import OfflineBackend
    from memoryos_actors.records import Page
    from memoryos_actors.store.wal import WAL
    from memoryos_actors.tiers.mtm import MTMCore
    from memoryos_actors.tiers.stm import STMCore

    cfg = MemoryConfig()
    offline = OfflineBackend()
    embedder = HashingEmbedder(cfg.embedding_dim)
    clock = SystemClock()
    spent = dict.fromkeys(STAGES, 0.0)
    placed = summaries = 0
    clock_ = time.perf_counter
    with tempfile.TemporaryDirectory(prefix="memoryos-floor-") as tmp:
        people = [
            _User(
                STMCore(cfg.stm_capacity),
                MTMCore(cfg, cfg.embedding_dim, clock),
                WAL(Path(tmp) / f"user-{u}.wal", cfg.fsync, cfg.fsync_interval_seconds),
            )
            for u in range(users)
        ]
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = clock_()
        for i in range(1, turns + 1):
            for u, who in enumerate(people):
                q, r = turn(u, i)
                a = clock_()
                page = Page(
                    user_id=f"user-{u}",
                    assistant_id="assistant",
                    page_id=f"p{i}",
                    seq=i,
                    query=q,
                    response=r,
                    timestamp=clock.now(),
                )
                b = clock_()
                who.wal.append(persist.turn_record(page, ""))
                c = clock_()
                prev = who.prev
                meta = offline.complete(
                    "page_meta",
                    {
                        "page": {"query": q, "response": r},
                        "previous_page": (
                            {"query": prev.query, "response": prev.response} if prev else None
                        ),
                        "previous_meta_chain": prev.meta_chain if prev else "",
                    },
                )
                continues = bool(meta["continues"]) and prev is not None
                page = dataclasses.replace(
                    page,
                    meta_chain=meta["meta_chain"],
                    chain_id=prev.chain_id if continues else page.page_id,
                    keywords=frozenset(meta["keywords"]),
                )
                d = clock_()
                who.wal.append(persist.meta_record(page))
                e = clock_()
                who.prev = page
                out = who.stm.push(page)
                spent["page"] += b - a
                spent["wal"] += (c - b) + (e - d)
                spent["meta"] += d - c
                if out is None:
                    continue
                f = clock_()
                vector = embedder.embed([page_text(out)])[0]
                g = clock_()
                effects = who.mtm.insert(out, vector)
                h = clock_()
                placed += 1
                for seg_id in effects.summary_due:
                    n = who.unsummarised.get(seg_id, 0) + 1
                    who.unsummarised[seg_id] = n
                    if n >= cfg.summary_every_pages:
                        who.unsummarised[seg_id] = 0
                        pages = [
                            {"query": p.query, "response": p.response}
                            for p in who.mtm.segment_pages(seg_id)
                        ]
                        s = offline.complete("segment_summary", {"pages": pages})
                        who.mtm.set_summary(seg_id, s["summary"], s["keywords"])
                        summaries += 1
                spent["embed"] += g - f
                spent["insert"] += h - g
                spent["summary"] += clock_() - h
        elapsed = clock_() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        for who in people:
            who.wal.close()
    total = users * turns
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "users": users,
        "turns_per_user": turns,
        "turns_total": total,
        "pages_placed": placed,
        "segment_summaries": summaries,
        "settled_turns_per_s": total / elapsed,
        "cpu_us_per_turn": cpu / total * 1e6,
        "stage_us_per_turn": {k: v / total * 1e6 for k, v in spent.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    add_out_dir(p)
    args = p.parse_args(argv)
    runs = [run(args.users, args.turns) for _ in range(max(1, args.repeat))]
    ranked = sorted(runs, key=lambda r: r["settled_turns_per_s"])
    result = {
        **run_header("floor"),
        **ranked[len(ranked) // 2],
        "runs_settled_turns_per_s": [r["settled_turns_per_s"] for r in runs],
    }
    path = write_result(args, "floor.json", result)
    print("| metric | value |\n| --- | --- |")
    print(
        f"| settled turns/s, one thread, median of {len(runs)} | "
        f"{result['settled_turns_per_s']:.0f} |"
    )
    print(f"| CPU per turn, us | {result['cpu_us_per_turn']:.0f} |")
    print(
        f"| pages placed in MTM, segment summaries | {result['pages_placed']}, "
        f"{result['segment_summaries']} |"
    )
    for stage, us in result["stage_us_per_turn"].items():
        print(f"| {stage}, us per turn | {us:.1f} |")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
