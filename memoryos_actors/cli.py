"""The ``memoryos`` command (also ``python -m memoryos_actors``).

``memoryos demo`` runs a scripted multi-user conversation offline; the other subcommands
work on a data directory (``--data-dir``, or ``MEMORYOS_DATA_DIR``, default
``./memoryos-data``): ``chat``, ``ingest``, ``inspect``, ``stats``, ``export``, ``import``,
``forget``; ``bench`` runs the benchmarks in the repository's ``bench/`` folder.

Exit codes: 0 success, 1 unexpected failure, 2 bad input (unknown user, malformed file,
locked or missing data directory, invalid configuration), 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import math
import os
import re
import runpy
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from .config import MemoryConfig
    from .system import MemoryOS, UserState

__all__ = ["main", "render_prometheus"]

_DEFAULT_DATA_DIR = "memoryos-data"
#: Widest output the CLI lays out for, in columns (tables stay readable on 80-100).
_MAX_WIDTH = 100


class _UsageError(Exception):
    """A problem with the command line itself (exit code 2, no traceback)."""


# -- shared helpers ------------------------------------------------------------------------


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(stderr=stderr, highlight=False, width=min(probe.width, _MAX_WIDTH))


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get("MEMORYOS_DATA_DIR") or _DEFAULT_DATA_DIR)


def _existing_data_dir(args: argparse.Namespace) -> Path:
    """The data directory for commands that only read or change existing data."""
    path = _data_dir(args)
    if not path.is_dir():
        raise _UsageError(f"no data directory at {path} (set --data-dir or MEMORYOS_DATA_DIR)")
    return path


def _config(args: argparse.Namespace, **overrides: Any) -> MemoryConfig:
    from .config import MemoryConfig

    cfg = MemoryConfig.load(getattr(args, "config", None))
    if getattr(args, "model", None):
        overrides.setdefault("llm_backend", "litellm")
        overrides.setdefault("llm_model", args.model)
    if getattr(args, "base_url", None):
        overrides["llm_base_url"] = args.base_url
    return cfg.evolve(**overrides) if overrides else cfg


def _quiet_logging(cfg: MemoryConfig) -> None:
    """Keep library and third-party logs at the configured level on stderr.

    pykka reports a crashed actor through the standard ``logging`` module with a traceback;
    the supervisor already restarts it and says so through structlog, so on the terminal
    the traceback is noise unless the user asked for debug output.
    """
    from .logs import configure_logging

    configure_logging(cfg.log_level, cfg.log_format, force=True)
    if cfg.log_level != "debug":
        logging.getLogger("pykka").setLevel(logging.CRITICAL)
    for noisy in ("LiteLLM", "litellm", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _open(args: argparse.Namespace, data_dir: Path, **overrides: Any) -> MemoryOS:
    from .system import MemoryOS

    cfg = _config(args, **overrides)
    _quiet_logging(cfg)
    return MemoryOS.open(data_dir, cfg)


def _require_user(mem: MemoryOS, user: str) -> None:
    from .errors import UnknownUser

    if user not in mem.users() and user not in mem.active_users():
        raise UnknownUser(f"no data for user {user!r} in {mem.data_dir}")


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _plain(text: str) -> Any:
    """User text as a rich ``Text``, so brackets in it are never read as markup."""
    from rich.text import Text

    return Text(text)


# -- showing a user ------------------------------------------------------------------------


def _show_user(
    console: Console,
    state: UserState,
    *,
    max_segments: int | None = 8,
    show_pages: bool = False,
    max_stm: int | None = 3,
) -> None:
    """Print a user's three tiers: STM pages, MTM segments by heat, LPM persona."""
    from rich.table import Table

    console.rule(f"[bold]user {state.user_id}[/bold]")
    mtm_pages = sum(len(seg.pages) for seg in state.segments)
    console.print(
        f"{_n(state.turns, 'turn')} stored: STM {_n(len(state.stm), 'page')} -> MTM "
        f"{_n(mtm_pages, 'page')} in {_n(len(state.segments), 'segment')} -> LPM "
        f"{_n(len(state.kb), 'fact')}, {_n(len(state.traits), 'trait')} "
        f"({_n(state.persona_updates, 'persona update')})"
    )

    stm = state.stm if max_stm is None else state.stm[-max_stm:]
    if stm:
        table = Table(title="STM (most recent pages)", title_justify="left", expand=True)
        table.add_column("page", no_wrap=True)
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("query / response", ratio=1, overflow="ellipsis", no_wrap=True)
        if len(stm) < len(state.stm):
            table.add_row("…", "", _plain(f"{len(state.stm) - len(stm)} older STM pages"))
        for page in stm:
            table.add_row(page.page_id, _when(page.timestamp),
                          _plain(_one_line(f"{page.query} / {page.response}", 200)))
        console.print(table)

    segments = state.segments if max_segments is None else state.segments[:max_segments]
    if segments:
        table = Table(title="MTM segments by heat", title_justify="left", expand=True)
        table.add_column("segment", no_wrap=True)
        table.add_column("pages", justify="right", no_wrap=True)
        table.add_column("heat", justify="right", no_wrap=True)
        table.add_column("N_visit", justify="right", no_wrap=True)
        table.add_column("L_interaction", justify="right", no_wrap=True)
        table.add_column("keywords", ratio=2, overflow="ellipsis", no_wrap=True)
        table.add_column("summary", ratio=3, overflow="ellipsis", no_wrap=True)
        for seg in segments:
            table.add_row(
                seg.segment_id, str(len(seg.pages)), f"{seg.heat:.2f}", str(seg.n_visit),
                str(seg.l_interaction), _plain(", ".join(sorted(seg.keywords)[:6])),
                _plain(_one_line(seg.summary, 200)),
            )
            if show_pages:
                for page in seg.pages:
                    table.add_row("", page.page_id, "", "", "", _when(page.timestamp),
                                  _plain(_one_line(f"{page.query} / {page.response}", 200)))
        if len(segments) < len(state.segments):
            table.caption = f"{len(state.segments) - len(segments)} cooler segments not shown"
        console.print(table)
    else:
        console.print("MTM: no segments yet (pages reach MTM when they leave STM)")

    profile = state.profile
    if not profile.is_empty():
        known = [f"{k}: {v}" for k, v in (("name", profile.name), ("gender", profile.gender),
                                          ("born", profile.birth_year)) if v is not None]
        known.extend(f"{k}: {v}" for k, v in profile.extras)
        console.print(_plain("LPM profile: " + ", ".join(known)))
    if state.kb:
        table = Table(title="LPM knowledge base (facts)", title_justify="left", expand=True)
        table.add_column("fact", no_wrap=True)
        table.add_column("from segment", no_wrap=True)
        table.add_column("text", ratio=1, overflow="fold")
        for entry in state.kb:
            table.add_row(entry.entry_id, entry.source_segment or "-", _plain(entry.text))
        console.print(table)
    if state.traits:
        table = Table(title="LPM traits", title_justify="left", expand=True)
        table.add_column("trait", no_wrap=True)
        table.add_column("category", no_wrap=True)
        table.add_column("level", no_wrap=True)
        table.add_column("evidence", ratio=1, overflow="ellipsis", no_wrap=True)
        for trait in state.traits:
            table.add_row(trait.name, trait.category, trait.level or "",
                          _plain(_one_line(trait.evidence, 200)))
        console.print(table)
    for assistant_id, persona in sorted(state.agents.items()):
        agent = persona.get("profile")
        traits = persona.get("traits", ())
        parts = []
        if agent is not None and not agent.is_empty():
            parts.append(f"role: {agent.role or '-'}, character: {agent.character or '-'}")
        if traits:
            parts.append("traits: " + "; ".join(t.text for t in traits))
        if parts:
            console.print(_plain(f"agent persona {assistant_id!r}: " + " | ".join(parts)))


def _show_context(console: Console, ctx: Any, max_rows: int = 4) -> None:
    """Print what a retrieval returned, one row per item, with its provenance."""
    from rich.table import Table
    from rich.text import Text

    table = Table(expand=True, show_lines=True)
    table.add_column("tier", no_wrap=True)
    table.add_column("item", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("text, and why it was chosen", ratio=1, overflow="fold")
    items = [*ctx.mtm[:max_rows], *ctx.kb[:2], *ctx.agent_traits[:2], *ctx.stm[-1:]]
    for item in items:
        label = item.item_id if item.segment_id is None else f"{item.item_id}@{item.segment_id}"
        cell = Text(_one_line(item.text, 70))
        cell.append("\n" + (item.why or "-"), style="dim")
        table.add_row(item.tier, label, f"{item.score:.3f}", cell)
    console.print(table)
    console.print(
        f"{_n(len(ctx.stm), 'STM page')}, {_n(len(ctx.mtm), 'MTM page')} from "
        f"{_n(len(ctx.segments), 'segment')}, {_n(len(ctx.kb), 'fact')}, "
        f"{_n(len(ctx.traits), 'trait')}; retrieval took {ctx.elapsed_ms:.2f} ms"
    )


def _show_tree(console: Console, text: str, title: str = "supervision tree") -> None:
    """Print ``MemoryOS.tree()`` text as a rich tree, restarts highlighted."""
    from rich.tree import Tree

    root = Tree(f"[bold]{title}[/bold]")
    lines = text.splitlines()
    if not lines:
        return
    stack: list[tuple[int, Tree]] = [(-1, root.add(_plain(lines[0])))]
    for line in lines[1:]:
        match = re.search(r"[├└]── ", line)
        if match is None:
            continue
        depth = match.start() // 4
        label = line[match.end():].replace(" [worker]", "").replace(" [supervisor]", "/")
        label = re.sub(r" name=\S+$", "", label)
        node_text = _plain(label)
        if re.search(r"restarts=[1-9]", label):
            node_text.stylize("bold yellow")
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else root
        stack.append((depth, parent.add(node_text)))
    console.print(root)


# -- demo ----------------------------------------------------------------------------------

# Three people talk to one assistant; each moves between a few topics, so pages group into
# several segments per user.
_DEMO_SCRIPT: dict[str, list[tuple[str, str]]] = {
    "alice": [
        ("Hi! I'm Alice, I work as a nurse at the city hospital.",
         "Nice to meet you, Alice. Nursing is demanding work."),
        ("I love hiking in the mountains on my days off.",
         "Mountain hikes are a great way to recover from hospital shifts."),
        ("Last weekend I hiked the Eagle Ridge trail with my sister.",
         "Eagle Ridge has wonderful views. How long did the hike take?"),
        ("The hike took six hours, my hiking boots gave me blisters.",
         "Six hours is long; good hiking boots matter on that trail."),
        ("I prefer light hiking boots with a wide toe box.",
         "Light hiking boots with a wide toe box should help with blisters."),
        ("Which hiking boots are good for rocky mountain trails?",
         "Stiff-soled hiking boots work best on rocky mountain trails."),
        ("I'm planning a mountain hike to Lake Crest in June.",
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

# Later in the day each user comes back with questions about an earlier topic. The
# application retrieves memory for each question (visiting, and so heating, the segments
# that answer it) and stores the turn with its reply; the next pages entering MTM make
# the heat check run, and segments whose heat passed τ are promoted to LPM.
_DEMO_FOLLOW_UPS: dict[str, list[tuple[str, str]]] = {
    "alice": [
        ("Which hiking boots should I buy before the Lake Crest hike?",
         "You prefer light hiking boots with a wide toe box; stiff soles suit rocky trails."),
        ("What gave me blisters on the Eagle Ridge hike?",
         "Your hiking boots gave you blisters on the six-hour Eagle Ridge hike."),
        ("I love planning mountain hikes; should I bring poles to Lake Crest?",
         "Trekking poles help on the steep mountain descents around Lake Crest."),
    ],
    "bob": [
        ("Why did my mushroom risotto come out gluey?",
         "Too much stirring or overcooked rice; your home-made stock is not the problem."),
        ("I enjoy cooking risotto on Sundays; which rice should I buy?",
         "Carnaroli or arborio rice hold their shape best in risotto."),
        ("What should I cook for Mia's dinosaur party?",
         "Simple fresh pasta that the kids help roll would suit Mia's party."),
    ],
    "chen": [
        ("When is the orchestra rehearsal for the symphony?",
         "The symphony rehearsal is on Thursday; it is a good test for your violin solo."),
        ("I really enjoy the violin; how do I calm my nerves for the solo?",
         "Slow practice of the solo passage and steady breathing build confidence."),
        ("When is my exoplanet thesis chapter due?",
         "Your advisor wants the exoplanet chapter by Friday."),
    ],
}

_DEMO_START = 1_700_000_000.0  # 2023-11-14 UTC; a fixed start makes the demo reproducible
_DEMO_TURN_GAP_S = 90.0


def _demo(args: argparse.Namespace) -> int:
    from rich.table import Table

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
    # Heat is driven by the demo's own inserts and retrievals; the wall-clock heat tick
    # would only add timing-dependent noise to a scripted run.
    cfg = _config(args, heat_tick_seconds=3600.0)
    _quiet_logging(cfg)
    clock = ManualClock(_DEMO_START)
    console.rule("[bold]memoryos-actors demo[/bold]")
    console.print(
        f"offline: {cfg.llm_backend} LLM backend, {cfg.embedder} embedder; "
        f"STM holds {cfg.stm_capacity} pages; a segment is promoted to LPM when its heat "
        f"passes τ = {cfg.promotion_threshold:g}"
    )
    console.print(_plain(f"data directory: {data_dir}"))
    try:
        with MemoryOS.open(data_dir, cfg, clock=clock) as mem:
            mem.set_user_profile("alice", UserProfile(name="Alice", gender="female"))
            mem.set_agent_profile(
                "alice", AgentProfile(role="personal assistant", character="warm and practical")
            )
            mem.set_user_profile("bob", UserProfile(name="Bob"))
            mem.set_user_profile("chen", UserProfile(name="Chen"))

            console.rule("1. conversation: pages enter STM, overflow into MTM segments")
            n, add_s = _demo_interleave(mem, clock, _DEMO_SCRIPT)
            mem.flush()
            console.print(
                f"stored {n} turns for {len(_DEMO_SCRIPT)} users (interleaved) in "
                f"{add_s * 1000:.0f} ms, {add_s / n * 1000:.2f} ms per add_turn "
                "(acknowledged once in the write-ahead log)"
            )
            before = {user: mem.user_state(user) for user in _DEMO_SCRIPT}
            table = Table("user", "turns", "STM pages", "MTM segments", "MTM pages",
                          "LPM facts", "hottest segment")
            for user, st in before.items():
                hot = st.segments[0] if st.segments else None
                table.add_row(user, str(st.turns), str(len(st.stm)), str(len(st.segments)),
                              str(sum(len(s.pages) for s in st.segments)), str(len(st.kb)),
                              f"{hot.segment_id} heat {hot.heat:.2f}" if hot else "-")
            console.print(table)

            console.rule("2. follow-up questions: retrieval visits segments and heats them")
            table = Table("user", "question", "best page", "segment", expand=True)
            table.columns[1].ratio = 1
            table.columns[1].overflow = "ellipsis"
            table.columns[1].no_wrap = True
            longest = max(len(turns) for turns in _DEMO_FOLLOW_UPS.values())
            for i in range(longest):
                for user, turns in _DEMO_FOLLOW_UPS.items():
                    if i >= len(turns):
                        continue
                    question, answer = turns[i]
                    clock.advance(_DEMO_TURN_GAP_S)
                    ctx = mem.retrieve(user, question)
                    best = ctx.mtm[0] if ctx.mtm else None
                    table.add_row(user, _plain(question), best.item_id if best else "-",
                                  (best.segment_id or "-") if best else "-")
                    mem.add_turn(user, question, answer)
            mem.flush()
            console.print(table)

            after = {user: mem.user_state(user) for user in _DEMO_SCRIPT}
            for user in _DEMO_SCRIPT:
                _show_user(console, after[user], max_segments=6, max_stm=2)

            console.rule("3. promotion: hot segments distilled into LPM")
            _demo_promotions(console, before, after, cfg.promotion_threshold)

            console.rule("4. retrieval with provenance")
            query = "Which mountain trip am I planning and what gear do I need?"
            clock.advance(_DEMO_TURN_GAP_S)
            ctx = mem.retrieve("alice", query)
            console.print(_plain(f"alice asks: {query}"))
            _show_context(console, ctx)
            console.print(
                "item [italic]page@segment[/italic]: an MTM page and its segment; "
                "[italic]fact@segment[/italic]: the promoted segment an LPM fact came from"
            )

            console.rule("5. fault injection: kill alice's MTM actor")
            _demo_fault(console, mem, supervisor, actor_names("alice")[1])
            _show_tree(console, mem.tree())
            g = mem.stats()["gateway"]
            console.print(
                f"gateway: backend {g.get('backend')}, {g.get('calls', 0)} LLM calls, "
                f"{g.get('embeddings', {}).get('texts', 0)} texts embedded in "
                f"{g.get('embeddings', {}).get('batches', 0)} batches, "
                f"{g.get('degraded', 0)} degraded"
            )
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


def _demo_interleave(
    mem: MemoryOS, clock: Any, script: dict[str, list[tuple[str, str]]]
) -> tuple[int, float]:
    """Add the script's turns round-robin across users, as a bot serving several people."""
    longest = max(len(turns) for turns in script.values())
    n = 0
    t0 = time.perf_counter()
    for i in range(longest):
        for user, turns in script.items():
            if i < len(turns):
                clock.advance(_DEMO_TURN_GAP_S)
                mem.add_turn(user, *turns[i])
                n += 1
    return n, time.perf_counter() - t0


def _demo_promotions(
    console: Console, before: dict[str, UserState], after: dict[str, UserState], tau: float
) -> None:
    from rich.table import Table

    table = Table("user", "persona updates", "new facts", "traits with a level",
                  "facts learned from", expand=True)
    promoted_any = False
    for user, st in after.items():
        old_facts = {e.entry_id for e in before[user].kb}
        new_facts = [e for e in st.kb if e.entry_id not in old_facts]
        sources = sorted({e.source_segment for e in new_facts if e.source_segment})
        updates = st.persona_updates - before[user].persona_updates
        promoted_any = promoted_any or updates > 0
        table.add_row(user, str(updates), str(len(new_facts)), str(len(st.traits)),
                      ", ".join(sources) or "-")
    console.print(table)
    if promoted_any:
        console.print(
            f"segments whose heat passed τ = {tau:g} after the follow-ups were handed to "
            "LPM; their L_interaction is back to 0 (see the tables above)"
        )
    else:
        console.print(f"no segment passed τ = {tau:g} in this run", style="yellow")


def _demo_fault(console: Console, mem: MemoryOS, supervisor: Any, actor: str) -> None:
    """Kill ``actor``; show that it came back with the same pages."""
    from .logs import configure_logging

    before = mem.user_state("alice")
    old_ref = mem.registry.require(actor)
    # The crash is the point of this step: its warning and error log lines would only
    # repeat on stderr what the demo prints below.
    configure_logging("critical", mem.config.log_format, force=True)
    supervisor.kill(old_ref, "demo: injected crash")
    deadline = time.monotonic() + 10.0
    while mem.registry.lookup(actor) in (None, old_ref) and time.monotonic() < deadline:
        time.sleep(0.005)
    restarted = mem.registry.lookup(actor) not in (None, old_ref)
    mem.flush()
    after = mem.user_state("alice")
    configure_logging(mem.config.log_level, mem.config.log_format, force=True)
    same = sorted(before.page_ids()) == sorted(after.page_ids())
    console.print(
        f"killed {actor} (supervisor.kill); restarted by its supervisor: "
        f"{'yes' if restarted else 'NO'}; it rebuilt its state from snapshot + WAL "
        "(rest_for_one: the LPM actor, started after it, was restarted too)"
    )
    console.print(
        f"turns {before.turns} -> {after.turns}, MTM segments {len(before.segments)} -> "
        f"{len(after.segments)}, pages held {len(before.page_ids())} -> "
        f"{len(after.page_ids())}: " + ("nothing lost" if same else "PAGES DIFFER"),
        style="green" if same and restarted else "red",
    )


# -- chat ----------------------------------------------------------------------------------


def _chat(args: argparse.Namespace) -> int:
    console = _console()
    interactive = sys.stdin.isatty()
    with _open(args, _data_dir(args)) as mem:
        if interactive:
            backend = mem.gateway_service.stats().get("backend")
            console.print(f"chatting as {args.user!r} with memory ({backend} backend); "
                          "Ctrl-D or /quit to leave")
        for line in _input_lines(interactive):
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            reply = mem.chat(args.user, text, assistant_id=args.assistant)
            console.print(_plain(f"assistant: {reply}"))
    return 0


def _input_lines(interactive: bool) -> Iterator[str]:
    if not interactive:
        yield from sys.stdin
        return
    while True:
        try:
            yield input("> ")
        except EOFError:
            return


# -- ingest --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Turn:
    user_id: str
    query: str
    response: str
    timestamp: float | None
    where: str  # "path:line" or "path: sample page" for error messages


def _detect_format(path: Path, requested: str) -> str:
    if not path.is_file():
        from .datasets import DatasetError

        raise DatasetError(f"{path}: no such file")
    if requested != "auto":
        return requested
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        from .datasets import DatasetError

        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    # A LoCoMo file is one JSON list; a turns file has one object per line.
    return "locomo" if head.startswith(b"[") else "jsonl"


def _load_turns(path: Path, fmt: str, limit: int | None) -> list[_Turn]:
    """Read and validate every turn of ``path`` before anything is stored."""
    if fmt == "jsonl":
        from .datasets.turns import read_turns

        turns = [_Turn(t.user_id, t.query, t.response, t.timestamp, f"{path}:{t.line}")
                 for t in read_turns(path)]
        return turns if limit is None else turns[:limit]
    from .datasets.locomo import load_locomo

    return [
        _Turn(conv.sample_id, page.query, page.response, page.timestamp,
              f"{path}: {conv.sample_id} page {page.index}")
        for conv in load_locomo(path, limit)
        for page in conv.pages
        if page.query or page.response
    ]


def _ingest(args: argparse.Namespace) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    from .errors import InvalidInput

    console = _console()
    path = Path(args.file)
    fmt = _detect_format(path, args.format)
    turns = _load_turns(path, fmt, args.limit)
    if not turns:
        from .datasets import DatasetError

        raise DatasetError(f"{path}: no turns to ingest")
    cfg = _config(args)
    for turn in turns:
        # The size limit is the one add_turn would hit mid-way; checking it here keeps a
        # refused file from being half ingested.
        for what, text in (("query", turn.query), ("response", turn.response)):
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > cfg.max_text_bytes:
                raise InvalidInput(f"{turn.where}: {what} is {size} bytes; the limit is "
                                   f"{cfg.max_text_bytes} (max_text_bytes)")
    per_user: dict[str, int] = {}
    with _open(args, _data_dir(args)) as mem:
        t0 = time.perf_counter()
        with Progress(TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("turns"), TimeElapsedColumn(), console=console,
                      transient=True, disable=not console.is_terminal) as progress:
            task = progress.add_task("ingest", total=len(turns))
            for turn in turns:
                try:
                    mem.add_turn(turn.user_id, turn.query, turn.response,
                                 timestamp=turn.timestamp)
                except InvalidInput as exc:
                    raise InvalidInput(f"{turn.where}: {exc}") from None
                per_user[turn.user_id] = per_user.get(turn.user_id, 0) + 1
                progress.advance(task)
        stored_s = time.perf_counter() - t0
        console.print("placing pages into segments and summarising…")
        mem.flush()
        total_s = time.perf_counter() - t0
    table = Table("user", "turns ingested", title=f"{path.name} ({fmt})", title_justify="left")
    for user, count in sorted(per_user.items()):
        table.add_row(_plain(user), str(count))
    console.print(table)
    console.print(
        f"ingested {len(turns)} turns for {len(per_user)} users: stored in {stored_s:.2f} s "
        f"({len(turns) / max(stored_s, 1e-9):.0f} turns/s), settled in {total_s:.2f} s"
    )
    return 0


# -- inspect -------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    console = _console()
    with _open(args, _existing_data_dir(args)) as mem:
        _require_user(mem, args.user)
        state = mem.user_state(args.user)
        if args.json:
            print(json.dumps(_state_dict(state), indent=2, default=str))
            return 0
        _show_user(console, state, max_segments=None if args.all else 10,
                   show_pages=args.pages, max_stm=None)
        archived = len(mem.archive(args.user))
        if archived:
            console.print(f"archive: {archived} records evicted from MTM (kept on disk)")
    return 0


def _state_dict(state: UserState) -> dict[str, Any]:
    def page(p: Any) -> dict[str, Any]:
        return {"page_id": p.page_id, "timestamp": p.timestamp, "query": p.query,
                "response": p.response}

    return {
        "user_id": state.user_id,
        "turns": state.turns,
        "stm": [page(p) for p in state.stm],
        "segments": [
            {"segment_id": s.segment_id, "heat": s.heat, "n_visit": s.n_visit,
             "l_interaction": s.l_interaction, "keywords": sorted(s.keywords),
             "summary": s.summary, "pages": [page(p) for p in s.pages]}
            for s in state.segments
        ],
        "profile": state.profile.to_dict(),
        "traits": [{"name": t.name, "category": t.category, "level": t.level,
                    "evidence": t.evidence} for t in state.traits],
        "kb": [{"entry_id": e.entry_id, "text": e.text, "timestamp": e.timestamp,
                "source_segment": e.source_segment} for e in state.kb],
        "agents": {
            aid: {"profile": p["profile"].to_dict(),
                  "traits": [t.text for t in p.get("traits", ())]}
            for aid, p in state.agents.items()
        },
        "persona_updates": state.persona_updates,
    }


# -- stats ---------------------------------------------------------------------------------


def _stats(args: argparse.Namespace) -> int:
    with _open(args, _existing_data_dir(args)) as mem:
        if args.user:
            _require_user(mem, args.user)
            st = mem.stats(args.user)
        else:
            stored = {"users": 0, "turns": 0, "stm_pages": 0, "mtm_segments": 0,
                      "mtm_pages": 0, "kb_facts": 0, "traits_set": 0, "archived_records": 0}
            for user in mem.users():
                per = mem.stats(user)
                stored["users"] += 1
                for key in stored:
                    if key != "users":
                        stored[key] += int(per.get(key, 0))
            st = mem.stats()
            st["stored"] = stored
            st["tree_restarts"] = _tree_restarts(mem.tree())
    if args.prometheus:
        sys.stdout.write(render_prometheus(st))
    else:
        print(json.dumps(st, indent=2, default=str))
    return 0


def _tree_restarts(tree: str) -> int:
    """Sum of ``restarts=N`` over every child in ``MemoryOS.tree()`` text."""
    return sum(int(n) for n in re.findall(r"restarts=(\d+)", tree))


_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class _Exposition:
    """Collects metric families and renders the Prometheus text format (version 0.0.4)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._families: dict[str, tuple[str, str, list[tuple[str, dict[str, str], float]]]] = {}

    def add(self, name: str, kind: str, help_text: str, value: Any,
            labels: dict[str, str] | None = None, *, suffix: str = "") -> None:
        """Add one sample of family ``prefix_name`` (``suffix`` for summary _sum/_count)."""
        if value is None or isinstance(value, (str, list, dict)):
            return
        number = float(value)
        family = f"{self._prefix}_{name}"
        if not _METRIC_NAME.match(family):
            raise ValueError(f"bad metric name {family!r}")
        entry = self._families.setdefault(family, (kind, help_text, []))
        if entry[0] != kind:
            raise ValueError(f"metric {family} registered as {entry[0]} and {kind}")
        entry[2].append((family + suffix, dict(labels or {}), number))

    def render(self) -> str:
        out: list[str] = []
        for family, (kind, help_text, samples) in self._families.items():
            out.append(f"# HELP {family} {_escape_help(help_text)}")
            out.append(f"# TYPE {family} {kind}")
            for sample_name, labels, value in samples:
                for key in labels:
                    if not _LABEL_NAME.match(key):
                        raise ValueError(f"bad label name {key!r}")
                label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
                label_part = "{" + label_text + "}" if label_text else ""
                out.append(f"{sample_name}{label_part} {_format_value(value)}")
        return "\n".join(out) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _summary(exp: _Exposition, name: str, help_text: str, latency: dict[str, Any]) -> None:
    """A latency summary in seconds from an accounting ``{count, mean_ms, pNN_ms}`` dict."""
    count = int(latency.get("count", 0) or 0)
    for q, key in (("0.5", "p50_ms"), ("0.95", "p95_ms"), ("0.99", "p99_ms")):
        if key in latency:
            exp.add(name, "summary", help_text, float(latency[key]) / 1000.0, {"quantile": q})
    exp.add(name, "summary", help_text, float(latency.get("mean_ms", 0.0)) * count / 1000.0,
            suffix="_sum")
    exp.add(name, "summary", help_text, count, suffix="_count")


def render_prometheus(stats: dict[str, Any], prefix: str = "memoryos") -> str:
    """Render :meth:`MemoryOS.stats` output as Prometheus text exposition format.

    Process counters (turns, retrievals, LLM calls, tokens) count since the data
    directory was opened by this process; ``stored_*`` gauges describe the data on disk.
    Latencies are summaries in seconds with quantiles 0.5, 0.95 and 0.99.
    """
    exp = _Exposition(prefix)
    if "user_id" in stats:  # per-user stats
        labels = {"user": str(stats["user_id"])}
        for key, help_text in (
            ("turns", "Turns stored for the user."),
            ("stm_pages", "Pages in the user's STM."),
            ("mtm_segments", "Segments in the user's MTM."),
            ("mtm_pages", "Pages in the user's MTM segments."),
            ("kb_facts", "Facts in the user's LPM knowledge base."),
            ("traits_set", "User traits with a level."),
            ("archived_records", "Records evicted from MTM to the user's archive."),
        ):
            exp.add(f"user_{key}", "gauge", help_text, stats.get(key), labels)
        gw = stats.get("gateway") or {}
        exp.add("user_llm_calls_total", "counter", "LLM calls made for the user.",
                gw.get("calls", 0), labels)
        for kind in ("prompt", "completion"):
            exp.add("user_llm_tokens_total", "counter", "LLM tokens spent for the user.",
                    gw.get(f"{kind}_tokens", 0), {**labels, "type": kind})
        return exp.render()

    for key, help_text in (
        ("turns", "Turns added by this process."),
        ("retrievals", "Retrievals served by this process."),
        ("chats", "Chat replies generated by this process."),
        ("activations", "User actor groups started."),
        ("passivations", "User actor groups stopped after idling or for room."),
    ):
        exp.add(f"{key}_total", "counter", help_text, stats.get(key))
    exp.add("active_users", "gauge", "Users whose actor groups are live.",
            stats.get("active_users"))
    exp.add("inflight_calls", "gauge", "Calls in flight.", stats.get("inflight"))
    exp.add("gateway_backlog", "gauge", "Gateway jobs queued.", stats.get("gateway_backlog"))
    exp.add("threads", "gauge", "Threads in the process.", stats.get("threads"))
    exp.add("user_group_restarts_total", "counter",
            "Restarts of user actor groups by the users supervisor.",
            stats.get("user_group_restarts"))
    exp.add("actor_restarts_total", "counter",
            "Restarts of every child in the supervision tree.", stats.get("tree_restarts"))
    for q, key in (("0.5", "activation_ms_p50"), ("0.99", "activation_ms_p99")):
        if key in stats:
            exp.add("activation_latency_seconds", "gauge",
                    "User activation latency quantiles, seconds.",
                    float(stats[key]) / 1000.0, {"quantile": q})

    stored = stats.get("stored") or {}
    exp.add("users", "gauge", "Users with data in the data directory.", stored.get("users"))
    for key, help_text in (
        ("turns", "Turns stored over all users."),
        ("stm_pages", "Pages in STM over all users."),
        ("mtm_segments", "MTM segments over all users."),
        ("mtm_pages", "Pages in MTM segments over all users."),
        ("kb_facts", "LPM facts over all users."),
        ("traits_set", "User traits with a level over all users."),
        ("archived_records", "Records in the archives over all users."),
    ):
        exp.add(f"stored_{key}", "gauge", help_text, stored.get(key))

    gw = stats.get("gateway") or {}
    if gw:
        embedder = gw.get("embedder") or {}
        exp.add("info", "gauge", "Backend and embedder in use (value is always 1).", 1, {
            "backend": str(gw.get("backend", "")),
            "embedder": str(embedder.get("name", "")),
            "embedding_dim": str(embedder.get("dim", "")),
        })
        for key, help_text in (
            ("calls", "LLM completion calls."),
            ("errors", "LLM completion calls that failed."),
            ("degraded", "LLM completions answered by the offline fallback."),
            ("cache_hits", "LLM completions answered from the cache."),
            ("retries", "LLM call retries."),
        ):
            exp.add(f"llm_{key}_total", "counter", help_text, gw.get(key))
        for kind in ("prompt", "completion"):
            exp.add("llm_tokens_total", "counter", "LLM tokens spent.",
                    gw.get(f"{kind}_tokens"), {"type": kind})
        exp.add("llm_cost_usd_total", "counter", "Estimated LLM cost, US dollars.",
                gw.get("cost_usd"))
        for kind, counters in sorted((gw.get("by_kind") or {}).items()):
            exp.add("llm_calls_by_kind_total", "counter", "LLM calls per prompt kind.",
                    counters.get("calls"), {"kind": str(kind)})
        if isinstance(gw.get("latency"), dict):
            _summary(exp, "llm_latency_seconds", "LLM call latency, seconds.", gw["latency"])
        emb = gw.get("embeddings") or {}
        for key, help_text in (
            ("requests", "Embedding requests."),
            ("texts", "Texts embedded."),
            ("batches", "Embedding batches sent to the embedder."),
            ("cache_hits", "Embeddings answered from the cache."),
            ("errors", "Embedding requests that failed."),
        ):
            exp.add(f"embedding_{key}_total", "counter", help_text, emb.get(key))
        if isinstance(emb.get("latency"), dict):
            _summary(exp, "embedding_latency_seconds", "Embedding batch latency, seconds.",
                     emb["latency"])
        breaker = gw.get("breaker") or {}
        for which in ("completion", "embedding"):
            if which in breaker:
                exp.add("llm_breaker_open", "gauge",
                        "1 when the circuit breaker is not closed.",
                        0 if breaker[which] == "closed" else 1, {"breaker": which})
                exp.add("llm_breaker_opened_total", "counter", "Times the breaker opened.",
                        breaker.get(f"{which}_times_opened"), {"breaker": which})
        conc = gw.get("concurrency") or {}
        exp.add("llm_in_flight", "gauge", "LLM calls in flight.", conc.get("in_flight"))
        exp.add("llm_pending_redo", "gauge", "Degraded completions queued for a redo.",
                gw.get("pending_redo"))
    return exp.render()


# -- export / import / forget ----------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    with _open(args, _existing_data_dir(args)) as mem:
        _require_user(mem, args.user)
        out = mem.export_user(args.user, args.file)
        turns = mem.user_state(args.user).turns
    print(f"exported {args.user!r} ({turns} turns) to {out}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from .datasets import DatasetError

    if not Path(args.file).is_file():
        raise DatasetError(f"{args.file}: no such file")
    with _open(args, _data_dir(args)) as mem:
        uid = mem.import_user(args.file, user_id=args.as_user)
        turns = mem.user_state(uid).turns
    print(f"imported {args.file} as user {uid!r} ({turns} turns)")
    return 0


def _forget(args: argparse.Namespace) -> int:
    with _open(args, _existing_data_dir(args)) as mem:
        _require_user(mem, args.user)
        report = mem.forget_user(args.user)
    print(f"forgot {args.user!r}: removed {len(report.removed_files)} files")
    for path in report.removed_files:
        print(f"  {path}")
    return 0


# -- bench ---------------------------------------------------------------------------------


def _bench_dir() -> Path:
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (base / "bench").is_dir():
            return base / "bench"
    raise _UsageError("bench/ not found: run `memoryos bench` from a checkout of the repository")


_BENCHES = {"throughput": "throughput", "locomo": "locomo", "scale": "scale_bench",
            "crash": "crash_bench", "supervisor": "supervisor_bench", "gateway": "gateway_bench",
            "store": "store_bench"}


def _bench(args: argparse.Namespace) -> int:
    bench = _bench_dir()
    script = bench / f"{_BENCHES[args.which]}.py"
    if not script.exists():
        raise _UsageError(f"{script} is missing")
    saved_argv = sys.argv
    sys.argv = [str(script), *args.rest]
    sys.path.insert(0, str(bench.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        return int(exc.code or 0)
    finally:
        sys.argv = saved_argv
        sys.path.remove(str(bench.parent))
    return 0


# -- argument parsing ----------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    # --data-dir and --config work before or after the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=argparse.SUPPRESS,
                        help="data directory (default: $MEMORYOS_DATA_DIR or ./memoryos-data; "
                        "demo: a temporary directory)")
    common.add_argument("--config", default=argparse.SUPPRESS,
                        help="TOML file with MemoryConfig fields")
    p = argparse.ArgumentParser(prog="memoryos", parents=[common],
                                description=(__doc__ or "").split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=[common])

    add("demo", "scripted multi-user conversation, offline")
    c = add("chat", "chat with memory; reads lines from stdin until EOF")
    c.add_argument("--user", required=True)
    c.add_argument("--assistant", default="default", help="assistant id (default: default)")
    c.add_argument("--model", help="any litellm model name (default: the offline backend)")
    c.add_argument("--base-url", help="OpenAI-compatible base URL for --model")
    i = add("ingest", "ingest a LoCoMo JSON file or a JSONL file of turns")
    i.add_argument("file")
    i.add_argument("--format", choices=("auto", "locomo", "jsonl"), default="auto",
                   help="file layout (default: by suffix or first character)")
    i.add_argument("--limit", type=int,
                   help="LoCoMo: first N conversations; JSONL: first N turns")
    n = add("inspect", "show a user's tiers, segments by heat, traits, KB")
    n.add_argument("user")
    n.add_argument("--pages", action="store_true", help="list each segment's pages")
    n.add_argument("--all", action="store_true", help="every segment, not the 10 hottest")
    n.add_argument("--json", action="store_true", help="print the state as JSON")
    s = add("stats", "counters as JSON or Prometheus text")
    s.add_argument("--user", help="one user's counters")
    s.add_argument("--prometheus", action="store_true", help="Prometheus text format")
    e = add("export", "export a user to a file (.json, else msgpack)")
    e.add_argument("user")
    e.add_argument("file")
    m = add("import", "import a user from an export file")
    m.add_argument("file")
    m.add_argument("--as", dest="as_user", help="store under this user id")
    f = add("forget", "delete every file of a user")
    f.add_argument("user")
    b = add("bench", "run a benchmark from the repository's bench/ folder")
    b.add_argument("which", choices=sorted(_BENCHES))
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    from .server.cli import add_parsers as add_server_parsers

    add_server_parsers(add)  # serve, mcp, keys
    return p


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _demo, "chat": _chat, "ingest": _ingest, "inspect": _inspect, "stats": _stats,
    "export": _export, "import": _import, "forget": _forget, "bench": _bench,
}


def _server_command(args: argparse.Namespace) -> int:
    from .server.cli import COMMANDS

    return COMMANDS[args.command](args)


_COMMANDS.update(dict.fromkeys(("serve", "mcp", "keys"), _server_command))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memoryos`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit code (0 ok, 2 bad input or unknown user, 1 unexpected failure, 130 interrupted)."""
    args = _parser().parse_args(argv)
    for name in ("data_dir", "config"):
        if not hasattr(args, name):
            setattr(args, name, None)
    from .errors import MemoryOSError

    err = _console(stderr=True)
    try:
        return _COMMANDS[args.command](args)
    except (MemoryOSError, _UsageError) as exc:
        kind = "" if isinstance(exc, _UsageError) else f"{type(exc).__name__}: "
        message = str(exc.args[0]) if exc.args else str(exc)
        err.print(_plain(f"memoryos: error: {kind}{message}"), soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("memoryos: interrupted")
        return 130
    except BrokenPipeError:
        # Output piped into a pager or `head` that exited: not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
