"""The ``/v1`` routes on the static profiles: the user's, and each assistant's persona as
the user's memory holds it."""

from __future__ import annotations

from fastapi import Request

from ..messages import AgentProfile, UserProfile
from . import models as m
from .docs import ASSISTANT_ID, BODY_ERRORS, NO_USER, USER_ID, v1_router
from .listing import profile_dict
from .state import STATE, ServerState
from .tenancy import internal_id

__all__ = ["router"]


router = v1_router()
"""The user and assistant profile routes (under ``/v1``). Each route is handed the app's
:class:`~.state.ServerState` as ``state``."""


# The routes' summaries and docstrings are published as the API's documentation
# (Markdown, for API users).
@router.get(
    "/users/{user_id}/profile",
    summary="Get the user's profile",
    response_model=m.UserProfileBody,
    tags=["profiles"],
    responses=NO_USER,
    response_description="The user's profile.",
)
async def get_profile(
    request: Request, user_id: str = USER_ID, state: ServerState = STATE
) -> m.UserProfileBody:
    """The static profile set for the user (name, gender, birth year, extras); empty
    fields if none was set."""
    _tenant, uid = await state.known(request, user_id)
    st = await state.memory().user_state(uid)
    return m.UserProfileBody(**profile_dict(st.profile))


@router.put(
    "/users/{user_id}/profile",
    summary="Set the user's profile",
    response_model=m.UserProfileBody,
    tags=["profiles"],
    responses=BODY_ERRORS,
    response_description="The profile, as stored.",
)
async def put_profile(
    request: Request, body: m.UserProfileBody, user_id: str = USER_ID, state: ServerState = STATE
) -> m.UserProfileBody:
    """Replace the user's static profile; it is durable when this answers and shows in
    every later retrieval. Creates the user."""
    uid = internal_id(state.tenant_of(request), user_id)
    profile = UserProfile(
        name=body.name,
        gender=body.gender,
        birth_year=body.birth_year,
        extras=tuple(sorted(body.extras.items())),
    )
    await state.memory().set_user_profile(uid, profile)
    return body


@router.get(
    "/users/{user_id}/agents/{assistant_id}/profile",
    summary="Get an assistant's persona for the user",
    response_model=m.AgentProfileBody,
    tags=["profiles"],
    responses=NO_USER,
    response_description="The assistant's persona.",
)
async def get_agent_profile(
    request: Request,
    user_id: str = USER_ID,
    assistant_id: str = ASSISTANT_ID,
    state: ServerState = STATE,
) -> m.AgentProfileBody:
    """The assistant's static persona (role, character) as this user's memory holds
    it; empty fields if none was set."""
    tenant, uid = await state.known(request, user_id)
    st = await state.memory().user_state(uid)
    agent = st.agents.get(internal_id(tenant, assistant_id, "assistant_id"))
    if agent is None:
        return m.AgentProfileBody()
    return m.AgentProfileBody(**profile_dict(agent["profile"]))


@router.put(
    "/users/{user_id}/agents/{assistant_id}/profile",
    summary="Set an assistant's persona for the user",
    response_model=m.AgentProfileBody,
    tags=["profiles"],
    responses=BODY_ERRORS,
    response_description="The persona, as stored.",
)
async def put_agent_profile(
    request: Request,
    body: m.AgentProfileBody,
    user_id: str = USER_ID,
    assistant_id: str = ASSISTANT_ID,
    state: ServerState = STATE,
) -> m.AgentProfileBody:
    """Replace the assistant's static persona in this user's memory; durable when this
    answers. Creates the user."""
    tenant = state.tenant_of(request)
    profile = AgentProfile(
        role=body.role, character=body.character, extras=tuple(sorted(body.extras.items()))
    )
    await state.memory().set_agent_profile(
        internal_id(tenant, user_id), profile, internal_id(tenant, assistant_id, "assistant_id")
    )
    return body
