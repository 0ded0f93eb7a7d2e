"""Plumbing of the memory page: templates, static files, security headers, forms, errors.

Every answer under ``/ui`` carries a Content-Security-Policy that allows scripts, styles
and images from this server only and no inline script (``script-src 'self'``), and is not
cached (``no-store``: the pages hold what users said). Templates are Jinja2 with
autoescaping on for every template, so stored text, user ids and queries are always
text, never markup. Mutating requests are forms posted with the session's CSRF token,
from this origin (checked against ``Origin`` and ``Sec-Fetch-Site`` when the browser
sends them).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any, ClassVar
from urllib.parse import parse_qs, quote

import jinja2
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...errors import (
    ActorCrashed,
    GatewayError,
    InvalidInput,
    MemoryOSError,
    Overloaded,
    SystemClosed,
    UnknownMemory,
    UnknownUser,
)

__all__ = [
    "CSP",
    "PAGE_HEADERS",
    "Redirect",
    "StaticFiles",
    "UIError",
    "UIRoute",
    "make_templates",
    "read_form",
    "same_origin",
]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""The Content-Security-Policy of every memory-page answer."""

PAGE_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
)
"""The headers of every answer under ``/ui``, each unless the answer sets its own (the
static files set ``Cache-Control``). The server's gate adds them, so the answers no route
of the page makes (404 and 405 for unknown paths and methods, the gate's refusals) carry
them too."""

#: Largest form the memory page accepts, fields (its biggest form has four).
_MAX_FIELDS = 10


class Redirect(Exception):
    """Answer with a 303 to ``url`` (a path under ``/ui``)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


@dataclass
class UIError(Exception):
    """Answer with the error page: ``status``, a title and a message."""

    status: int
    title: str
    message: str
    retry_after: int | None = None


_STATUS: tuple[tuple[type[MemoryOSError], int, str], ...] = (
    (InvalidInput, 422, "Not accepted"),
    (UnknownUser, 404, "No such user"),
    (UnknownMemory, 404, "No such memory"),
    (Overloaded, 503, "Busy"),
    (SystemClosed, 503, "Shutting down"),
    (ActorCrashed, 503, "Try again"),
    (GatewayError, 502, "LLM provider failed"),
)


def ui_error_of(exc: MemoryOSError) -> UIError:
    """The error page for a library error (the same statuses as the JSON API)."""
    status, title = next(((s, t) for cls, s, t in _STATUS if isinstance(exc, cls)), (500, "Error"))
    message = str(exc.args[0]) if exc.args else type(exc).__name__
    return UIError(status, title, message, 1 if status == 503 else None)


def _when(ts: float | None) -> str:
    if ts is None or not ts:
        return "-"
    try:
        return datetime.fromtimestamp(float(ts), tz=UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return f"t={ts}"


def _q(value: object) -> str:
    """A URL path segment: every reserved character percent-encoded."""
    return quote(str(value), safe="")


def make_templates() -> Jinja2Templates:
    """The templates of the memory page, from the package (autoescape on for all)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memoryos_actors.server.ui", "templates"),
        autoescape=True,  # every template, whatever its name: stored text is untrusted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = _q
    env.filters["when"] = _when
    return Jinja2Templates(env=env)


class StaticFiles:
    """The memory page's CSS and JavaScript, read once from the package, served with a
    content hash in their URL so they can be cached for a long time."""

    _TYPES: ClassVar[dict[str, str]] = {
        ".css": "text/css; charset=utf-8",
        ".js": "text/javascript; charset=utf-8",
        ".svg": "image/svg+xml",
    }

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str]] = {}
        self.version: dict[str, str] = {}
        root = resources.files("memoryos_actors.server.ui").joinpath("static")
        for item in root.iterdir():
            suffix = "." + item.name.rsplit(".", 1)[-1]
            if item.is_file() and suffix in self._TYPES:
                data = item.read_bytes()
                self.files[item.name] = (data, self._TYPES[suffix])
                self.version[item.name] = hashlib.sha256(data).hexdigest()[:12]

    def url(self, name: str) -> str:
        """The URL of static file ``name`` (with its content hash)."""
        return f"/ui/static/{name}?v={self.version[name]}"

    def response(self, name: str) -> Response:
        """The file ``name`` (404 if the package has none)."""
        found = self.files.get(name)
        if found is None:
            raise UIError(404, "Not found", "no such file")
        data, ctype = found
        return Response(data, media_type=ctype, headers={"Cache-Control": "public, max-age=86400"})


def same_origin(request: Request) -> bool:
    """Whether a mutating request comes from a page of this server: ``Sec-Fetch-Site``
    and ``Origin``, when the browser sends them, must say so."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin == f"{request.url.scheme}://{host}"


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a posted form (``application/x-www-form-urlencoded``), first value of
    each; :class:`UIError` for anything else or a cross-site post."""
    if not same_origin(request):
        raise UIError(403, "Refused", "this form was not sent from this server's pages")
    ctype = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        raise UIError(415, "Refused", "send the form as application/x-www-form-urlencoded")
    body = await request.body()
    try:
        fields = parse_qs(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=_MAX_FIELDS,
            errors="strict",
        )
    except (UnicodeDecodeError, ValueError):
        raise UIError(422, "Not accepted", "the form could not be read") from None
    return {k: v[0] for k, v in fields.items()}


ErrorPage = Callable[[Request, UIError], Response]


class UIRoute(APIRoute):
    """A route of the memory page: ``Server-Timing`` (``app``: the handler's time, ms,
    after any entry the handler set itself) on every answer; redirects and errors (the
    library's typed errors, bad query parameters) answered as pages. (The security
    headers, :data:`PAGE_HEADERS`, are the gate's to add.)

    ``error_page`` is set on the class by the router that uses it.
    """

    error_page: ErrorPage | None = None

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        inner = super().get_route_handler()
        error_page = type(self).error_page

        async def handler(request: Request) -> Response:
            started = time.perf_counter()
            try:
                response = await inner(request)
            except Redirect as r:
                response = Response(status_code=303, headers={"Location": r.url})
            except (UIError, MemoryOSError, RequestValidationError, StarletteHTTPException) as exc:
                if isinstance(exc, MemoryOSError):
                    err = ui_error_of(exc)
                elif isinstance(exc, RequestValidationError):
                    err = UIError(
                        422,
                        "Not accepted",
                        "; ".join(
                            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
                            for e in exc.errors()[:3]
                        )
                        or "invalid input",
                    )
                elif isinstance(exc, StarletteHTTPException):
                    err = UIError(exc.status_code, "Error", str(exc.detail))
                else:
                    err = exc
                assert error_page is not None
                response = error_page(request, err)
                if err.retry_after:
                    response.headers["Retry-After"] = str(err.retry_after)
            total = f"app;dur={(time.perf_counter() - started) * 1000.0:.1f}"
            parts = response.headers.get("Server-Timing")  # a handler's own, e.g. retrieve
            response.headers["Server-Timing"] = f"{parts}, {total}" if parts else total
            return response

        return handler
