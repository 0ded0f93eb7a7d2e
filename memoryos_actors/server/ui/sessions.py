"""Sessions of the memory page: who logged in with which key, kept on the server.

The browser holds only an opaque session id (a 256-bit random token) in an HttpOnly,
SameSite=Strict cookie; the API key it logged in with is checked once and never stored,
sent back, put in a URL or logged. The store keeps the SHA-256 of each session id, so
its contents name no live cookie. Each session has its own CSRF token, sent in a hidden
field of every form and compared on every mutating request.

Sessions live in the server process: a restart logs everyone out, and they are not shared
between server processes (a deployment with several processes behind one address needs
sticky sessions for the memory page).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Session", "SessionStore"]

#: A session unused this long ends, seconds.
IDLE_TIMEOUT_S = 30 * 60.0
#: A session ends this long after login whatever its use, seconds.
MAX_AGE_S = 12 * 3600.0
#: Most sessions kept at once; past it the least recently used one ends.
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class Session:
    """One logged-in browser.

    Attributes:
        key_id: the public id of the API key it logged in with (the key is not kept).
        tenant: whose users it sees.
        csrf: the token its forms carry (compared on every mutating request).
        created: login time, seconds (monotonic clock).
        seen: last use, seconds (monotonic clock).
        flash: messages to show on the next page (what the last action did).
    """

    key_id: str
    tenant: str
    csrf: str
    created: float
    seen: float
    flash: list[str] = field(default_factory=list)

    def check_csrf(self, token: object) -> bool:
        """Whether ``token`` is this session's CSRF token (constant-time compare)."""
        return isinstance(token, str) and hmac.compare_digest(token, self.csrf)


def _digest(sid: str) -> str:
    return hashlib.sha256(sid.encode("utf-8")).hexdigest()


class SessionStore:
    """Server-side sessions by id; thread-safe.

    ``idle_s`` and ``max_age_s`` bound a session's life (seconds), ``max_sessions`` the
    memory they take; ``clock`` returns seconds (monotonic).
    """

    def __init__(
        self,
        *,
        idle_s: float = IDLE_TIMEOUT_S,
        max_age_s: float = MAX_AGE_S,
        max_sessions: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self.max_sessions = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def create(self, key_id: str, tenant: str) -> tuple[str, Session]:
        """A new session for ``key_id`` of ``tenant``: ``(session id, session)``. The id
        goes in the cookie; only its digest is kept."""
        sid = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(key_id, tenant, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._sessions[_digest(sid)] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session of ``sid``, or None (unknown, ended or expired)."""
        if not sid or len(sid) > 100:
            return None
        digest = _digest(sid)
        now = self._clock()
        with self._lock:
            session = self._sessions.get(digest)
            if session is None:
                return None
            if now - session.seen > self.idle_s or now - session.created > self.max_age_s:
                del self._sessions[digest]
                return None
            session.seen = now
            self._sessions.move_to_end(digest)
            return session

    def drop(self, sid: str | None) -> None:
        """End the session of ``sid`` (logout); nothing if there is none."""
        if sid:
            with self._lock:
                self._sessions.pop(_digest(sid), None)

    def drop_key(self, key_id: str) -> int:
        """End every session logged in with ``key_id`` (its key was revoked); how many."""
        with self._lock:
            gone = [d for d, s in self._sessions.items() if s.key_id == key_id]
            for d in gone:
                del self._sessions[d]
        return len(gone)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
