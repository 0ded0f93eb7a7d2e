"""What the facade's inspection, lifecycle and chat calls return: :class:`UserState`,
:class:`ForgetReport` and :class:`ChatReply` (plain frozen records).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .messages import (
    KBEntry,
    Page,
    SegmentRecord,
    TraitLevel,
    UserProfile,
)

__all__ = ["ChatReply", "ForgetReport", "UserState"]


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One reply of :meth:`MemoryOS.chat_reply`.

    Attributes:
        text: the reply (stored as the turn's response).
        degraded: True when the configured provider was unavailable (5xx answers,
            timeouts, its circuit breaker open) and the offline fallback wrote the reply.
            Always False with the offline backend, which is no fallback there.
        reason: why the reply is degraded (e.g. ``"provider unavailable:
            InternalServerError (HTTP 500)"``), None when it is not.
        backend: the backend that wrote the reply (``"litellm:openai/gpt-4o-mini"``, or
            the offline backend's name).
    """

    text: str
    degraded: bool = False
    reason: str | None = None
    backend: str = ""


@dataclass(frozen=True, slots=True)
class UserState:
    """A picture of one user's memory (see :meth:`MemoryOS.user_state`).

    Attributes:
        user_id: whose memory.
        turns: turns stored so far.
        stm: STM pages, oldest first.
        segments: MTM segments with their pages, hottest first.
        profile: the user's static profile.
        traits: user traits that have a level.
        kb: user facts (knowledge base), oldest first.
        agents: per assistant id, its ``profile`` and agent ``traits``.
        persona_updates: persona updates applied since the LPM actor started.
    """

    user_id: str
    turns: int
    stm: tuple[Page, ...]
    segments: tuple[SegmentRecord, ...]
    profile: UserProfile
    traits: tuple[TraitLevel, ...]
    kb: tuple[KBEntry, ...]
    agents: dict[str, dict[str, Any]]
    persona_updates: int

    def page_ids(self) -> list[str]:
        """Ids of every page held in STM and MTM (not the archive)."""
        ids = [p.page_id for p in self.stm]
        for seg in self.segments:
            ids.extend(p.page_id for p in seg.pages)
        return ids


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What :meth:`MemoryOS.forget_user` removed."""

    user_id: str
    removed_files: tuple[str, ...]
    was_active: bool
    #: Gateway entries removed: ``gateway_cache`` (cached answers and embeddings),
    #: ``redo_queue`` (degraded requests waiting to be redone) and ``degraded_records``
    #: (who asked for those).
    purged: dict[str, int] = dataclasses.field(default_factory=dict)
