"""The operations routes, outside ``/v1`` and without a key: liveness (``/healthz``),
readiness with the LLM provider's state and, over shards, each shard's (``/readyz``) and Prometheus metrics
(``/metrics``)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..errors import LayoutChanged
from . import models as m
from .metrics import ServerMetrics
from .state import STATE, ServerState

__all__ = ["router"]


def _metrics(request: Request) -> ServerMetrics:
    """The server's Prometheus registry (set by :func:`~.app.create_app`)."""
    metrics: ServerMetrics = request.app.state.metrics
    return metrics


_METRICS: Any = Depends(_metrics)


router = APIRouter()
"""``/`` (the index), ``/healthz``, ``/readyz`` and ``/metrics``, outside ``/v1``. Each route is handed the app's
:class:`~.state.ServerState` as ``state``."""


@router.get(
    "/healthz",
    summary="Liveness",
    response_model=m.HealthResponse,
    tags=["ops"],
    response_description="The process serves HTTP.",
)
async def healthz() -> m.HealthResponse:
    """200 while the process serves HTTP (no key needed)."""
    return m.HealthResponse(status="ok")


@router.get(
    "/readyz",
    summary="Readiness",
    response_model=m.ReadyResponse,
    tags=["ops"],
    responses={
        503: {
            "model": m.ReadyResponse,
            "description": "Not ready: starting, stopping, or a shard is not up.",
        }
    },
    response_description="Ready for memory calls.",
)
async def readyz(state: ServerState = STATE) -> Response:
    """200 when the server accepts memory calls, else 503 (no key needed).

    `llm` tells how the LLM provider is doing (its circuit breakers, a configuration
    error, the last failure). A degraded provider does not make the server unready:
    memory calls still work, and chat replies come from the offline fallback, marked
    so.

    A server whose users are spread over shard processes also lists each shard's
    state (`shards`, asked at most once a second): while a shard is not up, the answer
    is 503 with status `unavailable` and `Retry-After`."""
    ready = state.status == "ok"
    body: dict[str, Any] = {"status": state.status}
    if ready and state.mem is not None:
        try:
            shards = await state.readiness.states(state.mem.sync)
        except LayoutChanged as exc:
            # A rebalance: this front door routes by a layout that is gone.
            body.update(status="layout_changed", message=str(exc))
            return JSONResponse(body, status_code=503, headers={"Retry-After": "1"})
        if shards is not None:
            body["shards"] = shards
            if state.readiness.unready(shards):
                ready = False
                body["status"] = "unavailable"
        gateway = getattr(state.mem.sync, "gateway_service", None)
        if gateway is not None:
            body["llm"] = gateway.provider_health()
    headers = None if ready else {"Retry-After": "1"}
    return JSONResponse(body, status_code=200 if ready else 503, headers=headers)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    tags=["ops"],
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format."}
    },
)
async def prometheus(metrics: ServerMetrics = _METRICS) -> Response:
    """Metrics in Prometheus text format (no key needed): HTTP requests by route and
    status with latency histograms, refusals by reason, the memory system's counters
    and the LLM provider's state. No user, tenant or key appears in them. Over shards,
    a scrape while a shard is down or restarting leaves the memory system's counters
    out rather than wait for it."""
    text = await asyncio.to_thread(generate_latest, metrics.registry)
    return Response(text, media_type=CONTENT_TYPE_LATEST)


def _wants_html(request: Request) -> bool:
    """Whether the caller is a browser asking for a page (its ``Accept`` names HTML)."""
    return "text/html" in request.headers.get("accept", "")


@router.get("/", include_in_schema=False)
async def index(request: Request) -> Response:
    """The server's front: a browser goes to the memory page (``/ui``); any other
    caller gets a JSON index of where things are (no key needed)."""
    if _wants_html(request):
        return RedirectResponse("/ui", status_code=307)
    links = {
        "ui": "/ui",
        "docs": "/docs",
        "openapi": "/openapi.json",
        "api": "/v1",
        "healthz": "/healthz",
        "readyz": "/readyz",
        "metrics": "/metrics",
    }
    if request.app.state.mcp_server is not None:
        links["mcp"] = "/mcp"
    return JSONResponse({"name": "memoryos-actors", "version": request.app.version, "links": links})
