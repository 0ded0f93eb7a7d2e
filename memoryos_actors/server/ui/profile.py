"""A user's profile page (``/ui/users/{user}/profile``): the static profile, the 90
traits, the facts, and what each assistant learned, archived ones included."""

from __future__ import annotations

import asyncio

from fastapi import Request, Response

from ...trait_table import TRAIT_CATEGORIES, TRAITS
from ..tenancy import external_id, external_memory_id
from .state import (
    LEVELS,
    UI,
    MemoryPage,
    router,
)

#: Archived facts (and archived assistant traits) the profile page shows.
ARCHIVED_FACTS_SHOWN = 50


@router.get("/users/{user_id}/profile", response_class=Response)
async def profile_page(request: Request, user_id: str, ui: MemoryPage = UI) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    mem = ui.memory()
    st, facts, agent_traits = await asyncio.gather(
        mem.user_state(uid),
        mem.archived_memories(uid, "fact", limit=ARCHIVED_FACTS_SHOWN),
        mem.archived_memories(uid, "agent_trait", limit=ARCHIVED_FACTS_SHOWN),
    )
    levels = {t.name: t for t in st.traits}
    traits = {
        cat: [(spec, levels.get(spec.name)) for spec in TRAITS if spec.category == cat]
        for cat in TRAIT_CATEGORIES
    }
    agents = []
    for aid, persona in sorted(st.agents.items()):
        ext = external_id(session.tenant, aid) or aid
        agents.append(
            {
                "assistant_id": ext,
                "profile": persona.get("profile"),
                "traits": [
                    (external_memory_id(session.tenant, f"agent_trait:{aid}:{e.entry_id}"), e)
                    for e in persona.get("traits", ())
                ],
            }
        )
    archived_agent = [
        (external_memory_id(session.tenant, m.memory_id), m) for m in agent_traits.memories
    ]
    return ui.render(
        request,
        "profile.html",
        session=session,
        flash=ui.flash(session),
        tab="profile",
        user_id=user_id,
        profile=st.profile,
        traits=traits,
        n_levels=len(levels),
        kb=st.kb,
        archived_facts=facts,
        agents=agents,
        archived_agent=archived_agent,
        archived_agent_total=agent_traits.total,
        levels=LEVELS,
    )
