"""The ``memoryos`` command.

``memoryos demo`` runs a scripted multi-user conversation offline; the other subcommands
work on a data directory (``--data-dir``, or ``MEMORYOS_DATA_DIR``, default
``./memoryos-data``): ``chat``, ``ingest``, ``inspect``, ``stats``, ``export``, ``import``,
``forget``; ``bench`` runs the benchmarks in the repository's ``bench/`` folder.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]

_DEFAULT_DATA_DIR = "memoryos-data"


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get("MEMORYOS_DATA_DIR") or _DEFAULT_DATA_DIR)


def _config(args: argparse.Namespace, **overrides: Any) -> Any:
    from .config import MemoryConfig

    cfg = MemoryConfig.load(getattr(args, "config", None))
    if getattr(args, "model", None):
        overrides.setdefault("llm_backend", "litellm")
        overrides.setdefault("llm_model", args.model)
    if getattr(args, "base_url", None):
        overrides["llm_base_url"] = args.base_url
    return cfg.evolve(**overrides) if overrides else cfg


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False)


# -- demo -------------------------------------------------------------------------------------

_DEMO_SCRIPT: dict[str, list[tuple[str, str]]] = {
    "alice": [
        ("Hi! I'm Alice, I work as a nurse at the city hospital.",
         "Nice to meet you, Alice. Nursing is demanding work."),
        ("I love hiking in the mountains on my days off.",
         "Mountain hikes are a great way to recover from hospital shifts."),
        ("Last weekend I hiked the Eagle Ridge trail with my sister.",
         "Eagle Ridge has wonderful views. How long did the hike take?"),
        ("The hike took six hours, my boots gave me blisters.",
         "Six hours is long; good hiking boots matter on that trail."),
        ("I want to buy new hiking boots before the next mountain trip.",
         "Look for waterproof hiking boots with good ankle support."),
        ("Which hiking boots are good for rocky mountain trails?",
         "Stiff-soled hiking boots work best on rocky mountain trails."),
        ("I think I'll plan a mountain hike to Lake Crest in June.",
         "Lake Crest in June should have snow-free mountain trails."),
        ("My night shifts at the hospital start again next week.",
         "Night shifts are tiring; keep a steady sleep routine."),
        ("I usually drink green tea during night shifts at the hospital.",
         "Green tea gives a gentle lift without much jitter."),
        ("The hospital is short of nurses this winter.",
         "Staff shortages make nursing shifts much harder."),
        ("I'm learning Spanish to talk with more of my patients.",
         "Learning Spanish will help with many patients."),
        ("My Spanish teacher says my pronunciation improved.",
         "Practising Spanish pronunciation daily pays off."),
        ("I practise Spanish vocabulary every evening for twenty minutes.",
         "Twenty minutes of Spanish vocabulary a day is a good habit."),
        ("Can you recommend Spanish podcasts for learners?",
         "Slow-news Spanish podcasts are made for learners."),
        ("I want to take a Spanish exam next spring.",
         "A Spanish exam next spring gives your study a clear goal."),
        ("Back to hiking: should I bring poles to Lake Crest?",
         "Trekking poles help on steep mountain descents like Lake Crest."),
    ],
    "bob": [
        ("I'm Bob. I'm a software engineer and I love cooking Italian food.",
         "Hello Bob! Italian cooking is a great hobby for an engineer."),
        ("My favourite dish to cook is risotto with mushrooms.",
         "Mushroom risotto rewards patience and good stock."),
        ("I make my own chicken stock for the risotto every Sunday.",
         "Home-made stock makes a big difference in risotto."),
        ("My risotto came out gluey last time I cooked it.",
         "Gluey risotto often means too much stirring or overcooked rice."),
        ("I'm debugging a memory leak in our Python service at work.",
         "Tracemalloc snapshots help find Python memory leaks."),
        ("The memory leak only shows up under heavy load in production.",
         "Load-only leaks often come from caches without bounds."),
        ("We found the leak: an unbounded cache in the request handler.",
         "Bounding the cache with an LRU policy should fix the leak."),
        ("My daughter Mia turns seven next month.",
         "Seven is a fun age. Are you planning a party for Mia?"),
        ("Mia wants a dinosaur birthday party.",
         "A dinosaur party with a fossil dig game would delight Mia."),
        ("Should I cook pasta for the kids at Mia's party?",
         "Simple tomato pasta is a safe choice for a kids' party."),
        ("I'm thinking of making fresh pasta by hand for the party.",
         "Fresh pasta by hand is fun; kids can help roll it."),
        ("How thin should I roll fresh pasta dough?",
         "Roll fresh pasta dough until you can nearly see your hand through it."),
    ],
    "chen": [
        ("I'm Chen, a graduate student in astronomy.",
         "Hi Chen! What part of astronomy do you study?"),
        ("I study exoplanet atmospheres with telescope spectra.",
         "Exoplanet atmosphere spectra are a fascinating field."),
        ("My telescope observing run got cancelled because of clouds.",
         "Clouds are the bane of every observing run."),
        ("I'm writing my thesis chapter on exoplanet spectra this month.",
         "Good luck with the thesis chapter on exoplanet spectra."),
        ("I play the violin in a student orchestra on weekends.",
         "Orchestra practice is a nice balance to thesis writing."),
        ("Our orchestra performs Dvorak's ninth symphony in May.",
         "Dvorak's ninth symphony is a wonderful piece to perform."),
        ("I'm nervous about the violin solo passage in the symphony.",
         "Slow practice of the violin solo passage builds confidence."),
        ("My thesis advisor wants the exoplanet chapter by Friday.",
         "A Friday deadline for the chapter; plan the figures first."),
        ("Do you have tips for plotting telescope spectra clearly?",
         "Plot spectra with shaded error bands and labelled absorption lines."),
        ("The orchestra rehearsal for the symphony is on Thursday.",
         "Thursday's symphony rehearsal is a good test for the violin solo."),
    ],
}


def _demo(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.tree import Tree

    import supervisor

    from .actors.base import actor_names
    from .clock import ManualClock
    from .messages import AgentProfile, UserProfile
    from .system import MemoryOS

    console = _console()
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="memoryos-demo-")
        data_dir = Path(tmp.name)
    cfg = _config(args, heat_tick_seconds=3600.0)
    clock = ManualClock(1_700_000_000.0)
    console.rule("[bold]memoryos-actors demo[/bold] (offline: extractive LLM, hashing embedder)")
    console.print(f"data directory: {data_dir}")
    try:
        with MemoryOS.open(data_dir, cfg, clock=clock) as mem:
            mem.set_user_profile("alice", UserProfile(name="Alice", gender="female"))
            mem.set_agent_profile("alice", AgentProfile(role="assistant",
                                                        character="warm and practical"))
            # Interleave users, as a bot serving several people at once would.
            longest = max(len(turns) for turns in _DEMO_SCRIPT.values())
            t0 = time.perf_counter()
            n = 0
            for i in range(longest):
                for user, turns in _DEMO_SCRIPT.items():
                    if i < len(turns):
                        q, r = turns[i]
                        clock.advance(90.0)
                        mem.add_turn(user, q, r)
                        n += 1
            add_s = time.perf_counter() - t0
            mem.flush()
            console.print(
                f"\nstored {n} turns for {len(_DEMO_SCRIPT)} users in {add_s * 1000:.1f} ms "
                f"({add_s / n * 1e6:.0f} µs per add_turn, acknowledged after the WAL append)"
            )
            # Retrieval visits segments (N_visit rises), which heats them toward promotion.
            for _ in range(3):
                mem.retrieve("alice", "What hiking boots and mountain trip did I plan?")
                clock.advance(60.0)
            mem.flush()
            for user in _DEMO_SCRIPT:
                _show_user(console, mem, user, Table)
            console.rule("retrieval with provenance")
            query = "Which mountain trip am I planning and what gear do I need?"
            ctx = mem.retrieve("alice", query)
            console.print(f"[bold]alice asks:[/bold] {query}")
            table = Table("tier", "item", "score", "why", "text", show_lines=False)
            for item in (*ctx.mtm, *ctx.kb, *ctx.stm[-2:]):
                table.add_row(item.tier, item.item_id, f"{item.score:.3f}", item.why,
                              item.text[:70].replace("\n", " "))
            console.print(table)
            console.print(f"retrieval took {ctx.elapsed_ms:.2f} ms")
            reply = mem.chat("alice", "Remind me what I wanted to buy for hiking?")
            console.print(f"[bold]chat reply (offline template):[/bold] {reply}")
            # Fault injection: kill alice's MTM actor; the supervisor restarts it and it
            # rebuilds from snapshot + WAL, so nothing acknowledged is lost.
            console.rule("fault injection")
            before = mem.stats("alice")
            mtm_name = actor_names("alice")[1]
            old_ref = mem.registry.require(mtm_name)
            supervisor.kill(old_ref, "demo: injected crash")
            deadline = time.monotonic() + 5.0
            while mem.registry.lookup(mtm_name) in (None, old_ref):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
            mem.flush()
            after = mem.stats("alice")
            console.print(
                f"killed alice's MTM actor; restarted: "
                f"{mem.registry.lookup(mtm_name) not in (None, old_ref)}; "
                f"turns {before['turns']} -> {after['turns']}, MTM pages "
                f"{before['mtm_pages']} -> {after['mtm_pages']}, STM pages "
                f"{before['stm_pages']} -> {after['stm_pages']}"
            )
            tree = Tree("supervision tree")
            for line in mem.tree().splitlines():
                tree.add(line)
            console.print(tree)
            g = mem.stats()["gateway"]
            console.print(f"gateway: {json.dumps(_gateway_summary(g))}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


def _gateway_summary(stats: dict[str, Any]) -> dict[str, Any]:
    keep = ("backend", "calls", "llm_calls", "degraded", "cache_hits", "embed_batches")
    return {k: stats[k] for k in keep if k in stats}


def _show_user(console: Any, mem: Any, user: str, table_cls: Any) -> None:
    state = mem.user_state(user)
    stm = state["stm"]["stm"]["pages"] if "stm" in state["stm"] else state["stm"]["pages"]
    segs = state["mtm"]["segments"]
    console.rule(f"user {user}")
    console.print(f"STM: {len(stm)} pages (the most recent turns)")
    table = table_cls("segment", "pages", "heat", "N_visit", "L_interaction", "keywords",
                      "summary")
    clock_now = mem.clock.now()
    for seg in sorted(segs, key=lambda s: -_heat(mem, s, clock_now))[:6]:
        table.add_row(
            str(seg["segment_id"]), str(len(seg["pages"])), f"{_heat(mem, seg, clock_now):.2f}",
            str(seg["n_visit"]), str(seg["l_interaction"]),
            ", ".join(sorted(seg["keywords"])[:5]), str(seg.get("summary", ""))[:50],
        )
    console.print(table)
    lpm = state["lpm"]
    facts = [f["text"] for f in lpm.get("kb", [])]
    traits = [f"{t['name']}={t['level']}" for t in lpm.get("traits", []) if t.get("level")]
    console.print(f"LPM facts: {facts[:6]}")
    console.print(f"LPM traits: {traits[:8]}")


def _heat(mem: Any, seg: dict[str, Any], now: float) -> float:
    from .scoring import heat

    c = mem.config
    return heat(int(seg["n_visit"]), int(seg["l_interaction"]), float(seg["last_access"]), now,
                c.heat_alpha, c.heat_beta, c.heat_gamma, c.recency_mu)


# -- chat / ingest / inspect ----------------------------------------------------------------


def _chat(args: argparse.Namespace) -> int:
    from .system import MemoryOS

    console = _console()
    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        console.print(f"chatting as {args.user!r} ({mem.gateway_service.stats().get('backend')});"
                      " empty line or Ctrl-D to quit")
        while True:
            try:
                line = input("> ")
            except EOFError:
                break
            if not line.strip():
                break
            console.print(mem.chat(args.user, line))
    return 0


def _iter_turns(path: Path) -> Iterator[tuple[str, str, str, float | None]]:
    """Turns of a LoCoMo JSON file or a JSONL file of ``{user_id, query, response, timestamp}``."""
    if path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    yield (str(rec["user_id"]), str(rec.get("query", "")),
                           str(rec.get("response", "")), rec.get("timestamp"))
                except (ValueError, KeyError, TypeError) as exc:
                    raise SystemExit(f"{path}:{n}: not a turn record ({exc})") from None
        return
    sys.path.insert(0, str(_bench_dir()))
    try:
        from locomo import load_conversations  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    for conv in load_conversations(path):
        for page in conv.pages:
            yield conv.sample_id, page.query, page.response, page.timestamp


def _ingest(args: argparse.Namespace) -> int:
    from rich.progress import track

    from .system import MemoryOS

    path = Path(args.file)
    turns = list(_iter_turns(path))
    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        t0 = time.perf_counter()
        for user, q, r, ts in track(turns, description="ingesting", console=_console()):
            if q or r:
                mem.add_turn(user, q, r, timestamp=ts)
        mem.flush()
        dt = time.perf_counter() - t0
    print(f"ingested {len(turns)} turns in {dt:.2f} s ({len(turns) / max(dt, 1e-9):.0f} turns/s)")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from rich.table import Table

    from .system import MemoryOS

    console = _console()
    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        _show_user(console, mem, args.user, Table)
        st = mem.stats(args.user)
        console.print(json.dumps({k: v for k, v in st.items() if k != "gateway"}))
    return 0


def _stats(args: argparse.Namespace) -> int:
    from .system import MemoryOS

    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        st = mem.stats(args.user) if args.user else mem.stats()
        st["users"] = len(mem.users())
    if args.prometheus:
        sys.stdout.write(_prometheus(st))
    else:
        print(json.dumps(st, indent=2, default=str))
    return 0


def _prometheus(stats: dict[str, Any], prefix: str = "memoryos") -> str:
    """Render numeric leaves of ``stats`` as Prometheus text exposition format."""
    lines: list[str] = []

    def walk(obj: Any, name: str) -> None:
        if isinstance(obj, bool):
            obj = int(obj)
        if isinstance(obj, (int, float)):
            lines.append(f"# TYPE {name} gauge")
            lines.append(f"{name} {obj}")
        elif isinstance(obj, dict):
            for key, value in obj.items():
                safe = "".join(ch if ch.isalnum() else "_" for ch in str(key))
                walk(value, f"{name}_{safe}")

    walk(stats, prefix)
    return "\n".join(lines) + "\n"


def _export(args: argparse.Namespace) -> int:
    from .system import MemoryOS

    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        out = mem.export_user(args.user, args.file)
    print(f"exported {args.user!r} to {out}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from .system import MemoryOS

    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        uid = mem.import_user(args.file, user_id=args.as_user)
    print(f"imported {args.file} as user {uid!r}")
    return 0


def _forget(args: argparse.Namespace) -> int:
    from .system import MemoryOS

    with MemoryOS.open(_data_dir(args), _config(args)) as mem:
        report = mem.forget_user(args.user)
    print(f"forgot {args.user!r}: removed {len(report.removed_files)} files")
    for path in report.removed_files:
        print(f"  {path}")
    return 0


# -- bench --------------------------------------------------------------------------------------


def _bench_dir() -> Path:
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (base / "bench").is_dir():
            return base / "bench"
    raise SystemExit("bench/ not found: run `memoryos bench` from a checkout of the repository")


_BENCHES = {"throughput": "throughput", "locomo": "locomo", "scale": "scale_bench",
            "crash": "crash_bench", "supervisor": "supervisor_bench", "gateway": "gateway_bench"}


def _bench(args: argparse.Namespace) -> int:
    bench = _bench_dir()
    script = bench / f"{_BENCHES[args.which]}.py"
    if not script.exists():
        raise SystemExit(f"{script} is missing")
    sys.argv = [str(script), *args.rest]
    sys.path.insert(0, str(bench))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memoryos", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", help="data directory (default: $MEMORYOS_DATA_DIR or "
                   "./memoryos-data; demo: a temporary directory)")
    p.add_argument("--config", help="TOML file with MemoryConfig fields")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="scripted multi-user conversation, offline")
    c = sub.add_parser("chat", help="interactive chat with memory")
    c.add_argument("--user", required=True)
    c.add_argument("--model", help="any litellm model name (default: offline)")
    c.add_argument("--base-url", help="OpenAI-compatible base URL for --model")
    i = sub.add_parser("ingest", help="ingest a LoCoMo JSON or a JSONL file of turns")
    i.add_argument("file")
    n = sub.add_parser("inspect", help="show a user's tiers, segments by heat, traits, KB")
    n.add_argument("user")
    s = sub.add_parser("stats", help="counters as JSON or Prometheus text")
    s.add_argument("--user")
    s.add_argument("--prometheus", action="store_true")
    e = sub.add_parser("export", help="export a user to a file (.json or msgpack)")
    e.add_argument("user")
    e.add_argument("file")
    m = sub.add_parser("import", help="import a user from an export file")
    m.add_argument("file")
    m.add_argument("--as", dest="as_user", help="store under this user id")
    f = sub.add_parser("forget", help="delete every file of a user")
    f.add_argument("user")
    b = sub.add_parser("bench", help="run a benchmark from bench/")
    b.add_argument("which", choices=sorted(_BENCHES))
    b.add_argument("rest", nargs=argparse.REMAINDER)
    return p


_COMMANDS = {"demo": _demo, "chat": _chat, "ingest": _ingest, "inspect": _inspect,
             "stats": _stats, "export": _export, "import": _import, "forget": _forget,
             "bench": _bench}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memoryos`` command; returns the exit code."""
    args = _parser().parse_args(argv)
    from .errors import MemoryOSError

    try:
        return _COMMANDS[args.command](args)
    except MemoryOSError as exc:
        print(f"memoryos: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
