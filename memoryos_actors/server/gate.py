"""The gate in front of the HTTP app: it refuses a request before anything reaches the
memory system, in this order: a key file that is not valid (503), the API key (401), the
key's request limit (429 with ``Retry-After``), the body size (413), a body that does not
arrive in time (408; 503 once the server is stopping), the content type (415) and the
body's encoding (422). It puts the accepted key in the ASGI scope (``KEY_SCOPE``),
sends ``/mcp`` to the MCP app, counts every answered request for ``/metrics`` by its
route template, and gives every answer under ``/ui`` the memory page's security headers
(the page's own routes, unknown paths and methods, and the gate's refusals alike)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from .http_errors import error_response
from .keys import KeyRecord, KeyStore
from .metrics import ServerMetrics
from .ratelimit import RateLimiter

__all__ = ["KEY_SCOPE", "ASGIApp", "Gate", "mcp_tenant"]

METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})
"""HTTP methods counted by name in the metrics; any other counts as ``other``."""
KEY_SCOPE = "memoryos.key"
"""The ASGI scope key under which the gate puts the accepted :class:`KeyRecord`."""
ASGIApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]


class Gate:
    """ASGI middleware that refuses requests before the app (and memory) sees them.

    Also counts every answered request for ``/metrics`` by its route template.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyStore,
        limiter: RateLimiter,
        metrics: ServerMetrics,
        max_body_bytes: int,
        body_timeout: float = 30.0,
        mcp_app: ASGIApp | None = None,
        page_headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.metrics = metrics
        self.max_body = max_body_bytes
        self.body_timeout = body_timeout
        self.mcp_app = mcp_app
        self.page_headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in page_headers
        ]
        self._stopping = False
        # The deadlines of the body reads under way: stop_reading() moves them to now.
        self._reads: set[asyncio.Timeout] = set()

    def stop_reading(self) -> None:
        """The server is stopping: a request still waiting for its body is answered 503
        at once (a body already received is read as usual), so a stalled upload does not
        hold the stop for the whole shutdown timeout. Call it from the event loop."""
        self._stopping = True
        now = asyncio.get_running_loop().time()
        for deadline in self._reads:
            if not deadline.expired():  # an expired one is answering already
                deadline.reschedule(now)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]
        path: str = scope.get("path", "")
        page = self.page_headers if path == "/ui" or path.startswith("/ui/") else None

        async def send_counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
                if page:
                    message = {**message, "headers": _with_defaults(message, page)}
            await send(message)

        is_mcp = path == "/mcp" or path.startswith("/mcp/")
        try:
            await self._handle(scope, receive, send_counted, path, is_mcp)
        finally:
            route = "/mcp" if is_mcp else getattr(scope.get("route"), "path", "unmatched")
            method = scope.get("method", "")
            self.metrics.observe(
                method if method in METHODS else "other",
                route,
                status[0],
                time.perf_counter() - started,
            )

    async def _handle(
        self, scope: MutableMapping[str, Any], receive: Any, send: Any, path: str, is_mcp: bool
    ) -> None:
        protected = is_mcp or path == "/v1" or path.startswith("/v1/")
        if protected:
            problem = self.keys.problem
            if problem is not None:
                # The key file was changed into something that is not one: no key is
                # valid until it is fixed, and the caller is told why, not "wrong key".
                self.metrics.rejected.labels("key_file_invalid").inc()
                await error_response(
                    503, "KeyFileInvalid", f"the server's key file is invalid: {problem}"
                )(scope, receive, send)
                return
            presented = _presented_keys(scope)
            rec = self.keys.lookup(presented[0]) if len(presented) == 1 else None
            if rec is None:
                self.metrics.rejected.labels("unauthorized").inc()
                await error_response(
                    401,
                    "Unauthorized",
                    "two different API keys were sent (Authorization and X-API-Key): send one"
                    if len(presented) > 1
                    else "a valid API key is required "
                    "(Authorization: Bearer <key> or X-API-Key: <key>)",
                    headers={"WWW-Authenticate": "Bearer"},
                )(scope, receive, send)
                return
            wait = self.limiter.check(rec.key_id, time.monotonic(), rec.rate_per_second, rec.burst)
            if wait:
                self.metrics.rejected.labels("rate_limited").inc()
                await error_response(
                    429,
                    "RateLimited",
                    f"request limit of key {rec.key_id} reached; retry after {wait} s",
                    headers={"Retry-After": str(wait)},
                )(scope, receive, send)
                return
            scope[KEY_SCOPE] = rec
        if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            body = await self._read_body(scope, receive, send)
            if body is None:
                return
            receive = _replay(body, receive)
        target = self.mcp_app if is_mcp and self.mcp_app is not None else self.app
        await target(scope, receive, send)

    async def _read_body(
        self, scope: MutableMapping[str, Any], receive: Any, send: Any
    ) -> bytes | None:
        """The whole request body, or None after answering 413/422 itself."""
        declared = _header(scope, b"content-length")
        too_large = error_response(
            413, "PayloadTooLarge", f"request body larger than {self.max_body} bytes"
        )
        if declared is not None:
            try:
                if int(declared) > self.max_body:
                    self.metrics.rejected.labels("too_large").inc()
                    await too_large(scope, receive, send)
                    return None
            except ValueError:
                pass
        chunks: list[bytes] = []
        size = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.body_timeout
        while True:
            try:
                message = await self._receive_by(
                    receive, loop.time() if self._stopping else deadline
                )
            except TimeoutError:
                await self._late_body(scope, receive, send)
                return None
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                self.metrics.rejected.labels("too_large").inc()
                await too_large(scope, receive, send)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        ctype = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
        if (
            body
            and scope.get(KEY_SCOPE) is not None
            and ctype != "application/json"
            and not (scope.get("path", "").startswith("/mcp"))
        ):
            await error_response(
                415,
                "UnsupportedMediaType",
                "send the body as JSON with Content-Type: application/json",
            )(scope, receive, send)
            return None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.metrics.rejected.labels("bad_encoding").inc()
            await error_response(
                422, "InvalidInput", f"request body is not valid UTF-8 (byte {exc.start})"
            )(scope, receive, send)
            return None
        return body

    async def _receive_by(self, receive: Any, when: float) -> MutableMapping[str, Any]:
        """The next body message, or TimeoutError at loop time ``when`` (sooner if
        :meth:`stop_reading` is called meanwhile). A message already received is returned
        even past ``when``: the wait only ends when it has to wait."""
        async with asyncio.timeout_at(when) as deadline:
            self._reads.add(deadline)
            try:
                message: MutableMapping[str, Any] = await receive()
            finally:
                self._reads.discard(deadline)
        return message

    async def _late_body(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """Answer a request whose body did not arrive: 503 when the server is stopping,
        else 408; the connection is closed after the answer (the rest of the body, if it
        ever comes, is not read)."""
        if self._stopping:
            self.metrics.rejected.labels("stopping").inc()
            answer = error_response(
                503,
                "SystemClosed",
                "the server is stopping and the request body had not arrived; send it again",
                headers={"Retry-After": "1", "Connection": "close"},
            )
        else:
            self.metrics.rejected.labels("body_timeout").inc()
            answer = error_response(
                408,
                "RequestTimeout",
                f"the request body did not arrive within {self.body_timeout:g} s",
                headers={"Connection": "close"},
            )
        await answer(scope, receive, send)


def _with_defaults(
    start: MutableMapping[str, Any], defaults: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    """The headers of the response ``start`` message, plus each of ``defaults`` it does
    not set itself."""
    headers = list(start.get("headers", ()))
    present = {bytes(k).lower() for k, _v in headers}
    headers.extend((k, v) for k, v in defaults if k not in present)
    return headers


def _header(scope: MutableMapping[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _presented_keys(scope: MutableMapping[str, Any]) -> list[str]:
    """The distinct API keys the request carries (``Authorization: Bearer`` and
    ``X-API-Key``): one rule for both headers, so a request with two different keys is
    refused whichever of them is valid, not decided by which header wins."""
    keys: list[str] = []
    auth = _header(scope, b"authorization")
    if auth is not None and auth[:7].lower() == "bearer ":
        keys.append(auth[7:].strip())
    header = _header(scope, b"x-api-key")
    if header is not None and header.strip() not in keys:
        keys.append(header.strip())
    return keys


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: dict[str, Any] = await receive()
        return message

    return replay


def mcp_tenant(request: Any) -> str | None:
    """The tenant of the key that the gate accepted for this MCP HTTP request."""
    rec = getattr(request, "scope", {}).get(KEY_SCOPE)
    return rec.tenant if isinstance(rec, KeyRecord) else None
