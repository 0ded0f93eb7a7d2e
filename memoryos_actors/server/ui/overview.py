"""A user's overview page (``/ui/users/{user}``): recent dialogue, the topic segments
(hottest first, a page at a time), their heat and the turns over time."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Request, Response

from .charts import heat_chart, history_chart
from .state import (
    UI,
    MemoryPage,
    pager_of,
    router,
)

#: Segments per page of the overview.
SEGMENTS_PER_PAGE = 20
#: Pages of each segment the overview shows (all of them are on the segment's page).
SEGMENT_PAGES_SHOWN = 3


def segment_rows(st: Any) -> list[dict[str, Any]]:
    return [
        {
            "segment_id": s.segment_id,
            "heat": s.heat,
            "visits": s.n_visit,
            "interactions": s.l_interaction,
            "pages": s.pages,
            "summary": s.summary,
            "keywords": sorted(s.keywords),
            "last_access": s.last_access,
        }
        for s in st.segments
    ]


@router.get("/users/{user_id}", response_class=Response)
async def user_page(request: Request, user_id: str, seg: int = 1, ui: MemoryPage = UI) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    mem = ui.memory()
    st, arch = await asyncio.gather(
        mem.user_state(uid), mem.archived_memories(uid, limit=0, per_day=True)
    )
    segments = segment_rows(st)  # hottest first
    pager = pager_of(max(1, seg), len(segments), SEGMENTS_PER_PAGE)
    shown = segments[(pager.page - 1) * SEGMENTS_PER_PAGE : pager.page * SEGMENTS_PER_PAGE]
    heat = heat_chart(
        [(s["segment_id"], s["heat"], s["visits"], len(s["pages"])) for s in segments],
        ui.config.promotion_threshold,
    )
    history = history_chart(
        [p.timestamp for p in st.stm],
        [p.timestamp for s in st.segments for p in s.pages],
        arch.per_day,
    )
    mtm_pages = sum(len(s["pages"]) for s in segments)
    return ui.render(
        request,
        "user.html",
        session=session,
        flash=ui.flash(session),
        tab="overview",
        user_id=user_id,
        st=st,
        stm=st.stm,
        segments=shown,
        pager=pager,
        n_segments=len(segments),
        mtm_pages=mtm_pages,
        archived=arch.total,
        heat=heat,
        history=history,
        tau=ui.config.promotion_threshold,
        recent=SEGMENT_PAGES_SHOWN,
    )
