"""The memory page's front door: ``/ui`` itself, the login form, logging in and out, and
the page's static files."""

from __future__ import annotations

import time

from fastapi import Request, Response

from .state import (
    COOKIE,
    LOGIN_COOKIE,
    UI,
    MemoryPage,
    router,
)
from .web import Redirect, UIError, read_form


def login_form(ui: MemoryPage, request: Request, status: int = 200, message: str = "") -> Response:
    import secrets

    token = secrets.token_urlsafe(32)
    response = ui.render(request, "login.html", status, token=token, message=message)
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
async def home(request: Request, ui: MemoryPage = UI) -> Response:
    if ui.sessions.get(request.cookies.get(COOKIE)) is None:
        raise Redirect("/ui/login")
    raise Redirect("/ui/users")


@router.get("/login", response_class=Response)
async def login_page(request: Request, ui: MemoryPage = UI) -> Response:
    if ui.sessions.get(request.cookies.get(COOKIE)) is not None:
        raise Redirect("/ui/users")
    return login_form(ui, request)


@router.post("/login", response_class=Response)
async def login(request: Request, ui: MemoryPage = UI) -> Response:
    form = await read_form(request)
    token = request.cookies.get(LOGIN_COOKIE)
    if not token or form.get("csrf") != token:
        return login_form(ui, request, 403, "The form expired: enter the key again.")
    client = request.client.host if request.client else "unknown"
    wait = ui.login_limiter.check(f"login:{client}", time.monotonic())
    if wait:
        raise UIError(
            429, "Slow down", f"too many attempts; try again in {wait} s", retry_after=wait
        )
    rec = ui.keys.lookup(form.get("key", "").strip())
    if rec is None:
        return login_form(ui, request, 401, "That is not a valid API key.")
    ui.sessions.drop(request.cookies.get(COOKIE))
    sid, _session = ui.sessions.create(rec.key_id, rec.tenant)
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
async def logout(request: Request, ui: MemoryPage = UI) -> Response:
    session = ui.sessions.get(request.cookies.get(COOKIE))
    if session is not None:
        await ui.form_of(request, session)
        ui.sessions.drop(request.cookies.get(COOKIE))
    response = Response(status_code=303, headers={"Location": "/ui/login"})
    response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
    return response


@router.get("/static/{name}", response_class=Response)
async def static_file(name: str, ui: MemoryPage = UI) -> Response:
    return ui.static.response(name)
