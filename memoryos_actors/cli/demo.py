"""``memoryos demo``: a scripted multi-user conversation, offline, step by step.

The conversation itself is data (``demo_script.json`` next to this module, shipped with the
package): who talks, what they say, their follow-up questions, the question asked to show
provenance and which actor the fault-injection step crashes. This module only plays it
through the public :class:`~memoryos_actors.system.MemoryOS` API and prints what happened.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import UsageError, config_from_args, console, plain, quiet_logging
from .render import show_context, show_tree, show_user

if TYPE_CHECKING:
    from rich.console import Console

    from ..clock import ManualClock
    from ..reports import UserState
    from ..system import MemoryOS

__all__ = ["DemoScript", "load_script", "run_demo"]

SCRIPT_RESOURCE = "demo_script.json"
"""File name of the demo script inside this package."""


@dataclass(frozen=True, slots=True)
class DemoUser:
    """One person of the demo: profiles, the conversation, later follow-up questions."""

    user_id: str
    profile: dict[str, Any]
    agent_profile: dict[str, Any] | None
    turns: tuple[tuple[str, str], ...]
    follow_ups: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class DemoScript:
    """The demo script: users in speaking order, the clock, and the last two steps' targets.

    Attributes:
        start_time: clock at the first turn, seconds since the epoch (fixed, so the run is
            reproducible).
        turn_gap_seconds: clock advance before each turn and retrieval, seconds.
        users: the people, in the order they take turns.
        provenance_user, provenance_query: the retrieval shown item by item.
        crash_user, crash_tier: the actor the fault-injection step crashes.
    """

    start_time: float
    turn_gap_seconds: float
    users: tuple[DemoUser, ...]
    provenance_user: str
    provenance_query: str
    crash_user: str
    crash_tier: str


def _pairs(items: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(items, list):
        raise ValueError(f"{where} must be a list")
    out = []
    for i, item in enumerate(items):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("query"), str)
            and isinstance(item.get("response"), str)
        ):
            raise ValueError(f"{where}[{i}] must have a string query and response")
        out.append((item["query"], item["response"]))
    return tuple(out)


def parse_script(data: Any) -> DemoScript:
    """Check and convert the JSON form of a demo script.

    Raises:
        ValueError: a missing or mistyped key, named by its path.
    """
    if not isinstance(data, dict) or not isinstance(data.get("users"), dict):
        raise ValueError("a demo script is an object with a 'users' object")
    users = []
    for uid, spec in data["users"].items():
        if not isinstance(spec, dict) or not isinstance(spec.get("profile"), dict):
            raise ValueError(f"users.{uid} needs a 'profile' object")
        agent = spec.get("agent_profile")
        if agent is not None and not isinstance(agent, dict):
            raise ValueError(f"users.{uid}.agent_profile must be an object")
        users.append(
            DemoUser(
                uid,
                dict(spec["profile"]),
                None if agent is None else dict(agent),
                _pairs(spec.get("turns"), f"users.{uid}.turns"),
                _pairs(spec.get("follow_ups", []), f"users.{uid}.follow_ups"),
            )
        )
    if not users or not any(u.turns for u in users):
        raise ValueError("a demo script needs at least one user with turns")
    try:
        prov, crash = data["provenance_question"], data["crash"]
        script = DemoScript(
            float(data["start_time"]),
            float(data["turn_gap_seconds"]),
            tuple(users),
            str(prov["user"]),
            str(prov["query"]),
            str(crash["user"]),
            str(crash["tier"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed demo script: {exc!r}") from None
    ids = {u.user_id for u in users}
    for what, uid in (
        ("provenance_question", script.provenance_user),
        ("crash", script.crash_user),
    ):
        if uid not in ids:
            raise ValueError(f"{what}.user {uid!r} is not one of the script's users")
    if script.crash_tier not in ("stm", "mtm", "lpm"):
        raise ValueError(f"crash.tier must be stm, mtm or lpm, got {script.crash_tier!r}")
    return script


def load_script(path: str | Path | None = None) -> DemoScript:
    """The demo script at ``path``, or the one shipped with the package."""
    if path is None:
        text = resources.files(__package__).joinpath(SCRIPT_RESOURCE).read_text("utf-8")
    else:
        text = Path(path).read_text("utf-8")
    return parse_script(json.loads(text))


def run_demo(args: argparse.Namespace) -> int:
    """The ``demo`` command: play the script in a temporary (or the given) data directory."""
    try:
        script = load_script(getattr(args, "script", None))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot load the demo script: {exc}") from None
    out = console()
    tmp: tempfile.TemporaryDirectory[str] | None = None
    if args.data_dir:
        data_dir = Path(args.data_dir)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="memoryos-demo-")
        data_dir = Path(tmp.name)
    try:
        _play(out, script, data_dir, args)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


def _play(out: Console, script: DemoScript, data_dir: Path, args: argparse.Namespace) -> None:
    from rich.table import Table

    from ..clock import ManualClock
    from ..messages import AgentProfile, UserProfile
    from ..system import MemoryOS

    # Heat is driven by the demo's own inserts and retrievals; the wall-clock heat tick
    # would only add timing-dependent noise to a scripted run.
    cfg = config_from_args(args, heat_tick_seconds=3600.0)
    quiet_logging(cfg)
    clock = ManualClock(script.start_time)
    out.rule("[bold]memoryos-actors demo[/bold]")
    out.print(
        f"offline: {cfg.llm_backend} LLM backend, {cfg.embedder} embedder; "
        f"STM holds {cfg.stm_capacity} pages; a segment is promoted to LPM when its heat "
        f"passes τ = {cfg.promotion_threshold:g}"
    )
    out.print(plain(f"data directory: {data_dir}"))
    users = [u.user_id for u in script.users]
    with MemoryOS.open(data_dir, cfg, clock=clock) as mem:
        for user in script.users:
            mem.set_user_profile(user.user_id, UserProfile.from_dict(user.profile))
            if user.agent_profile is not None:
                mem.set_agent_profile(user.user_id, AgentProfile.from_dict(user.agent_profile))

        out.rule("1. conversation: pages enter STM, overflow into MTM segments")
        n, add_s = _interleave(mem, clock, script)
        mem.flush()
        out.print(
            f"stored {n} turns for {len(users)} users (interleaved) in "
            f"{add_s * 1000:.0f} ms, {add_s / n * 1000:.2f} ms per add_turn "
            "(acknowledged once in the write-ahead log)"
        )
        before = {user: mem.user_state(user) for user in users}
        table = Table(
            "user",
            "turns",
            "STM pages",
            "MTM segments",
            "MTM pages",
            "LPM facts",
            "hottest segment",
        )
        for user, st in before.items():
            hot = st.segments[0] if st.segments else None
            table.add_row(
                user,
                str(st.turns),
                str(len(st.stm)),
                str(len(st.segments)),
                str(sum(len(s.pages) for s in st.segments)),
                str(len(st.kb)),
                f"{hot.segment_id} heat {hot.heat:.2f}" if hot else "-",
            )
        out.print(table)

        out.rule("2. follow-up questions: retrieval visits segments and heats them")
        # The application retrieves memory for each question (visiting, and so heating,
        # the segments that answer it) and stores the turn with its reply; the next pages
        # entering MTM make the heat check run, and hot segments are promoted to LPM.
        table = Table("user", "question", "best page", "segment", expand=True)
        table.columns[1].ratio = 1
        table.columns[1].overflow = "ellipsis"
        table.columns[1].no_wrap = True
        for user_id, question, _answer, ctx in _follow_ups(mem, clock, script):
            best = ctx.mtm[0] if ctx.mtm else None
            table.add_row(
                user_id,
                plain(question),
                best.item_id if best else "-",
                (best.segment_id or "-") if best else "-",
            )
        mem.flush()
        out.print(table)

        after = {user: mem.user_state(user) for user in users}
        for user in users:
            show_user(out, after[user], max_segments=6, max_stm=2)

        out.rule("3. promotion: hot segments distilled into LPM")
        _promotions(out, before, after, cfg.promotion_threshold)

        out.rule("4. retrieval with provenance")
        clock.advance(script.turn_gap_seconds)
        ctx = mem.retrieve(script.provenance_user, script.provenance_query)
        out.print(plain(f"{script.provenance_user} asks: {script.provenance_query}"))
        show_context(out, ctx)
        out.print(
            "item [italic]page@segment[/italic]: an MTM page and its segment; "
            "[italic]fact@segment[/italic]: the promoted segment an LPM fact came from"
        )

        out.rule(
            f"5. fault injection: crash {script.crash_user}'s {script.crash_tier.upper()} actor"
        )
        _fault(out, mem, script.crash_user, script.crash_tier)
        show_tree(out, mem.tree())
        g = mem.stats()["gateway"]
        out.print(
            f"gateway: backend {g.get('backend')}, {g.get('calls', 0)} LLM calls, "
            f"{g.get('embeddings', {}).get('texts', 0)} texts embedded in "
            f"{g.get('embeddings', {}).get('batches', 0)} batches, "
            f"{g.get('degraded', 0)} degraded"
        )


def _interleave(mem: MemoryOS, clock: ManualClock, script: DemoScript) -> tuple[int, float]:
    """Add the script's turns round-robin across users, as a bot serving several people."""
    longest = max(len(u.turns) for u in script.users)
    n = 0
    t0 = time.perf_counter()
    for i in range(longest):
        for user in script.users:
            if i < len(user.turns):
                clock.advance(script.turn_gap_seconds)
                mem.add_turn(user.user_id, *user.turns[i])
                n += 1
    return n, time.perf_counter() - t0


def _follow_ups(mem: MemoryOS, clock: ManualClock, script: DemoScript) -> list[Any]:
    """Retrieve for each follow-up question, then store it with its answer (round-robin)."""
    longest = max(len(u.follow_ups) for u in script.users)
    rows = []
    for i in range(longest):
        for user in script.users:
            if i >= len(user.follow_ups):
                continue
            question, answer = user.follow_ups[i]
            clock.advance(script.turn_gap_seconds)
            ctx = mem.retrieve(user.user_id, question)
            mem.add_turn(user.user_id, question, answer)
            rows.append((user.user_id, question, answer, ctx))
    return rows


def _promotions(
    out: Console, before: dict[str, UserState], after: dict[str, UserState], tau: float
) -> None:
    from rich.table import Table

    table = Table(
        "user",
        "persona updates",
        "new facts",
        "traits with a level",
        "facts learned from",
        expand=True,
    )
    promoted_any = False
    for user, st in after.items():
        old_facts = {e.entry_id for e in before[user].kb}
        new_facts = [e for e in st.kb if e.entry_id not in old_facts]
        sources = sorted({e.source_segment for e in new_facts if e.source_segment})
        updates = st.persona_updates - before[user].persona_updates
        promoted_any = promoted_any or updates > 0
        table.add_row(
            user, str(updates), str(len(new_facts)), str(len(st.traits)), ", ".join(sources) or "-"
        )
    out.print(table)
    if promoted_any:
        out.print(
            f"segments whose heat passed τ = {tau:g} after the follow-ups were handed to "
            "LPM; their L_interaction is back to 0 (see the tables above)"
        )
    else:
        out.print(f"no segment passed τ = {tau:g} in this run", style="yellow")


def _fault(out: Console, mem: MemoryOS, user: str, tier: str) -> None:
    """Crash ``user``'s ``tier`` actor through :meth:`MemoryOS.kill_actor`; show that it
    came back with the same pages."""
    from ..logs import configure_logging

    before = mem.user_state(user)
    # The crash is the point of this step: its warning and error log lines would only
    # repeat on stderr what the demo prints below.
    configure_logging("critical", mem.config.log_format, force=True)
    try:
        restarted = mem.kill_actor(user, tier, "demo: injected crash")
        mem.flush()
        after = mem.user_state(user)
    finally:
        configure_logging(mem.config.log_level, mem.config.log_format, force=True)
    same = sorted(before.page_ids()) == sorted(after.page_ids())
    later = {
        "stm": "the MTM and LPM actors, started after it, were",
        "mtm": "the LPM actor, started after it, was",
        "lpm": "no other actor was",
    }[tier]
    out.print(
        f"crashed {user}'s {tier} actor (MemoryOS.kill_actor); restarted by its supervisor: "
        f"{'yes' if restarted else 'NO'}; it rebuilt its state from snapshot + WAL "
        f"(rest_for_one: {later} restarted too)"
    )
    out.print(
        f"turns {before.turns} -> {after.turns}, MTM segments {len(before.segments)} -> "
        f"{len(after.segments)}, pages held {len(before.page_ids())} -> "
        f"{len(after.page_ids())}: " + ("nothing lost" if same else "PAGES DIFFER"),
        style="green" if same and restarted else "red",
    )
