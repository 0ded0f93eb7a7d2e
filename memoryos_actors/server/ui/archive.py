"""A user's archive page (``/ui/users/{user}/archive``): the archived turns, newest first
or searched, a page at a time."""

from __future__ import annotations

from fastapi import Query, Request, Response

from .state import (
    UI,
    MemoryPage,
    Pager,
    pager_of,
    router,
)

#: Archived turns per page.
ARCHIVE_PER_PAGE = 50


@router.get("/users/{user_id}/archive", response_class=Response)
async def archive_page(
    request: Request,
    user_id: str,
    q: str = "",
    page_no: int = Query(1, alias="page"),
    ui: MemoryPage = UI,
) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    page_no = max(1, page_no)
    query = q.strip() or None
    got = await ui.memory().archived_memories(
        uid, "page", query, (page_no - 1) * ARCHIVE_PER_PAGE, ARCHIVE_PER_PAGE
    )
    if query is None:
        pager = pager_of(page_no, got.total, ARCHIVE_PER_PAGE)
    else:
        pager = Pager(page_no, None, got.has_more)
    return ui.render(
        request,
        "archive.html",
        session=session,
        flash=ui.flash(session),
        tab="archive",
        user_id=user_id,
        got=got,
        q=q,
        pager=pager,
        per_page=ARCHIVE_PER_PAGE,
    )
