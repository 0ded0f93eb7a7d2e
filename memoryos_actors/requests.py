"""Requests the facade sends to a user's actors: store a turn, retrieve, set a profile."""

from __future__ import annotations

from dataclasses import dataclass

from memoryos_actors.errors import InvalidInput
from memoryos_actors.record_base import (
    _instance,
    _Record,
    _record,
    _text,
    _timestamp,
)
from memoryos_actors.records import (
    AgentProfile,
    UserProfile,
)

__all__ = ["AddTurn", "Retrieve", "SetAgentProfile", "SetUserProfile"]


# ---------------------------------------------------------------------------- requests


@_record
@dataclass(frozen=True, slots=True)
class AddTurn(_Record):
    """Request: store one dialogue turn for ``user_id``.

    ``timestamp`` is the turn's time in seconds since the epoch. At least one of ``query``
    and ``response`` must contain non-blank text. ``turn_key`` makes the request
    idempotent: STM answers a repeated key with the page it already stored.
    """

    user_id: str
    assistant_id: str
    query: str
    response: str
    timestamp: float
    turn_key: str = ""

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _text(self, "query")
        _text(self, "response")
        _text(self, "turn_key")
        if not self.query.strip() and not self.response.strip():
            raise InvalidInput("AddTurn needs a non-blank query or response")
        _timestamp(self, "timestamp")


@_record
@dataclass(frozen=True, slots=True)
class Retrieve(_Record):
    """Request: retrieve memory relevant to ``query`` at ``timestamp`` (seconds)."""

    user_id: str
    assistant_id: str
    query: str
    timestamp: float

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _text(self, "query")
        _timestamp(self, "timestamp")


@_record
@dataclass(frozen=True, slots=True)
class SetUserProfile(_Record):
    """Request: replace the user's static profile."""

    user_id: str
    profile: UserProfile

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _instance(self, "profile", UserProfile)


@_record
@dataclass(frozen=True, slots=True)
class SetAgentProfile(_Record):
    """Request: replace the persona of ``assistant_id`` as seen by ``user_id``."""

    user_id: str
    assistant_id: str
    profile: AgentProfile

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _instance(self, "profile", AgentProfile)
