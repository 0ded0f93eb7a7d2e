"""Lifecycle races at scale: writers against forget, import, export, passivate and the janitor.

Each trial opens a fresh data directory with few live groups and a short idle timeout (so
LRU passivation and the idle janitor run all the time), then races:

* writer threads storing turns for a few users (each turn has its own ``turn_key``; a call
  that ends in ``Overloaded`` is retried with the same key), with a ledger of every
  acknowledged turn and when its call started and ended;
* one lifecycle thread doing, at random, ``forget_user``, ``passivate``, ``export_user`` and
  ``import_user`` (of an export, into a user the writers also write to) on the same users.

Then the system is closed and reopened, and every user is checked against the ledger:
every acknowledged turn that no forget could have removed is stored exactly once; no turn
acknowledged before a forget began is stored; nothing is stored twice; every imported
turn came from the export it was imported from; no call ended in an error other than
``Overloaded`` (and the expected ``InvalidInput`` of an import over existing data); and
every user accepts a turn and a retrieval afterwards. A trial with any such problem counts
as failed.

    python bench/lifecycle_bench.py --trials 200

Results go to ``bench/results/lifecycle.json``: trials with a problem (target 0), the
problems of the first ones, operation counts, and activation latency percentiles.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryos_actors import ManualClock, MemoryConfig, MemoryOS  # noqa: E402
from memoryos_actors.errors import InvalidInput, Overloaded, UnknownUser  # noqa: E402

#: The users writers write to; the last one is also where exports are imported.
USERS = ("ann", "bob", "cid", "imp")
_KEY = re.compile(r"\bk=([0-9a-z-]+)\b")


@dataclass
class Ack:
    """One acknowledged turn: its key, user, and when the call (first attempt) started and
    the acknowledgement came (``time.monotonic()`` seconds)."""

    key: str
    user: str
    started: float
    acked: float


@dataclass
class TrialResult:
    """What one trial did and what went wrong (``problems`` empty: the trial passed)."""

    seed: int
    problems: list[str] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)
    acked: int = 0
    activation_ms: list[float] = field(default_factory=list)


def _config(overload_s: float) -> MemoryConfig:
    return MemoryConfig(
        stm_capacity=3,
        mtm_capacity=4,
        segment_max_pages=3,
        heat_tick_seconds=0.05,
        summary_debounce_seconds=0.01,
        snapshot_every_turns=7,
        fsync="never",
        log_level="critical",
        max_active_users=2,
        idle_timeout_seconds=0.05,
        overload_timeout_seconds=overload_s,
    )


def stored_keys(mem: MemoryOS, user: str) -> list[str]:
    """The turn keys of every page stored for ``user`` (STM, MTM and the archive)."""
    state = mem.user_state(user)
    queries = [p.query for p in state.stm]
    for seg in state.segments:
        queries.extend(p.query for p in seg.pages)
    for rec in mem.archive(user):
        if rec.get("t") == "segment":
            queries.extend(str(p["query"]) for p in rec["segment"]["pages"])
        elif rec.get("t") == "page":
            queries.append(str(rec["page"]["query"]))
    keys = []
    for q in queries:
        m = _KEY.search(q)
        if m:
            keys.append(m.group(1))
    return keys


def run_trial(root: Path, seed: int, *, writers: int = 3, turns: int = 40,
              ops: int = 12, overload_s: float = 2.0) -> TrialResult:
    """One race trial in the empty directory ``root`` (see the module docstring)."""
    rng = random.Random(seed)
    result = TrialResult(seed)
    lock = threading.Lock()
    acks: list[Ack] = []
    forgets: dict[str, list[tuple[float, float]]] = {u: [] for u in USERS}
    imports: list[tuple[float, float, frozenset[str]]] = []
    # Keys whose call ended without an answer: each may be stored at most once.
    unknown: set[str] = set()
    mem = MemoryOS.open(root / "data", _config(overload_s), clock=ManualClock(1.7e9))
    done = threading.Event()

    def problem(text: str) -> None:
        with lock:
            result.problems.append(text)

    def writer(w: int) -> None:
        wr = random.Random(seed * 1000 + w)
        for i in range(turns):
            user = wr.choice(USERS)
            key = f"{seed}-{w}-{i}"
            started = time.monotonic()
            for _attempt in range(20):
                try:
                    mem.add_turn(user, f"turn k={key} from writer {w}", f"noted {i}",
                                 turn_key=key)
                except Overloaded:
                    time.sleep(wr.random() * 0.01)
                    continue
                except Exception as exc:  # noqa: BLE001 - every other error is a finding
                    problem(f"add_turn({user}) raised {exc!r}")
                    with lock:
                        unknown.add(key)
                    break
                with lock:
                    acks.append(Ack(key, user, started, time.monotonic()))
                break
            else:
                with lock:
                    unknown.add(key)
            if wr.random() < 0.2:
                try:
                    mem.retrieve(user, "what did I say")
                except (Overloaded, UnknownUser):
                    pass  # UnknownUser: a forget left the user without data, as it may
                except Exception as exc:  # noqa: BLE001
                    problem(f"retrieve({user}) raised {exc!r}")

    def lifecycle() -> None:
        exports: list[Path] = []
        while not done.is_set() and sum(result.ops.values()) < ops:
            op = rng.choice(("forget", "passivate", "export", "import", "pause"))
            user = rng.choice(USERS)
            try:
                if op == "forget":
                    t0 = time.monotonic()
                    mem.forget_user(user)
                    with lock:
                        forgets[user].append((t0, time.monotonic()))
                elif op == "passivate":
                    mem.passivate(user)
                elif op == "export":
                    path = root / f"export-{len(exports) + 1}.json"
                    try:
                        mem.export_user(user, path)
                    except UnknownUser:
                        op = "export_no_data"  # forgotten, or not written yet: the right answer
                    else:
                        exports.append(path)
                elif op == "import" and exports:
                    path = rng.choice(exports)
                    exported = frozenset(_KEY.findall(path.read_text("utf-8")))
                    t0 = time.monotonic()
                    mem.forget_user("imp")  # make room; writers may still beat the import
                    with lock:
                        forgets["imp"].append((t0, time.monotonic()))
                    t0 = time.monotonic()
                    try:
                        mem.import_user(path, "imp")
                    except InvalidInput:
                        op = "import_refused"  # "imp" has data: the right answer
                    else:
                        with lock:
                            imports.append((t0, time.monotonic(), exported))
                else:
                    time.sleep(rng.random() * 0.02)
                    op = "pause"
            except Overloaded as exc:
                op += "_overloaded"
                if os.environ.get("LIFECYCLE_DEBUG"):
                    print(f"{op}({user}): {exc}", flush=True)
            except Exception as exc:  # noqa: BLE001
                problem(f"{op}({user}) raised {exc!r}")
            with lock:
                result.ops[op] += 1
            time.sleep(rng.random() * 0.01)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    life = threading.Thread(target=lifecycle)
    try:
        for t in threads:
            t.start()
        life.start()
        for t in threads:
            t.join()
        done.set()
        life.join()
        result.activation_ms = list(mem._activation_ms)  # noqa: SLF001 - bench reads samples
    finally:
        mem.close()
    result.acked = len(acks)

    mem = MemoryOS.open(root / "data", _config(overload_s), clock=ManualClock(1.8e9))
    try:
        _check(mem, result, acks, forgets, imports, unknown)
    finally:
        mem.close()
    return result


def _check(mem: MemoryOS, result: TrialResult, acks: list[Ack],
           forgets: dict[str, list[tuple[float, float]]],
           imports: list[tuple[float, float, frozenset[str]]], unknown: set[str]) -> None:
    by_user: dict[str, list[Ack]] = {u: [] for u in USERS}
    for ack in acks:
        by_user[ack.user].append(ack)
    imported_any = frozenset().union(*(keys for _s, _e, keys in imports))
    for user in USERS:
        try:
            stored = Counter(stored_keys(mem, user)) if user in mem.users() else Counter()
        except Exception as exc:  # noqa: BLE001
            result.problems.append(f"reading {user} after reopen raised {exc!r}")
            continue
        for key, n in stored.items():
            if n > 1:
                result.problems.append(f"{user}: turn {key} stored {n} times")
        mine = {a.key for a in by_user[user]}
        for ack in by_user[user]:
            windows = forgets[user]
            # An export of "imp" imported back into "imp" rightly brings its turns back.
            reimported = user == "imp" and ack.key in imported_any
            must_be_gone = not reimported and any(ack.acked < start for start, _end in windows)
            must_stay = all(end < ack.started for _start, end in windows)
            if must_be_gone and stored[ack.key]:
                result.problems.append(f"{user}: forgotten turn {ack.key} reappeared")
            if must_stay and not must_be_gone and not stored[ack.key]:
                result.problems.append(f"{user}: acknowledged turn {ack.key} is missing")
        allowed = mine | unknown | (imported_any if user == "imp" else frozenset())
        for key in stored:
            if key not in allowed:
                result.problems.append(f"{user}: turn {key} stored but never sent to it")
        try:  # no user is left unusable
            mem.add_turn(user, "still there?", "yes")
            mem.retrieve(user, "still there")
        except Exception as exc:  # noqa: BLE001
            result.problems.append(f"{user} unusable after the trial: {exc!r}")


def _pct(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1))))]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--writers", type=int, default=3)
    p.add_argument("--turns", type=int, default=40, help="turns per writer per trial")
    p.add_argument("--ops", type=int, default=12, help="lifecycle operations per trial")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = p.parse_args(argv)
    failed: list[TrialResult] = []
    ops: Counter[str] = Counter()
    acked = 0
    activation: list[float] = []
    t0 = time.perf_counter()
    for i in range(args.trials):
        with tempfile.TemporaryDirectory(prefix="memoryos-lifecycle-") as tmp:
            res = run_trial(Path(tmp), args.seed + i, writers=args.writers, turns=args.turns,
                            ops=args.ops)
        ops.update(res.ops)
        acked += res.acked
        activation.extend(res.activation_ms)
        if res.problems:
            failed.append(res)
            print(f"trial {i} (seed {res.seed}): {res.problems[:3]}", flush=True)
        if (i + 1) % 20 == 0:
            print(f"{i + 1} trials, {len(failed)} with problems", flush=True)
    result: dict[str, Any] = {
        "bench": "lifecycle",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "command": "python bench/lifecycle_bench.py " + " ".join(sys.argv[1:]),
        "trials": args.trials,
        "trials_with_problems": len(failed),
        "first_problems": {str(r.seed): r.problems[:5] for r in failed[:10]},
        "acknowledged_turns": acked,
        "lifecycle_ops": dict(sorted(ops.items())),
        "activations": len(activation),
        "activation_ms_p50": _pct(activation, 50),
        "activation_ms_p90": _pct(activation, 90),
        "activation_ms_p99": _pct(activation, 99),
        "activation_ms_max": max(activation, default=0.0),
        "seconds": time.perf_counter() - t0,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "lifecycle.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
