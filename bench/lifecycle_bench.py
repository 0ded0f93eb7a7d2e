"""Lifecycle races at scale: writers against forget, import, export, passivate, flush and
the janitor, while other threads flood other users.

Each trial opens a fresh data directory with few live groups and a short idle timeout (so
LRU passivation and the idle janitor run all the time), then races:

* writer threads storing turns for a few users (each turn has its own ``turn_key``; a call
  that ends in ``Overloaded`` is retried with the same key), with a ledger of every
  acknowledged turn and when its call started and ended;
* flood threads (``--flooders``, 2 by default), each writing turns for its own user as
  fast as it can for the whole trial, with a ledger too;
* one lifecycle thread doing, at random, ``forget_user``, ``passivate``, ``export_user`` and
  ``import_user`` (of an export, into a user the writers also write to) on the same users,
  ``export_user`` of a flooded user (a user being written) and of an idle one, and
  ``flush()``; each operation is timed.

Then the system is closed and reopened, and every user is checked against the ledger:
every acknowledged turn that no forget could have removed is stored exactly once; no turn
acknowledged before a forget began is stored; nothing is stored twice; every imported
turn came from the export it was imported from; every flooded turn is stored exactly once
and an export of a flooded user holds every turn acknowledged before the export began;
no call ended in an error other than ``Overloaded`` (and the expected ``InvalidInput`` of
an import over existing data); and every user accepts a turn and a retrieval afterwards. A
trial with any such problem counts as failed.

Then the latency rounds (``--latency-rounds``): one system with the default configuration
(a race trial's two live groups and 2 s overload timeout measure the races, not these
operations), the same flood threads, one more thread writing a "user being written" at a
steady 20 turns a second, and rounds of ``export_user`` of an idle user, of the user being
written and of a flooded one, ``flush()``, ``passivate`` and ``forget_user``, one after
another, each timed (an attempt that ends in ``Overloaded`` too), then a reopen and the
writers' ledger check.

    python bench/lifecycle_bench.py --trials 200
    python bench/lifecycle_bench.py --trials 0 --latency-rounds 30   # the timed rounds only

Results go to ``bench/results/lifecycle.json``: trials with a problem (target 0), the
problems of the first ones, operation counts and latency percentiles (ms) of the race
trials, and of the latency rounds: each operation's p50 / p95 / p99 / max, the flood
threads' ``add_turn`` percentiles, and the targets of issue 23 with 2 flood threads:
``export_user`` of an idle user p99 <= 1 s, of a user being written p99 <= 2 s,
``flush()`` p99 <= 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir, run_header  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryos_actors import ManualClock, MemoryConfig, MemoryOS  # noqa: E402
from memoryos_actors.errors import InvalidInput, Overloaded, UnknownUser  # noqa: E402

#: The users writers write to; the last one is also where exports are imported.
USERS = ("ann", "bob", "cid", "imp")
#: A user with a few turns that nobody writes to during a trial (exported as "idle").
IDLE = "idle"
IDLE_TURNS = 5
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
    #: Milliseconds each completed lifecycle operation took, by operation.
    op_ms: dict[str, list[float]] = field(default_factory=dict)
    #: Milliseconds of each acknowledged add_turn of the flood threads.
    flood_ms: list[float] = field(default_factory=list)
    flooded: int = 0


def _config(overload_s: float, flooders: int = 0) -> MemoryConfig:
    """The race configuration: two live groups for the racing users, and one more for each
    flooded user (a user with calls in flight is never passivated to make room, so a
    flooded user would keep its slot for the whole trial)."""
    return MemoryConfig(
        stm_capacity=3,
        mtm_capacity=4,
        segment_max_pages=3,
        heat_tick_seconds=0.05,
        summary_debounce_seconds=0.01,
        snapshot_every_turns=7,
        fsync="never",
        log_level="critical",
        max_active_users=2 + flooders,
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


class Flood:
    """Threads each writing turns for its own user as fast as they are taken (or one every
    ``pause`` seconds), until stopped, with a ledger: the keys of the acknowledged turns
    per user in order, the keys whose call ended without an answer, each acknowledged
    ``add_turn``'s latency (ms), and any error other than ``Overloaded`` (a problem)."""

    def __init__(
        self, mem: MemoryOS, tag: str, threads: int, prefix: str = "flood", pause: float = 0.0
    ) -> None:
        self.mem = mem
        self.tag = tag
        self.pause = pause
        self.users = [f"{prefix}{f}" for f in range(threads)]
        self.acks: dict[str, list[str]] = {u: [] for u in self.users}
        self.unknown: set[str] = set()
        self.ms: list[float] = []
        self.problems: list[str] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._write, args=(u,), name=f"flood-{u}") for u in self.users
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def acked(self, user: str) -> set[str]:
        """Keys of ``user``'s turns acknowledged so far."""
        with self.lock:
            return set(self.acks[user])

    def _write(self, user: str) -> None:
        i = 0
        while not self._stop.is_set():
            key = f"{self.tag}-{user}-{i}"
            for _attempt in range(20):
                started = time.perf_counter()
                try:
                    self.mem.add_turn(user, f"flood k={key}", "ok", turn_key=key)
                except Overloaded:
                    continue
                except Exception as exc:  # noqa: BLE001 - every other error is a finding
                    with self.lock:
                        self.problems.append(f"add_turn({user}) raised {exc!r}")
                        self.unknown.add(key)
                    return
                with self.lock:
                    self.ms.append((time.perf_counter() - started) * 1000.0)
                    self.acks[user].append(key)
                break
            else:
                with self.lock:
                    self.unknown.add(key)
            i += 1
            if self.pause:
                self._stop.wait(self.pause)


def run_trial(
    root: Path,
    seed: int,
    *,
    writers: int = 3,
    turns: int = 40,
    ops: int = 12,
    overload_s: float = 2.0,
    flooders: int = 2,
) -> TrialResult:
    """One race trial in the empty directory ``root`` (see the module docstring)."""
    rng = random.Random(seed)
    result = TrialResult(seed)
    lock = threading.Lock()
    acks: list[Ack] = []
    forgets: dict[str, list[tuple[float, float]]] = {u: [] for u in USERS}
    imports: list[tuple[float, float, frozenset[str]]] = []
    # Keys whose call ended without an answer: each may be stored at most once.
    unknown: set[str] = set()
    mem = MemoryOS.open(root / "data", _config(overload_s, flooders), clock=ManualClock(1.7e9))
    flood = Flood(mem, str(seed), flooders)
    for i in range(IDLE_TURNS):
        mem.add_turn(IDLE, f"idle turn k={seed}-idle-{i}", "noted", turn_key=f"idle-{i}")
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
                    mem.add_turn(user, f"turn k={key} from writer {w}", f"noted {i}", turn_key=key)
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

    def timed(op: str, started: float) -> None:
        with lock:
            result.op_ms.setdefault(op, []).append((time.perf_counter() - started) * 1000.0)

    def lifecycle() -> None:
        exports: list[Path] = []
        choices = ("forget", "passivate", "export", "import", "pause", "flush", "export_idle")
        if flood.users:
            choices += ("export_busy",)
        while not done.is_set() and sum(result.ops.values()) < ops:
            op = rng.choice(choices)
            user = rng.choice(USERS)
            started = time.perf_counter()
            try:
                if op == "flush":
                    mem.flush()
                    timed(op, started)
                elif op == "export_idle":
                    mem.export_user(IDLE, root / "export-idle.json")
                    timed(op, started)
                    keys = _KEY.findall((root / "export-idle.json").read_text("utf-8"))
                    if len(set(keys)) != IDLE_TURNS:
                        problem(
                            f"export of {IDLE} holds {len(set(keys))} of its {IDLE_TURNS} turns"
                        )
                elif op == "export_busy":
                    user = rng.choice(flood.users)
                    before = flood.acked(user)
                    path = root / f"export-{user}.json"
                    mem.export_user(user, path)
                    timed(op, started)
                    missing = before - set(_KEY.findall(path.read_text("utf-8")))
                    if missing:
                        problem(
                            f"export of {user} lacks {len(missing)} turns acknowledged "
                            f"before it, e.g. {sorted(missing)[:3]}"
                        )
                elif op == "forget":
                    t0 = time.monotonic()
                    mem.forget_user(user)
                    timed(op, started)
                    with lock:
                        forgets[user].append((t0, time.monotonic()))
                elif op == "passivate":
                    mem.passivate(user)
                    timed(op, started)
                elif op == "export":
                    path = root / f"export-{len(exports) + 1}.json"
                    try:
                        mem.export_user(user, path)
                    except UnknownUser:
                        op = "export_no_data"  # forgotten, or not written yet: the right answer
                    else:
                        timed(op, started)
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
        flood.start()
        for t in threads:
            t.start()
        life.start()
        for t in threads:
            t.join()
        # The flood goes on until the lifecycle thread has done its operations.
        while life.is_alive() and sum(result.ops.values()) < ops:
            life.join(0.05)
        done.set()
        life.join()
        flood.stop()
        result.activation_ms = mem._lifecycle.activation_samples()  # noqa: SLF001 - bench reads samples
    finally:
        mem.close()
    result.acked = len(acks)
    result.flooded = sum(len(v) for v in flood.acks.values())
    result.flood_ms = flood.ms
    result.problems.extend(flood.problems)

    mem = MemoryOS.open(root / "data", _config(overload_s, flooders), clock=ManualClock(1.8e9))
    try:
        _check(mem, result, acks, forgets, imports, unknown)
        _check_flood(mem, result.problems, flood.acks, flood.unknown)
    finally:
        mem.close()
    return result


def _check_flood(
    mem: MemoryOS, problems: list[str], flood_acks: dict[str, list[str]], unknown: set[str]
) -> None:
    """Every acknowledged flood turn is stored exactly once, and nothing else is."""
    for user, keys in flood_acks.items():
        try:
            stored = Counter(stored_keys(mem, user))
        except Exception as exc:  # noqa: BLE001
            problems.append(f"reading {user} after reopen raised {exc!r}")
            continue
        twice = [k for k, n in stored.items() if n > 1]
        missing = [k for k in keys if not stored[k]]
        acked = set(keys)  # once, not per stored key: a flooded user has ~10^5 turns
        foreign = [k for k in stored if k not in acked and k not in unknown]
        for what, found in (
            ("stored twice", twice),
            ("missing", missing),
            ("stored but never acknowledged", foreign),
        ):
            if found:
                problems.append(f"{user}: {len(found)} turns {what}, e.g. {found[:3]}")


def _check(
    mem: MemoryOS,
    result: TrialResult,
    acks: list[Ack],
    forgets: dict[str, list[tuple[float, float]]],
    imports: list[tuple[float, float, frozenset[str]]],
    unknown: set[str],
) -> None:
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


#: Issue 23's targets for the latency rounds: p99 of each operation, milliseconds.
TARGETS_P99_MS = {"export_idle": 1000.0, "export_busy": 2000.0, "flush": 2000.0}

#: Turns of the idle user in the latency rounds.
LATENCY_IDLE_TURNS = 50

#: The user being written in the latency rounds gets a turn every this many seconds.
BUSY_PAUSE_S = 0.05


def run_latency(
    root: Path, rounds: int, flooders: int, seed: int, round_seconds: float = 0.0
) -> dict[str, Any]:
    """Lifecycle operations one after another, timed, on a system with the default
    configuration while ``flooders`` threads flood their own users (see ``main``).

    A further thread writes one more user steadily (a turn every ``BUSY_PAUSE_S``), the
    "user being written". Each round runs, in random order: ``export_user`` of the idle
    user, of the user being written and of a flooded user (each export checked to hold
    every turn acknowledged before it), ``flush()``, ``passivate`` of a user written just
    before, and ``forget_user`` of one. Every attempt is timed, ``Overloaded`` ones too (and
    counted). After the rounds the system is reopened and every written turn checked to be
    stored exactly once.

    With ``round_seconds`` > 0, round ``r`` starts no earlier than ``r * round_seconds``
    after the first: the users' histories (which an export's size follows) then grow with
    the round number alone, not with how fast the operations ran, so two builds are
    compared at the same history.
    """
    rng = random.Random(seed)
    cfg = MemoryConfig(fsync="never", log_level="critical")
    problems: list[str] = []
    op_ms: dict[str, list[float]] = {}
    overloaded: Counter[str] = Counter()
    mem = MemoryOS.open(root / "data", cfg, clock=ManualClock(1.7e9))
    flood = Flood(mem, "lat", flooders)
    busy = Flood(mem, "lat", 1, prefix="busy", pause=BUSY_PAUSE_S)
    writers = {u: w for w in (flood, busy) for u in w.users}
    try:
        for i in range(LATENCY_IDLE_TURNS):
            mem.add_turn(IDLE, f"idle turn k=lat-idle-{i}", "noted")
        flood.start()
        busy.start()
        time.sleep(2.0)  # let the flood build its backlog before the first operation
        first = time.monotonic()
        for r in range(rounds):
            wait = first + r * round_seconds - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            order = ["export_idle", "export_busy", "export_flooded", "flush", "passivate", "forget"]
            if not flood.users:
                order.remove("export_flooded")
            rng.shuffle(order)
            for op in order:
                user = {
                    "export_idle": IDLE,
                    "passivate": "pas",
                    "forget": f"gone{r}",
                    "export_busy": busy.users[0],
                    "flush": "",
                    "export_flooded": rng.choice(flood.users) if flood.users else "",
                }[op]
                if op in ("passivate", "forget"):
                    for i in range(3):
                        mem.add_turn(user, f"turn {i} of {user}", "ok")
                before = writers[user].acked(user) if user in writers else set()
                path = root / f"export-{op}.json"
                started = time.perf_counter()
                try:
                    if op == "flush":
                        mem.flush()
                    elif op == "passivate":
                        mem.passivate(user)
                    elif op == "forget":
                        mem.forget_user(user)
                    else:
                        mem.export_user(user, path)
                except Overloaded:
                    overloaded[op] += 1
                    op_ms.setdefault(op, []).append((time.perf_counter() - started) * 1000.0)
                    continue
                except Exception as exc:  # noqa: BLE001 - every other error is a finding
                    problems.append(f"{op}({user}) raised {exc!r}")
                    continue
                op_ms.setdefault(op, []).append((time.perf_counter() - started) * 1000.0)
                if op.startswith("export"):
                    keys = set(_KEY.findall(path.read_text("utf-8")))
                    if op == "export_idle" and len(keys) != LATENCY_IDLE_TURNS:
                        problems.append(f"export of {IDLE} holds {len(keys)} of its turns")
                    if before - keys:
                        problems.append(
                            f"export of {user} lacks {len(before - keys)} turns "
                            "acknowledged before it"
                        )
    finally:
        flood.stop()
        busy.stop()
        mem.close()
    problems.extend(flood.problems + busy.problems)
    mem = MemoryOS.open(root / "data", cfg, clock=ManualClock(1.8e9))
    try:
        _check_flood(mem, problems, flood.acks, flood.unknown)
        _check_flood(mem, problems, busy.acks, busy.unknown)
    finally:
        mem.close()
    summary = {op: _summary(values) for op, values in sorted(op_ms.items())}
    return {
        "config": "MemoryConfig defaults, fsync=never",
        "rounds": rounds,
        "round_seconds": round_seconds,
        "flooders": flooders,
        "flooded_turns": sum(len(v) for v in flood.acks.values()),
        "busy_user_turns": sum(len(v) for v in busy.acks.values()),
        "busy_add_turn_ms": _summary(busy.ms),
        "op_ms": summary,
        "overloaded": dict(sorted(overloaded.items())),
        "flood_add_turn_ms": _summary(flood.ms),
        "targets_p99_ms": {
            op: {
                "target": target,
                "p99": summary.get(op, {}).get("p99"),
                "met": summary.get(op, {}).get("p99", float("inf")) <= target
                and not overloaded[op],
            }
            for op, target in TARGETS_P99_MS.items()
        },
        "problems": problems[:20],
    }


def _pct(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1))))]


def _summary(values: Sequence[float]) -> dict[str, float]:
    """Count and p50 / p95 / p99 / max of ``values`` (milliseconds)."""
    return {
        "n": len(values),
        "p50": round(_pct(values, 50), 2),
        "p95": round(_pct(values, 95), 2),
        "p99": round(_pct(values, 99), 2),
        "max": round(max(values, default=0.0), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--writers", type=int, default=3)
    p.add_argument("--turns", type=int, default=40, help="turns per writer per trial")
    p.add_argument("--ops", type=int, default=12, help="lifecycle operations per trial")
    p.add_argument(
        "--flooders",
        type=int,
        default=2,
        help="threads each flooding its own user with turns during a trial",
    )
    add_out_dir(p)
    p.add_argument("--name", default="lifecycle.json", help="result file name in --out-dir")
    p.add_argument(
        "--latency-rounds",
        type=int,
        default=60,
        help="rounds of timed operations under the flood, default configuration",
    )
    p.add_argument(
        "--round-seconds",
        type=float,
        default=0.0,
        help="start timed round r no earlier than r * this after the first "
        "(same history per round for an A/B; 0: back to back)",
    )
    args = p.parse_args(argv)
    failed: list[TrialResult] = []
    ops: Counter[str] = Counter()
    acked = 0
    flooded = 0
    activation: list[float] = []
    op_ms: dict[str, list[float]] = {}
    flood_ms: list[float] = []
    t0 = time.perf_counter()
    for i in range(args.trials):
        with tempfile.TemporaryDirectory(prefix="memoryos-lifecycle-") as tmp:
            res = run_trial(
                Path(tmp),
                args.seed + i,
                writers=args.writers,
                turns=args.turns,
                ops=args.ops,
                flooders=args.flooders,
            )
        ops.update(res.ops)
        acked += res.acked
        flooded += res.flooded
        activation.extend(res.activation_ms)
        flood_ms.extend(res.flood_ms)
        for op, values in res.op_ms.items():
            op_ms.setdefault(op, []).extend(values)
        if res.problems:
            failed.append(res)
            print(f"trial {i} (seed {res.seed}): {res.problems[:3]}", flush=True)
        if (i + 1) % 20 == 0:
            print(f"{i + 1} trials, {len(failed)} with problems", flush=True)
    latency: dict[str, Any] | None = None
    if args.latency_rounds > 0:
        load_before = os.getloadavg()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="memoryos-lifecycle-") as tmp:
            latency = run_latency(
                Path(tmp), args.latency_rounds, args.flooders, args.seed, args.round_seconds
            )
        # The machine is shared: the load average and this process's CPU time beside the
        # wall time say how much of it the rounds had.
        latency["seconds"] = round(time.perf_counter() - wall0, 1)
        latency["process_cpu_seconds"] = round(time.process_time() - cpu0, 1)
        latency["loadavg_1_5_15_before"] = [round(x, 2) for x in load_before]
        latency["loadavg_1_5_15_after"] = [round(x, 2) for x in os.getloadavg()]
    result: dict[str, Any] = {
        **run_header("lifecycle"),
        "trials": args.trials,
        "trials_with_problems": len(failed),
        "first_problems": {str(r.seed): r.problems[:5] for r in failed[:10]},
        "acknowledged_turns": acked,
        "flooders": args.flooders,
        "flooded_turns": flooded,
        "lifecycle_ops": dict(sorted(ops.items())),
        # The race trials' operations, completed ones only (those that ended in Overloaded
        # are counted in lifecycle_ops as "<op>_overloaded").
        "op_ms": {op: _summary(values) for op, values in sorted(op_ms.items())},
        "flood_add_turn_ms": _summary(flood_ms),
        "activations": len(activation),
        "activation_ms_p50": _pct(activation, 50),
        "activation_ms_p90": _pct(activation, 90),
        "activation_ms_p99": _pct(activation, 99),
        "activation_ms_max": max(activation, default=0.0),
        "latency": latency,
        "seconds": time.perf_counter() - t0,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / args.name).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if not failed and not (latency and latency["problems"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
