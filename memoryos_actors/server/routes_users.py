"""The ``/v1`` routes about a tenant's users as a whole: the list of users, a user's
export, and forgetting a user."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from fastapi import Request

from ..paging import decode_cursor, page_of
from . import models as m
from .docs import CURSOR, LIMIT, NO_USER, USER_ID, v1_router
from .state import STATE, ServerState
from .tenancy import tenant_export_file, tenant_user_ids

__all__ = ["router"]


router = v1_router()
"""The routes listing, exporting and forgetting users (under ``/v1``). Each route is handed the app's
:class:`~.state.ServerState` as ``state``."""


# The routes' summaries and docstrings are published as the API's documentation
# (Markdown, for API users).
@router.get(
    "/users",
    summary="List the tenant's users",
    response_model=m.UsersResponse,
    tags=["users"],
    response_description="One page of user ids.",
)
async def list_users(
    request: Request, limit: int = LIMIT, cursor: str | None = CURSOR, state: ServerState = STATE
) -> m.UsersResponse:
    """The users of this key's tenant that have stored data, sorted by id, one page at
    a time (see `limit` and `cursor`)."""
    tenant = state.tenant_of(request)
    after = None if cursor is None else decode_cursor(cursor, "users", (str,), tenant)
    mem = state.memory()
    ids = set(await mem.users()) | set(await mem.active_users())
    users, next_cursor = page_of(
        tenant_user_ids(tenant, ids), lambda u: (u,), "users", limit, after, tenant
    )
    return m.UsersResponse(users=users, next_cursor=next_cursor)


@router.get(
    "/users/{user_id}/export",
    summary="Export everything stored for a user",
    tags=["users"],
    response_model=dict[str, Any],
    responses=NO_USER,
    response_description="The user's export.",
)
async def export(
    request: Request, user_id: str = USER_ID, state: ServerState = STATE
) -> dict[str, Any]:
    """Everything stored for the user (turns, segments, facts, traits, profiles, the
    archive and the memories' history), as one JSON document: the format
    `memoryos export` writes and `memoryos import` reads."""
    tenant, uid = await state.known(request, user_id)
    with tempfile.TemporaryDirectory(prefix="memoryos-export-") as tmp:
        path = Path(tmp) / "export.json"
        await state.memory().export_user(uid, path)
        # Named by the tenant's ids (its user, its assistants): no tenant's name in it.
        await asyncio.to_thread(tenant_export_file, path, tenant, uid, user_id)
        text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@router.delete(
    "/users/{user_id}",
    summary="Forget a user",
    response_model=m.ForgetResponse,
    tags=["users"],
    responses=NO_USER,
    response_description="What was deleted.",
)
async def forget(
    request: Request, user_id: str = USER_ID, state: ServerState = STATE
) -> m.ForgetResponse:
    """Delete everything stored about the user, for good; other users are untouched.
    The answer says how many files went."""
    _tenant, uid = await state.known(request, user_id)
    report = await state.memory().forget_user(uid)
    return m.ForgetResponse(
        user_id=user_id, removed_files=len(report.removed_files), was_active=report.was_active
    )
