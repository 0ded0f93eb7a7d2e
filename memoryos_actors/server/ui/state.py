"""What the memory page's routes share: the one ``/ui`` router every page module adds its
routes to, the page's state (memory system, keys, sessions, templates) that each route is
handed as ``ui`` (a FastAPI dependency on the app's state), and the helpers every page
uses (render, sessions, CSRF-checked forms, tenant-scoped users, pagination).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from ...aio import AsyncMemoryOS
from ...config import MemoryConfig
from ...errors import InvalidInput
from ..keys import KeyRecord, KeyStore
from ..ratelimit import RateLimiter
from ..state import user_on_disk
from ..tenancy import internal_id
from .sessions import Session, SessionStore
from .web import Redirect, StaticFiles, UIError, UIRoute, make_templates, read_form

__all__ = [
    "COOKIE",
    "LOGIN_COOKIE",
    "UI",
    "MemoryPage",
    "Pager",
    "pager_of",
    "quote",
    "router",
]

COOKIE = "memoryos_ui"
"""The session cookie (an opaque id; HttpOnly, SameSite=Strict, path ``/ui``)."""
LOGIN_COOKIE = "memoryos_ui_login"
"""The login form's CSRF cookie (double submit: the form carries the same token)."""

#: Failed logins a client address may make at once, and per second after that.
LOGIN_BURST = 10
LOGIN_RATE = 1.0
#: The tabs of a user's page, and the trait levels a correction may set.
TABS = ("overview", "archive", "profile", "search")
LEVELS = ("low", "medium", "high")


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


def pager_of(page: int, total: int, per: int) -> Pager:
    """Page ``page`` of ``total`` rows, ``per`` on a page (past the last: the last)."""
    pages = max(1, math.ceil(total / per))
    return Pager(min(page, pages), pages, page < pages)


def quote(value: str) -> str:
    """``value`` as one path segment of a URL."""
    from urllib.parse import quote as url_quote

    return url_quote(value, safe="")


class MemoryPage:
    """The memory page's state over the memory system ``memory()``, the server's
    ``keys`` and request ``limiter`` (a session's requests count against its key's
    limit): its templates (compiled here, not in the first visitor's request), static
    files, sessions and login limit."""

    def __init__(
        self,
        memory: Callable[[], AsyncMemoryOS],
        keys: KeyStore,
        limiter: RateLimiter,
        data_dir: Path,
        config: MemoryConfig,
    ) -> None:
        self.memory = memory
        self.keys = keys
        self.limiter = limiter
        self.data_dir = data_dir
        self.config = config
        self.templates = make_templates()
        for name in self.templates.env.list_templates():
            self.templates.get_template(name)
        self.static = StaticFiles()
        self.sessions = SessionStore()
        self.login_limiter = RateLimiter(LOGIN_RATE, LOGIN_BURST)

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> Response:
        """Template ``name`` with ``ctx`` (and the defaults every page's layout reads)."""
        ctx.setdefault("session", None)
        ctx.setdefault("flash", [])
        ctx.setdefault("tab", None)
        ctx.setdefault("user_id", None)
        ctx["static"] = self.static.url
        return self.templates.TemplateResponse(request, name, ctx, status_code=status)

    def error_page(self, request: Request, err: UIError) -> Response:
        """The page that shows ``err``."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        return self.render(request, "error.html", err.status, session=session, error=err)

    def key_record(self, key_id: str) -> KeyRecord | None:
        return next((r for r in self.keys.records() if r.key_id == key_id), None)

    def session_of(self, request: Request) -> Session:
        """The request's live session, else a redirect to the login form; counts the
        request against its key's limit (429 page when past it)."""
        sid = request.cookies.get(COOKIE)
        session = self.sessions.get(sid)
        if session is None:
            raise Redirect("/ui/login")
        rec = self.key_record(session.key_id)
        if rec is None:  # the key was revoked: its sessions end
            self.sessions.drop_key(session.key_id)
            raise Redirect("/ui/login")
        wait = self.limiter.check(rec.key_id, time.monotonic(), rec.rate_per_second, rec.burst)
        if wait:
            raise UIError(
                429,
                "Slow down",
                f"request limit of key {rec.key_id} reached; try again in {wait} s",
                retry_after=wait,
            )
        return session

    @staticmethod
    def flash(session: Session) -> list[str]:
        """The session's messages for the next page, taken out of it."""
        out, session.flash = session.flash, []
        return out

    @staticmethod
    async def form_of(request: Request, session: Session) -> dict[str, str]:
        """The posted form, refused (403 page) unless it carries the session's token."""
        form = await read_form(request)
        if not session.check_csrf(form.get("csrf")):
            raise UIError(
                403,
                "Refused",
                "the form's token is missing or stale: reload the page and try again",
            )
        return form

    async def known(self, session: Session, user_id: str) -> str:
        """The library id of the session's tenant's user ``user_id``; 404 page if the
        tenant has no such user (another tenant's user included)."""
        try:
            uid = internal_id(session.tenant, user_id)
        except InvalidInput:
            raise UIError(404, "No such user", f"no user {user_id!r}") from None
        mem = self.memory()
        # One stat() of the user's directory, as the JSON API does.
        if not user_on_disk(mem.sync, uid) and uid not in await mem.active_users():
            raise UIError(404, "No such user", f"no user {user_id!r}")
        return uid


def page_state(request: Request) -> MemoryPage:
    """The :class:`MemoryPage` of the app serving ``request`` (set by
    :func:`~memoryos_actors.server.ui.mount_ui`)."""
    page: MemoryPage = request.app.state.memory_page
    return page


#: A route's parameter ``ui: MemoryPage = UI`` is the app's :class:`MemoryPage`.
UI: Any = Depends(page_state)


def _error_page(request: Request, err: UIError) -> Response:
    return page_state(request).error_page(request, err)


class MemoryPageRoute(UIRoute):
    """A route of the memory page: errors and redirects answered as pages."""

    error_page = staticmethod(_error_page)


#: The ``/ui`` routes: each page's module adds its own (see :mod:`memoryos_actors.server.ui`).
router = APIRouter(prefix="/ui", include_in_schema=False, route_class=MemoryPageRoute)
