"""The API's error answers: one JSON shape (``{"error": {"type", "message", "details"?}}``)
for the gate's refusals, the memory system's typed errors, bad parameters and unknown
routes, and the status each :class:`~memoryos_actors.errors.MemoryOSError` maps to."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    ActorCrashed,
    DataDirLocked,
    GatewayError,
    InvalidInput,
    LayoutChanged,
    MemoryOSError,
    Overloaded,
    SystemClosed,
    UnknownMemory,
    UnknownUser,
)

__all__ = ["STATUS", "add_error_handlers", "error_response"]


def error_response(
    status: int,
    kind: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    """The error answer with HTTP ``status``, error ``kind`` (a type name) and ``message``."""
    body: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


STATUS: tuple[tuple[type[MemoryOSError], int], ...] = (
    (InvalidInput, 422),
    (UnknownUser, 404),
    (UnknownMemory, 404),
    (Overloaded, 503),
    (SystemClosed, 503),
    (ActorCrashed, 503),
    (LayoutChanged, 503),
    # Only a shard raises it to a call: restarted, it waited for its directory's lock while
    # the process it replaces was still exiting. Ask again once the engine restarts it.
    (DataDirLocked, 503),
    (GatewayError, 502),
)
"""The HTTP status of each memory error class, first match wins (any other: 500)."""


def _memory_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemoryOSError)
    status = next((code for cls, code in STATUS if isinstance(exc, cls)), 500)
    headers = {"Retry-After": "1"} if status == 503 else None
    message = str(exc.args[0]) if exc.args else str(exc)
    return error_response(status, type(exc).__name__, message, headers=headers)


def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        details.append({"loc": loc, "message": str(err.get("msg", ""))})
    summary = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:5]) or "invalid input"
    return error_response(422, "InvalidInput", summary, details=details)


def _slash_in_user_id(request: Request) -> bool:
    """Whether ``request`` names a user whose id holds an encoded ``/`` (``%2F``), which
    the router decoded into a path no route matches."""
    raw = request.scope.get("raw_path") or b""
    prefix = b"/v1/users/"
    if not raw.startswith(prefix):
        return False
    segment = raw[len(prefix) :].split(b"/", 1)[0].split(b"?", 1)[0]
    return b"%2f" in segment.lower()


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 404 and _slash_in_user_id(request):
        return error_response(
            422,
            "InvalidInput",
            "user_id must not contain '/' (sent as %2F): a URL path cannot carry it, so no "
            "user id may have one (see the API's rule for ids)",
        )
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    headers = dict(exc.headers) if exc.headers is not None else None
    return error_response(exc.status_code, kind, str(exc.detail), headers=headers)


def add_error_handlers(app: FastAPI) -> None:
    """Answer memory errors, bad parameters and HTTP errors of ``app`` in the one shape."""
    app.add_exception_handler(MemoryOSError, _memory_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
