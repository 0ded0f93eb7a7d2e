"""A user's search page (``/ui/users/{user}/search``): what retrieval returns for a query,
by tier, and the prompt text it makes."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from ..tenancy import external_memory_id, internal_id
from .state import (
    UI,
    MemoryPage,
    router,
)


@router.get("/users/{user_id}/search", response_class=Response)
async def search_page(
    request: Request, user_id: str, q: str = "", assistant: str = "default", ui: MemoryPage = UI
) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    ctx = None
    groups: list[tuple[str, list[tuple[str, Any]]]] = []
    if q.strip():
        aid = internal_id(session.tenant, assistant or "default", "assistant_id")
        ctx = await ui.memory().retrieve(uid, q, aid)

        def mid(item: Any) -> str:
            if item.kind == "agent_trait":
                return external_memory_id(session.tenant, f"agent_trait:{aid}:{item.item_id}")
            return f"{item.kind}:{item.item_id}"

        groups = [
            (title, [(mid(i), i) for i in items])
            for title, items in (
                ("Relevant past pages (MTM and archive)", ctx.mtm),
                ("Segments", ctx.segments),
                ("Facts", ctx.kb),
                ("Assistant traits", ctx.agent_traits),
                ("Recent dialogue (STM)", tuple(reversed(ctx.stm))),
            )
        ]
    response = ui.render(
        request,
        "search.html",
        session=session,
        flash=ui.flash(session),
        tab="search",
        user_id=user_id,
        q=q,
        assistant=assistant,
        ctx=ctx,
        groups=groups,
        rendered=ctx.render() if ctx is not None else "",
    )
    if ctx is not None:
        response.headers["Server-Timing"] = f"retrieve;dur={ctx.elapsed_ms:.1f}"
    return response
