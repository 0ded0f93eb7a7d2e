"""The API's documentation page, ``/docs`` (Swagger UI), served offline.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on a machine without internet
access (or behind a proxy that blocks it) ``/docs`` is a blank page. Here the page loads
its script, style and icon from the server itself, under ``/docs/assets``: the files come
from the ``fastapi-offline`` package (part of the ``server`` extra), which ships current
builds of Swagger UI, so they are updated with it rather than copied into this repository.

There is no ``/redoc``: ReDoc's page loads its logo from the vendor's site whatever it is
told, and one documentation page is enough. ``/openapi.json`` is the machine-readable form.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "mount_docs"]

#: Where the documentation pages' scripts, styles and icon are served.
ASSETS_URL = "/docs/assets"

# Swagger UI settings: no online validator badge (it would call a public service), and
# the operations shown open, so a reader sees each route's parameters at once.
_SWAGGER_PARAMETERS: dict[str, Any] = {
    "validatorUrl": None, "deepLinking": True, "docExpansion": "list",
    "defaultModelsExpandDepth": 0, "displayRequestDuration": True,
}


def _assets_dir() -> Path:
    """The directory of Swagger UI's files in the installed package."""
    try:
        found = resources.files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "the API documentation pages need the fastapi-offline package: "
            "pip install \"memoryos-actors[server]\"") from None
    return Path(str(found))


def mount_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/docs/oauth2-redirect`` on ``app``, with every file they load
    served from ``/docs/assets`` (no request leaves the server).

    ``app`` must be built with ``docs_url=None`` and ``redoc_url=None``.
    """
    app.mount(ASSETS_URL, StaticFiles(directory=_assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=redirect_url, swagger_ui_parameters=_SWAGGER_PARAMETERS)

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
