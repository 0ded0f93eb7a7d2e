"""A bounded, thread-safe LRU cache keyed by content hashes."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

__all__ = ["LRUCache", "content_key"]

V = TypeVar("V")


def content_key(*parts: Any) -> str:
    """A stable hex key for JSON-able ``parts`` (BLAKE2b-128 of their canonical JSON).

    Dict key order does not matter; the same content always gives the same key, in any
    process.
    """
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.blake2b(blob.encode("utf-8"), digest_size=16).hexdigest()


class LRUCache(Generic[V]):
    """At most ``maxsize`` entries; the least recently used one is dropped first.

    ``maxsize`` 0 disables caching (every lookup misses). Counts hits and misses. An entry
    may name the owners whose content it holds (user ids), so that
    :meth:`purge_owner` can drop everything derived from one user's text.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 0:
            raise ValueError("cache size must be >= 0")
        self.maxsize = maxsize
        self._data: OrderedDict[str, V] = OrderedDict()
        self._owners: dict[str, set[str]] = {}  # owner -> keys
        self._key_owners: dict[str, set[str]] = {}  # key -> owners
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> V | None:
        """The value for ``key`` (marking it recently used), or None."""
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: str, value: V, owner: str | None = None) -> None:
        """Store ``value`` under ``key`` (derived from ``owner``'s content, if given),
        evicting the least recently used beyond maxsize."""
        if self.maxsize == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            if owner is not None:
                self._owners.setdefault(owner, set()).add(key)
                self._key_owners.setdefault(key, set()).add(owner)
            while len(self._data) > self.maxsize:
                old, _ = self._data.popitem(last=False)
                self._unlink(old)

    def note_owner(self, key: str, owner: str) -> None:
        """Record that a cached entry (a hit) also holds ``owner``'s content."""
        with self._lock:
            if key in self._data:
                self._owners.setdefault(owner, set()).add(key)
                self._key_owners.setdefault(key, set()).add(owner)

    def purge_owner(self, owner: str) -> int:
        """Drop every entry recorded for ``owner``; return how many were dropped."""
        with self._lock:
            keys = self._owners.pop(owner, set())
            n = 0
            for key in keys:
                if self._data.pop(key, None) is not None:
                    n += 1
                self._unlink(key)
            return n

    def _unlink(self, key: str) -> None:
        for owner in self._key_owners.pop(key, ()):
            keys = self._owners.get(owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._owners[owner]

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    def clear(self) -> None:
        """Drop every entry (counters are kept)."""
        with self._lock:
            self._data.clear()
            self._owners.clear()
            self._key_owners.clear()

    def stats(self) -> dict[str, int]:
        """``{"hits", "misses", "size", "maxsize"}``."""
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "size": len(self._data),
                "maxsize": self.maxsize,
            }
