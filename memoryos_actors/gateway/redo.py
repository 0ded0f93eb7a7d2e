"""The redo queue: completions answered by the offline fallback during an outage, kept to
be asked again of the provider once it is back (``GatewayService.redo_pending``)."""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryos_actors.gateway.base import Completion

__all__ = ["RedoHook", "RedoItem", "RedoQueue", "RedoResult"]

RedoHook = Callable[[str, dict[str, Any], "str | None", dict[str, Any]], None]
"""``on_redo(kind, payload, user_id, data)``: called with each redone request's fresh answer."""

RedoItem = tuple[str, dict[str, Any], "str | None"]
"""A queued request: ``(kind, payload, user_id)``."""


@dataclass(frozen=True, slots=True)
class RedoResult:
    """A degraded request re-run against the recovered provider, with its fresh answer."""

    kind: str
    payload: dict[str, Any]
    user_id: str | None
    completion: Completion


class RedoQueue:
    """Degraded requests, oldest first, at most ``limit`` of them (the oldest is dropped
    for a new one; ``limit <= 0`` keeps none). Thread-safe."""

    def __init__(self, limit: int) -> None:
        self._items: deque[RedoItem] = deque()
        self._limit = limit
        self._dropped = 0
        self._redone = 0
        self._lock = threading.Lock()

    def push(self, kind: str, payload: dict[str, Any], user_id: str | None) -> None:
        """Queue a request (a copy of ``payload``: the caller may change its own)."""
        with self._lock:
            if self._limit <= 0:
                self._dropped += 1
                return
            if len(self._items) >= self._limit:
                self._items.popleft()
                self._dropped += 1
            self._items.append((kind, copy.deepcopy(payload), user_id))

    def head(self) -> RedoItem | None:
        """The oldest queued request (left queued), or None."""
        with self._lock:
            return self._items[0] if self._items else None

    def done(self, item: RedoItem) -> None:
        """``item`` (a :meth:`head`) was redone: dequeue it unless it was dropped meanwhile."""
        with self._lock:
            if self._items and self._items[0] is item:
                self._items.popleft()
            self._redone += 1

    def purge_user(self, user_id: str) -> int:
        """Drop ``user_id``'s queued requests; returns how many went."""
        with self._lock:
            kept = deque(item for item in self._items if item[2] != user_id)
            removed = len(self._items) - len(kept)
            self._items = kept
        return removed

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def counts(self) -> tuple[int, int, int]:
        """``(queued, dropped, redone)`` since the queue was made."""
        with self._lock:
            return len(self._items), self._dropped, self._redone
