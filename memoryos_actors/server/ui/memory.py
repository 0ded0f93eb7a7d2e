"""One memory's page (``/ui/users/{user}/memories/{id}``): the memory, its history, its
deletion (confirmed first) and its correction."""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from ...errors import UnknownMemory
from ...trait_table import TRAITS_BY_NAME
from ..tenancy import external_id, external_memory_id, internal_memory_id
from .sessions import Session
from .state import (
    LEVELS,
    TABS,
    UI,
    MemoryPage,
    quote,
    router,
)
from .web import Redirect, UIError


async def memory_of(
    ui: MemoryPage, session: Session, uid: str, memory_id: str
) -> tuple[Any, list[Any]]:
    """``(memory or None, its history)``; 404 page when there is neither (an
    unobserved trait has neither yet, and is shown all the same)."""
    mem = ui.memory()
    lib_id = internal_memory_id(session.tenant, memory_id)
    found: Any = None
    events: list[Any] = []
    try:
        found = await mem.get_memory(uid, lib_id)
    except UnknownMemory:
        pass
    try:
        events = await mem.memory_history(uid, lib_id)
    except UnknownMemory:
        pass
    kind, _, name = memory_id.partition(":")
    if found is None and not events and not (kind == "trait" and name in TRAITS_BY_NAME):
        raise UIError(404, "No such memory", f"no memory {memory_id!r}")
    return found, events


async def segment_pages(
    ui: MemoryPage, uid: str, found: Any, full: bool
) -> list[tuple[str, str, float]]:
    """A segment's pages ``(memory id, text, time)``, oldest first: from MTM; for an
    archived segment only when ``full`` (that reads the whole archive, so only the
    delete confirmation does it)."""
    if found.tier == "mtm":
        st = await ui.memory().user_state(uid)
        seg = next((s for s in st.segments if f"segment:{s.segment_id}" == found.memory_id), None)
        if seg is not None:
            return [
                (f"page:{p.page_id}", f"{p.query}\n{p.response}", p.timestamp) for p in seg.pages
            ]
    if not full:
        return []
    wanted = {f"page:{p}" for p in found.page_ids}
    listed = await ui.memory().memories(uid, kinds=["page"])
    return [(m.memory_id, m.text, m.timestamp) for m in listed if m.memory_id in wanted]


def back_url(user_id: str, memory_id: str, back: str) -> str:
    base = f"/ui/users/{quote(user_id)}"
    if back in ("archive", "profile"):
        return f"{base}/{back}"
    if back == "memory":
        return f"{base}/memories/{quote(memory_id)}"
    return base


@router.get("/users/{user_id}/memories/{memory_id}", response_class=Response)
async def memory_page(
    request: Request, user_id: str, memory_id: str, ui: MemoryPage = UI
) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    found, events = await memory_of(ui, session, uid, memory_id)
    kind = memory_id.partition(":")[0]
    spec = TRAITS_BY_NAME.get(memory_id.partition(":")[2]) if kind == "trait" else None
    pages = (
        await segment_pages(ui, uid, found, full=False)
        if found is not None and found.kind == "segment"
        else []
    )
    return ui.render(
        request,
        "memory.html",
        session=session,
        flash=ui.flash(session),
        user_id=user_id,
        memory_id=memory_id,
        kind=kind,
        found=found,
        pages=pages,
        events=[(external_memory_id(session.tenant, e.memory_id), e) for e in events],
        spec=spec,
        levels=LEVELS,
        assistant=(external_id(session.tenant, found.assistant_id) or found.assistant_id)
        if found and found.assistant_id
        else None,
    )


@router.get("/users/{user_id}/memories/{memory_id}/delete", response_class=Response)
async def confirm_delete(
    request: Request, user_id: str, memory_id: str, back: str = "overview", ui: MemoryPage = UI
) -> Response:
    session = ui.session_of(request)
    uid = await ui.known(session, user_id)
    found, _events = await memory_of(ui, session, uid, memory_id)
    if found is None:
        raise UIError(404, "No such memory", f"{memory_id!r} is already gone")
    pages = await segment_pages(ui, uid, found, full=True) if found.kind == "segment" else []
    return ui.render(
        request,
        "confirm_delete.html",
        session=session,
        user_id=user_id,
        memory_id=memory_id,
        found=found,
        pages=pages,
        back=back if back in TABS else "overview",
    )


@router.post("/users/{user_id}/memories/{memory_id}/delete", response_class=Response)
async def delete(request: Request, user_id: str, memory_id: str, ui: MemoryPage = UI) -> Response:
    session = ui.session_of(request)
    form = await ui.form_of(request, session)
    uid = await ui.known(session, user_id)
    try:
        event = await ui.memory().delete_memory(uid, internal_memory_id(session.tenant, memory_id))
    except UnknownMemory:
        raise UIError(404, "No such memory", f"{memory_id!r} is already gone") from None
    took = [external_memory_id(session.tenant, mid) for mid in event.rewrote]
    session.flash.append(
        f"Deleted {memory_id}; what quoted it went too: {', '.join(took)}."
        if took
        else f"Deleted {memory_id}."
    )
    raise Redirect(back_url(user_id, memory_id, form.get("back", "overview")))


@router.post("/users/{user_id}/memories/{memory_id}/correct", response_class=Response)
async def correct(request: Request, user_id: str, memory_id: str, ui: MemoryPage = UI) -> Response:
    session = ui.session_of(request)
    form = await ui.form_of(request, session)
    uid = await ui.known(session, user_id)
    value, evidence = form.get("value", ""), form.get("evidence", "")
    event = await ui.memory().correct_memory(
        uid, internal_memory_id(session.tenant, memory_id), value, evidence
    )
    session.flash.append(f"Corrected {memory_id}: {event.old or '(none)'} -> {event.new}.")
    raise Redirect(back_url(user_id, memory_id, form.get("back", "memory")))
