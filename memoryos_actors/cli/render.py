"""How the CLI shows memory on a terminal: a user's tiers, a retrieval, the supervision tree.

Everything here prints to a rich ``Console`` and only reads what the public facade returns
(:class:`~memoryos_actors.system.UserState`, :class:`~memoryos_actors.messages.MemoryContext`,
:meth:`MemoryOS.tree` text).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ._common import n_of, one_line, plain, when

if TYPE_CHECKING:
    from rich.console import Console

    from ..reports import UserState

__all__ = ["show_context", "show_tree", "show_user", "state_dict"]


def show_user(
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
        f"{n_of(state.turns, 'turn')} stored: STM {n_of(len(state.stm), 'page')} -> MTM "
        f"{n_of(mtm_pages, 'page')} in {n_of(len(state.segments), 'segment')} -> LPM "
        f"{n_of(len(state.kb), 'fact')}, {n_of(len(state.traits), 'trait')} "
        f"({n_of(state.persona_updates, 'persona update')})"
    )

    stm = state.stm if max_stm is None else state.stm[-max_stm:]
    if stm:
        table = Table(title="STM (most recent pages)", title_justify="left", expand=True)
        table.add_column("page", no_wrap=True)
        table.add_column("time (UTC)", no_wrap=True)
        table.add_column("query / response", ratio=1, overflow="ellipsis", no_wrap=True)
        if len(stm) < len(state.stm):
            table.add_row("…", "", plain(f"{len(state.stm) - len(stm)} older STM pages"))
        for page in stm:
            table.add_row(
                page.page_id,
                when(page.timestamp),
                plain(one_line(f"{page.query} / {page.response}", 200)),
            )
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
                seg.segment_id,
                str(len(seg.pages)),
                f"{seg.heat:.2f}",
                str(seg.n_visit),
                str(seg.l_interaction),
                plain(", ".join(sorted(seg.keywords)[:6])),
                plain(one_line(seg.summary, 200)),
            )
            if show_pages:
                for page in seg.pages:
                    table.add_row(
                        "",
                        page.page_id,
                        "",
                        "",
                        "",
                        when(page.timestamp),
                        plain(one_line(f"{page.query} / {page.response}", 200)),
                    )
        if len(segments) < len(state.segments):
            table.caption = f"{len(state.segments) - len(segments)} cooler segments not shown"
        console.print(table)
    else:
        console.print("MTM: no segments yet (pages reach MTM when they leave STM)")

    profile = state.profile
    if not profile.is_empty():
        known = [
            f"{k}: {v}"
            for k, v in (
                ("name", profile.name),
                ("gender", profile.gender),
                ("born", profile.birth_year),
            )
            if v is not None
        ]
        known.extend(f"{k}: {v}" for k, v in profile.extras)
        console.print(plain("LPM profile: " + ", ".join(known)))
    if state.kb:
        table = Table(title="LPM knowledge base (facts)", title_justify="left", expand=True)
        table.add_column("fact", no_wrap=True)
        table.add_column("from segment", no_wrap=True)
        table.add_column("text", ratio=1, overflow="fold")
        for entry in state.kb:
            table.add_row(entry.entry_id, entry.source_segment or "-", plain(entry.text))
        console.print(table)
    if state.traits:
        table = Table(title="LPM traits", title_justify="left", expand=True)
        table.add_column("trait", no_wrap=True)
        table.add_column("category", no_wrap=True)
        table.add_column("level", no_wrap=True)
        table.add_column("evidence", ratio=1, overflow="ellipsis", no_wrap=True)
        for trait in state.traits:
            table.add_row(
                trait.name, trait.category, trait.level or "", plain(one_line(trait.evidence, 200))
            )
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
            console.print(plain(f"agent persona {assistant_id!r}: " + " | ".join(parts)))


def show_context(console: Console, ctx: Any, max_rows: int = 4) -> None:
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
        cell = Text(one_line(item.text, 70))
        cell.append("\n" + (item.why or "-"), style="dim")
        table.add_row(item.tier, label, f"{item.score:.3f}", cell)
    console.print(table)
    console.print(
        f"{n_of(len(ctx.stm), 'STM page')}, {n_of(len(ctx.mtm), 'MTM page')} from "
        f"{n_of(len(ctx.segments), 'segment')}, {n_of(len(ctx.kb), 'fact')}, "
        f"{n_of(len(ctx.traits), 'trait')}; retrieval took {ctx.elapsed_ms:.2f} ms"
    )


def show_tree(console: Console, text: str, title: str = "supervision tree") -> None:
    """Print ``MemoryOS.tree()`` text as a rich tree, restarts highlighted."""
    from rich.tree import Tree

    root = Tree(f"[bold]{title}[/bold]")
    lines = text.splitlines()
    if not lines:
        return
    stack: list[tuple[int, Tree]] = [(-1, root.add(plain(lines[0])))]
    for line in lines[1:]:
        match = re.search(r"[├└]── ", line)
        if match is None:
            continue
        depth = match.start() // 4
        label = line[match.end() :].replace(" [worker]", "").replace(" [supervisor]", "/")
        label = re.sub(r" name=\S+$", "", label)
        node_text = plain(label)
        if re.search(r"restarts=[1-9]", label):
            node_text.stylize("bold yellow")
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else root
        stack.append((depth, parent.add(node_text)))
    console.print(root)


def state_dict(state: UserState) -> dict[str, Any]:
    def page(p: Any) -> dict[str, Any]:
        return {
            "page_id": p.page_id,
            "timestamp": p.timestamp,
            "query": p.query,
            "response": p.response,
        }

    return {
        "user_id": state.user_id,
        "turns": state.turns,
        "stm": [page(p) for p in state.stm],
        "segments": [
            {
                "segment_id": s.segment_id,
                "heat": s.heat,
                "n_visit": s.n_visit,
                "l_interaction": s.l_interaction,
                "keywords": sorted(s.keywords),
                "summary": s.summary,
                "pages": [page(p) for p in s.pages],
            }
            for s in state.segments
        ],
        "profile": state.profile.to_dict(),
        "traits": [
            {"name": t.name, "category": t.category, "level": t.level, "evidence": t.evidence}
            for t in state.traits
        ],
        "kb": [
            {
                "entry_id": e.entry_id,
                "text": e.text,
                "timestamp": e.timestamp,
                "source_segment": e.source_segment,
            }
            for e in state.kb
        ],
        "agents": {
            aid: {
                "profile": p["profile"].to_dict(),
                "traits": [t.text for t in p.get("traits", ())],
            }
            for aid, p in state.agents.items()
        },
        "persona_updates": state.persona_updates,
    }
