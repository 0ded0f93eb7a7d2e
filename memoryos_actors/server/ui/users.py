"""The users page (``/ui/users``): the tenant's users, searchable, a page at a time, each
with what its memory holds."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Query, Request, Response

from ...aio import AsyncMemoryOS
from ...errors import MemoryOSError
from ..tenancy import external_id, internal_id, tenant_user_ids
from .state import (
    UI,
    MemoryPage,
    pager_of,
    router,
)

#: Rows per page of the users list.
USERS_PER_PAGE = 25


async def user_row(mem: AsyncMemoryOS, tenant: str, uid: str) -> dict[str, Any]:
    row: dict[str, Any] = {"user_id": external_id(tenant, uid), "ok": False}
    try:
        st, arch = await asyncio.gather(mem.user_state(uid), mem.archived_memories(uid, limit=1))
    except MemoryOSError as exc:
        row["error"] = type(exc).__name__
        return row
    mtm_times = [p.timestamp for seg in st.segments for p in seg.pages]
    times = [p.timestamp for p in st.stm] + mtm_times + [m.timestamp for m in arch.memories]
    row.update(
        ok=True,
        turns=st.turns,
        stm=len(st.stm),
        mtm=len(mtm_times),
        segments=len(st.segments),
        archive=arch.total,
        facts=len(st.kb),
        last=max(times) if times else None,
    )
    return row


@router.get("/users", response_class=Response)
async def users(
    request: Request, q: str = "", page_no: int = Query(1, alias="page"), ui: MemoryPage = UI
) -> Response:
    session = ui.session_of(request)
    mem = ui.memory()
    everyone = set(await mem.users()) | set(await mem.active_users())
    mine = tenant_user_ids(session.tenant, everyone)
    needle = q.strip().casefold()
    if needle:
        mine = [u for u in mine if needle in u.casefold()]
    pager = pager_of(max(1, page_no), len(mine), USERS_PER_PAGE)
    shown = mine[(pager.page - 1) * USERS_PER_PAGE : pager.page * USERS_PER_PAGE]
    rows = await asyncio.gather(
        *(user_row(mem, session.tenant, internal_id(session.tenant, u)) for u in shown)
    )
    return ui.render(
        request,
        "users.html",
        session=session,
        flash=ui.flash(session),
        q=q,
        rows=rows,
        total=len(mine),
        pager=pager,
    )
