"""The routes of the memory page (``/ui``): log in, users, one user, search, prune, correct.

Every page reads and every form writes through the same :class:`AsyncMemoryOS` calls as the
JSON API (``user_state``, ``archived_memories``, ``retrieve``, ``get_memory``,
``memory_history``, ``delete_memory``, ``correct_memory``), with the same tenant scoping:
a session sees the users of its key's tenant only, and another tenant's user is a 404
page. Lists are paginated so a page costs the same whatever the length of a history.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request, Response

from ...aio import AsyncMemoryOS
from ...config import MemoryConfig
from ...errors import InvalidInput, MemoryOSError, UnknownMemory
from ...trait_table import TRAIT_CATEGORIES, TRAITS, TRAITS_BY_NAME
from ..keys import KeyRecord, KeyStore
from ..ratelimit import RateLimiter
from ..state import user_on_disk
from ..tenancy import external_id, external_memory_id, internal_id, internal_memory_id
from .charts import heat_chart, history_chart
from .sessions import Session, SessionStore
from .web import Redirect, StaticFiles, UIError, UIRoute, make_templates, read_form

__all__ = ["build_router"]

COOKIE = "memoryos_ui"
"""The session cookie (an opaque id; HttpOnly, SameSite=Strict, path ``/ui``)."""
LOGIN_COOKIE = "memoryos_ui_login"
"""The login form's CSRF cookie (double submit: the form carries the same token)."""

#: Rows per page of each list.
USERS_PER_PAGE = 25
SEGMENTS_PER_PAGE = 20
#: Pages of each segment the user's page shows (all of them are on the segment's page).
SEGMENT_PAGES_SHOWN = 3
ARCHIVE_PER_PAGE = 50
ARCHIVED_FACTS_SHOWN = 50
#: Failed logins a client address may make at once, and per second after that.
LOGIN_BURST = 10
LOGIN_RATE = 1.0
_TABS = ("overview", "archive", "profile", "search")
_LEVELS = ("low", "medium", "high")


@dataclass(frozen=True, slots=True)
class Pager:
    """Where a paginated list is: ``page`` (from 1) of ``pages`` (None: unknown, as for
    search results), and whether there is a next one."""

    page: int
    pages: int | None
    has_next: bool

    @property
    def has_prev(self) -> bool:
        return self.page > 1


def _pager(page: int, total: int, per: int) -> Pager:
    pages = max(1, math.ceil(total / per))
    return Pager(min(page, pages), pages, page < pages)


def build_router(
    memory: Callable[[], AsyncMemoryOS],
    keys: KeyStore,
    limiter: RateLimiter,
    data_dir: Path,
    config: MemoryConfig,
) -> APIRouter:
    """The ``/ui`` routes over the memory system ``memory()`` and the server's ``keys``
    and request ``limiter`` (a session's requests count against its key's limit)."""
    templates = make_templates()
    for name in templates.env.list_templates():
        templates.get_template(name)  # compiled now, not in the first visitor's request
    static = StaticFiles()
    sessions = SessionStore()
    login_limiter = RateLimiter(LOGIN_RATE, LOGIN_BURST)

    def render(request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        ctx.setdefault("session", None)
        ctx.setdefault("flash", [])
        ctx.setdefault("tab", None)
        ctx.setdefault("user_id", None)
        ctx["static"] = static.url
        return templates.TemplateResponse(request, name, ctx, status_code=status)

    def error_page(request: Request, err: UIError) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        return render(request, "error.html", err.status, session=session, error=err)

    route_class = type("MemoryPageRoute", (UIRoute,), {"error_page": staticmethod(error_page)})
    router = APIRouter(prefix="/ui", include_in_schema=False, route_class=route_class)

    # -- sessions ---------------------------------------------------------------------------

    def key_record(key_id: str) -> KeyRecord | None:
        return next((r for r in keys.records() if r.key_id == key_id), None)

    def session_of(request: Request) -> Session:
        """The request's live session, else a redirect to the login form; counts the
        request against its key's limit (429 page when past it)."""
        sid = request.cookies.get(COOKIE)
        session = sessions.get(sid)
        if session is None:
            raise Redirect("/ui/login")
        rec = key_record(session.key_id)
        if rec is None:  # the key was revoked: its sessions end
            sessions.drop_key(session.key_id)
            raise Redirect("/ui/login")
        wait = limiter.check(rec.key_id, time.monotonic(), rec.rate_per_second, rec.burst)
        if wait:
            raise UIError(
                429,
                "Slow down",
                f"request limit of key {rec.key_id} reached; try again in {wait} s",
                retry_after=wait,
            )
        return session

    def flash(session: Session) -> list[str]:
        out, session.flash = session.flash, []
        return out

    async def form_of(request: Request, session: Session) -> dict[str, str]:
        form = await read_form(request)
        if not session.check_csrf(form.get("csrf")):
            raise UIError(
                403,
                "Refused",
                "the form's token is missing or stale: reload the page and try again",
            )
        return form

    def login_form(request: Request, status: int = 200, message: str = "") -> Response:
        import secrets

        token = secrets.token_urlsafe(32)
        response = render(request, "login.html", status, token=token, message=message)
        response.set_cookie(
            LOGIN_COOKIE,
            token,
            max_age=3600,
            path="/ui/login",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @router.get("", response_class=Response)
    @router.get("/", response_class=Response)
    async def home(request: Request) -> Response:
        if sessions.get(request.cookies.get(COOKIE)) is None:
            raise Redirect("/ui/login")
        raise Redirect("/ui/users")

    @router.get("/login", response_class=Response)
    async def login_page(request: Request) -> Response:
        if sessions.get(request.cookies.get(COOKIE)) is not None:
            raise Redirect("/ui/users")
        return login_form(request)

    @router.post("/login", response_class=Response)
    async def login(request: Request) -> Response:
        form = await read_form(request)
        token = request.cookies.get(LOGIN_COOKIE)
        if not token or form.get("csrf") != token:
            return login_form(request, 403, "The form expired: enter the key again.")
        client = request.client.host if request.client else "unknown"
        wait = login_limiter.check(f"login:{client}", time.monotonic())
        if wait:
            raise UIError(
                429, "Slow down", f"too many attempts; try again in {wait} s", retry_after=wait
            )
        rec = keys.lookup(form.get("key", "").strip())
        if rec is None:
            return login_form(request, 401, "That is not a valid API key.")
        sessions.drop(request.cookies.get(COOKIE))
        sid, _session = sessions.create(rec.key_id, rec.tenant)
        response = Response(status_code=303, headers={"Location": "/ui/users"})
        response.set_cookie(
            COOKIE,
            sid,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/ui/login", httponly=True, samesite="strict")
        return response

    @router.post("/logout", response_class=Response)
    async def logout(request: Request) -> Response:
        session = sessions.get(request.cookies.get(COOKIE))
        if session is not None:
            await form_of(request, session)
            sessions.drop(request.cookies.get(COOKIE))
        response = Response(status_code=303, headers={"Location": "/ui/login"})
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
        return response

    @router.get("/static/{name}", response_class=Response)
    async def static_file(name: str) -> Response:
        return static.response(name)

    # -- users ------------------------------------------------------------------------------

    async def known(session: Session, user_id: str) -> str:
        """The library id of the session's tenant's user ``user_id``; 404 page if the
        tenant has no such user (another tenant's user included)."""
        try:
            uid = internal_id(session.tenant, user_id)
        except InvalidInput:
            raise UIError(404, "No such user", f"no user {user_id!r}") from None
        mem = memory()
        # One stat() of the user's directory, as the JSON API does.
        if not user_on_disk(mem.sync, uid) and uid not in await mem.active_users():
            raise UIError(404, "No such user", f"no user {user_id!r}")
        return uid

    async def user_row(mem: AsyncMemoryOS, tenant: str, uid: str) -> dict[str, Any]:
        row: dict[str, Any] = {"user_id": external_id(tenant, uid), "ok": False}
        try:
            st, arch = await asyncio.gather(
                mem.user_state(uid), mem.archived_memories(uid, limit=1)
            )
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
        request: Request, q: str = "", page_no: int = Query(1, alias="page")
    ) -> Response:
        session = session_of(request)
        mem = memory()
        everyone = set(await mem.users()) | set(await mem.active_users())
        mine = sorted(
            u for u in (external_id(session.tenant, uid) for uid in everyone) if u is not None
        )
        needle = q.strip().casefold()
        if needle:
            mine = [u for u in mine if needle in u.casefold()]
        pager = _pager(max(1, page_no), len(mine), USERS_PER_PAGE)
        shown = mine[(pager.page - 1) * USERS_PER_PAGE : pager.page * USERS_PER_PAGE]
        rows = await asyncio.gather(
            *(user_row(mem, session.tenant, internal_id(session.tenant, u)) for u in shown)
        )
        return render(
            request,
            "users.html",
            session=session,
            flash=flash(session),
            q=q,
            rows=rows,
            total=len(mine),
            pager=pager,
        )

    # -- one user ---------------------------------------------------------------------------

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
    async def user_page(request: Request, user_id: str, seg: int = 1) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        mem = memory()
        st, arch = await asyncio.gather(
            mem.user_state(uid), mem.archived_memories(uid, limit=0, per_day=True)
        )
        segments = segment_rows(st)  # hottest first
        pager = _pager(max(1, seg), len(segments), SEGMENTS_PER_PAGE)
        shown = segments[(pager.page - 1) * SEGMENTS_PER_PAGE : pager.page * SEGMENTS_PER_PAGE]
        heat = heat_chart(
            [(s["segment_id"], s["heat"], s["visits"], len(s["pages"])) for s in segments],
            config.promotion_threshold,
        )
        history = history_chart(
            [p.timestamp for p in st.stm],
            [p.timestamp for s in st.segments for p in s.pages],
            arch.per_day,
        )
        mtm_pages = sum(len(s["pages"]) for s in segments)
        return render(
            request,
            "user.html",
            session=session,
            flash=flash(session),
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
            tau=config.promotion_threshold,
            recent=SEGMENT_PAGES_SHOWN,
        )

    @router.get("/users/{user_id}/archive", response_class=Response)
    async def archive_page(
        request: Request, user_id: str, q: str = "", page_no: int = Query(1, alias="page")
    ) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        page_no = max(1, page_no)
        query = q.strip() or None
        got = await memory().archived_memories(
            uid, "page", query, (page_no - 1) * ARCHIVE_PER_PAGE, ARCHIVE_PER_PAGE
        )
        if query is None:
            pager = _pager(page_no, got.total, ARCHIVE_PER_PAGE)
        else:
            pager = Pager(page_no, None, got.has_more)
        return render(
            request,
            "archive.html",
            session=session,
            flash=flash(session),
            tab="archive",
            user_id=user_id,
            got=got,
            q=q,
            pager=pager,
            per_page=ARCHIVE_PER_PAGE,
        )

    @router.get("/users/{user_id}/profile", response_class=Response)
    async def profile_page(request: Request, user_id: str) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        mem = memory()
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
        return render(
            request,
            "profile.html",
            session=session,
            flash=flash(session),
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
            levels=_LEVELS,
        )

    @router.get("/users/{user_id}/search", response_class=Response)
    async def search_page(
        request: Request, user_id: str, q: str = "", assistant: str = "default"
    ) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        ctx = None
        groups: list[tuple[str, list[tuple[str, Any]]]] = []
        if q.strip():
            aid = internal_id(session.tenant, assistant or "default", "assistant_id")
            ctx = await memory().retrieve(uid, q, aid)

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
        response = render(
            request,
            "search.html",
            session=session,
            flash=flash(session),
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

    # -- one memory -------------------------------------------------------------------------

    async def memory_of(session: Session, uid: str, memory_id: str) -> tuple[Any, list[Any]]:
        """``(memory or None, its history)``; 404 page when there is neither (an
        unobserved trait has neither yet, and is shown all the same)."""
        mem = memory()
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

    async def segment_pages(uid: str, found: Any, full: bool) -> list[tuple[str, str, float]]:
        """A segment's pages ``(memory id, text, time)``, oldest first: from MTM; for an
        archived segment only when ``full`` (that reads the whole archive, so only the
        delete confirmation does it)."""
        if found.tier == "mtm":
            st = await memory().user_state(uid)
            seg = next(
                (s for s in st.segments if f"segment:{s.segment_id}" == found.memory_id), None
            )
            if seg is not None:
                return [
                    (f"page:{p.page_id}", f"{p.query}\n{p.response}", p.timestamp)
                    for p in seg.pages
                ]
        if not full:
            return []
        wanted = {f"page:{p}" for p in found.page_ids}
        listed = await memory().memories(uid, kinds=["page"])
        return [(m.memory_id, m.text, m.timestamp) for m in listed if m.memory_id in wanted]

    def back_url(user_id: str, memory_id: str, back: str) -> str:
        base = f"/ui/users/{_quote(user_id)}"
        if back in ("archive", "profile"):
            return f"{base}/{back}"
        if back == "memory":
            return f"{base}/memories/{_quote(memory_id)}"
        return base

    @router.get("/users/{user_id}/memories/{memory_id}", response_class=Response)
    async def memory_page(request: Request, user_id: str, memory_id: str) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        found, events = await memory_of(session, uid, memory_id)
        kind = memory_id.partition(":")[0]
        spec = TRAITS_BY_NAME.get(memory_id.partition(":")[2]) if kind == "trait" else None
        pages = (
            await segment_pages(uid, found, full=False)
            if found is not None and found.kind == "segment"
            else []
        )
        return render(
            request,
            "memory.html",
            session=session,
            flash=flash(session),
            user_id=user_id,
            memory_id=memory_id,
            kind=kind,
            found=found,
            pages=pages,
            events=[(external_memory_id(session.tenant, e.memory_id), e) for e in events],
            spec=spec,
            levels=_LEVELS,
            assistant=(external_id(session.tenant, found.assistant_id) or found.assistant_id)
            if found and found.assistant_id
            else None,
        )

    @router.get("/users/{user_id}/memories/{memory_id}/delete", response_class=Response)
    async def confirm_delete(
        request: Request, user_id: str, memory_id: str, back: str = "overview"
    ) -> Response:
        session = session_of(request)
        uid = await known(session, user_id)
        found, _events = await memory_of(session, uid, memory_id)
        if found is None:
            raise UIError(404, "No such memory", f"{memory_id!r} is already gone")
        pages = await segment_pages(uid, found, full=True) if found.kind == "segment" else []
        return render(
            request,
            "confirm_delete.html",
            session=session,
            user_id=user_id,
            memory_id=memory_id,
            found=found,
            pages=pages,
            back=back if back in _TABS else "overview",
        )

    @router.post("/users/{user_id}/memories/{memory_id}/delete", response_class=Response)
    async def delete(request: Request, user_id: str, memory_id: str) -> Response:
        session = session_of(request)
        form = await form_of(request, session)
        uid = await known(session, user_id)
        try:
            event = await memory().delete_memory(uid, internal_memory_id(session.tenant, memory_id))
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
    async def correct(request: Request, user_id: str, memory_id: str) -> Response:
        session = session_of(request)
        form = await form_of(request, session)
        uid = await known(session, user_id)
        value, evidence = form.get("value", ""), form.get("evidence", "")
        event = await memory().correct_memory(
            uid, internal_memory_id(session.tenant, memory_id), value, evidence
        )
        session.flash.append(f"Corrected {memory_id}: {event.old or '(none)'} -> {event.new}.")
        raise Redirect(back_url(user_id, memory_id, form.get("back", "memory")))

    return router


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
