"""The API's documentation page, ``/docs`` (Swagger UI), served offline.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on a machine without internet
access (or behind a proxy that blocks it) ``/docs`` is a blank page. Here the page loads
its script, style and icon from the server itself, under ``/docs/assets``: the files come
from the ``fastapi-offline`` package (part of the ``server`` extra), which ships current
builds of Swagger UI, so they are updated with it rather than copied into this repository.

The API's description, the error answers the routes share and the parameters the routes
share are here too: with the routes' summaries and docstrings and the models' field
descriptions, they are the API's published text, written for API users (Markdown).

There is no ``/redoc``: ReDoc's page loads its logo from the vendor's site whatever it is
told, and one documentation page is enough. ``/openapi.json`` is the machine-readable form.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Query, Request, Security
from fastapi import Path as PathParam
from fastapi.openapi.docs import (
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.security import APIKeyHeader, HTTPBearer
from starlette.staticfiles import StaticFiles

from ..prerequisites import install_hint
from . import models as m
from .listing import DEFAULT_LIMIT, MAX_LIMIT

__all__ = [
    "API_DESCRIPTION",
    "ASSETS_URL",
    "ASSISTANT_ID",
    "BODY_ERRORS",
    "CHAT_ERRORS",
    "CURSOR",
    "ERRORS",
    "KIND",
    "LIMIT",
    "MEMORY_ID",
    "NO_MEMORY",
    "NO_USER",
    "USER_ID",
    "mount_docs",
]

#: The API's description on ``/docs`` and in ``/openapi.json`` (Markdown, for API users).
API_DESCRIPTION = """\
Long-term memory for LLM agents and chat bots. Store each exchange with a user as a *turn*;
before answering, *retrieve* what the memory holds about the user's message (recent
dialogue, earlier relevant turns with their topic summaries, facts and traits learned about
the user); or let the server *chat*: retrieve, answer with its LLM and store the turn.
Every memory has an id (`page:p12`, `segment:s3`, `fact:f7`, `agent_trait:<assistant>:a2`,
`trait:<name>`) and can be listed, read, corrected and deleted.

**Authentication.** Every `/v1` route needs an API key, sent as
`Authorization: Bearer <key>` or `X-API-Key: <key>` (use the *Authorize* button here).
`/healthz`, `/readyz`, `/metrics` and this documentation need none.

**Tenants.** A key belongs to a tenant, and user and assistant ids are per tenant: two
tenants' `alice` are different users, and another tenant's user is simply not found (404).
Ids go in the URL path, percent-encoded (1 to 256 characters and at most 960 UTF-8 bytes,
no `/` or control characters, not `.` or `..`).

**Errors.** Every error answers `{"error": {"type": ..., "message": ...}}`: 401 missing or
wrong key; 404 no such user or memory; 413 body too large; 415 body not JSON; 422 invalid
input (the message names the field); 429 the key's request limit (see `Retry-After`); 502
the LLM provider's configuration is wrong (chat only); 503 overloaded or shutting down (see
`Retry-After`). A refused request stores nothing.

**Paging.** Listings come in pages: `limit` items at most (default 100), and the answer's
`next_cursor`, passed back unchanged as `cursor`, gives the next page (null on the last).
The order is stable: paging while turns are added neither skips nor repeats an item.
"""


# -- error answers, as the OpenAPI document lists them -----------------------------------------


def _answer(description: str) -> dict[str, Any]:
    """An error answer for the OpenAPI document."""
    return {"model": m.ErrorBody, "description": description}


# Answers any /v1 route may give.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: _answer("Missing or wrong API key."),
    422: _answer("Invalid input: a malformed id, parameter or body (the message names it)."),
    429: _answer("The key's request limit is reached; retry after `Retry-After` seconds."),
    503: _answer("Overloaded, starting or shutting down; retry after `Retry-After` seconds."),
}
# Answers of routes that take a JSON body.
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    413: _answer("Request body too large."),
    415: _answer("The body is not sent as `Content-Type: application/json`."),
}
NO_USER: dict[int | str, dict[str, Any]] = {
    404: _answer("The user has no stored data (under this key's tenant)."),
}
NO_MEMORY: dict[int | str, dict[str, Any]] = {
    404: _answer("No such user, or the user has no such memory (or it was deleted)."),
}


CHAT_ERRORS: dict[int | str, dict[str, Any]] = {
    502: _answer(
        "The LLM provider refused the call for a configuration reason "
        "(ProviderAuthError, ProviderModelNotFound, ProviderUnreachable); the "
        "message says what to fix."
    ),
}


# -- parameters shared by the routes --------------------------------------------------------

LIMIT = Query(
    DEFAULT_LIMIT,
    ge=1,
    le=MAX_LIMIT,
    description=f"Most items in one page of the listing (1..{MAX_LIMIT}).",
)
CURSOR = Query(
    None,
    description="Where the page starts: the `next_cursor` of the previous "
    "page, unchanged (omit it for the first page). The order is stable: paging "
    "while turns are added neither skips nor repeats an item. 422 for a cursor "
    "that did not come from this listing of this key's tenant.",
)
KIND = Query(
    None,
    description="Only memories of these kinds: page, segment, fact, "
    "agent_trait, trait (repeat the parameter or separate kinds with commas). "
    "Default: every kind.",
)
USER_ID = PathParam(description="The user's id in your tenant, percent-encoded.")
ASSISTANT_ID = PathParam(description="The assistant's id in your tenant.")
MEMORY_ID = PathParam(
    description="The memory's id, as listed: `page:p12`, `segment:s3`, "
    "`fact:f7`, `agent_trait:<assistant>:a2` or `trait:<name>`."
)


# -- the page ---------------------------------------------------------------------------------

#: Where the documentation pages' scripts, styles and icon are served.
ASSETS_URL = "/docs/assets"

# Swagger UI settings: no online validator badge (it would call a public service), and
# the operations shown open, so a reader sees each route's parameters at once.
_SWAGGER_PARAMETERS: dict[str, Any] = {
    "validatorUrl": None,
    "deepLinking": True,
    "docExpansion": "list",
    "defaultModelsExpandDepth": 0,
    "displayRequestDuration": True,
}


def _assets_dir() -> Path:
    """The directory of Swagger UI's files in the installed package."""
    try:
        found = resources.files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "the API documentation pages need the fastapi-offline package (the 'server' "
            f"extra): {install_hint('server')}"
        ) from None
    return Path(str(found))


#: Where the OAuth2 redirect page of the documentation is.
_REDIRECT_URL = "/docs/oauth2-redirect"

_docs = APIRouter(include_in_schema=False)


@_docs.get("/docs")
async def swagger_ui(request: Request) -> HTMLResponse:
    app = request.app
    return get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json",
        title=f"{app.title} API",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        oauth2_redirect_url=_REDIRECT_URL,
        swagger_ui_parameters=_SWAGGER_PARAMETERS,
    )


@_docs.get(_REDIRECT_URL)
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


def mount_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/docs/oauth2-redirect`` on ``app``, with every file they load
    served from ``/docs/assets`` (no request leaves the server).

    ``app`` must be built with ``docs_url=None`` and ``redoc_url=None``.
    """
    app.mount(ASSETS_URL, StaticFiles(directory=_assets_dir()), name="docs-assets")
    app.include_router(_docs)


def v1_router() -> APIRouter:
    """A router of ``/v1`` routes: behind the API key, with the error answers every
    ``/v1`` route may give. The gate checks the key; the two schemes only document it on
    the OpenAPI page."""
    bearer = HTTPBearer(auto_error=False, description="API key: Authorization: Bearer <key>")
    header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key")
    return APIRouter(
        prefix="/v1", dependencies=[Security(bearer), Security(header)], responses=ERRORS
    )
