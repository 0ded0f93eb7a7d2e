"""Registry: stable names for actors whose refs change on every restart."""

from __future__ import annotations

import threading
from typing import Any

from pykka import ActorDeadError, ActorRef

from ._errors import SupervisorError

__all__ = ["Registry"]


class Registry:
    """A thread-safe map from a stable name to the *current* ref of an actor.

    A supervisor registers a child's ``ChildSpec.name`` on every (re)start and removes it
    when that incarnation exits, so ``lookup`` never returns a ref of an earlier
    incarnation once its exit was reported; between the exit and the restart it returns
    None. Pass one Registry to a tree's root supervisor (nested supervisors share it);
    several trees with their own registries coexist in one process.

    Reads are a single dict lookup (atomic under the GIL, O(1), no lock); writes take a
    lock so a late unregister of an old incarnation can't remove its successor.
    """

    __slots__ = ("_lock", "_refs")

    def __init__(self) -> None:
        self._refs: dict[str, ActorRef[Any]] = {}
        self._lock = threading.Lock()

    def lookup(self, name: str) -> ActorRef[Any] | None:
        """The current ref registered under ``name``, or None. O(1)."""
        return self._refs.get(name)

    def require(self, name: str) -> ActorRef[Any]:
        """The current ref registered under ``name``.

        Raises:
            LookupError: nothing is registered under ``name`` (e.g. it is restarting).
        """
        ref = self._refs.get(name)
        if ref is None:
            msg = f"no actor is registered as {name!r}"
            raise LookupError(msg)
        return ref

    def tell(self, name: str, message: Any) -> bool:
        """Tell ``message`` to the actor registered as ``name``; True if it was delivered.

        Delivered means put in the mailbox of the incarnation registered now (not handled
        yet). False when nothing is registered under ``name`` (it is restarting or gone)
        or when that actor stopped between the lookup and the tell (pykka's
        ``ActorDeadError``): the two ways a name's actor can be missing, which a sender
        that does not own the actor must expect. Any other error propagates.
        """
        ref = self._refs.get(name)
        if ref is None:
            return False
        try:
            ref.tell(message)
        except ActorDeadError:
            return False
        return True

    def names(self) -> list[str]:
        """The registered names, sorted."""
        with self._lock:
            return sorted(self._refs)

    def register(self, name: str, ref: ActorRef[Any]) -> None:
        """Register ``ref`` under ``name``, replacing a ref that is no longer alive.

        Raises:
            SupervisorError: ``name`` belongs to another actor that is still alive.
        """
        with self._lock:
            current = self._refs.get(name)
            if current is not None and current is not ref and current.is_alive():
                msg = f"name {name!r} is already registered to the live actor {current}"
                raise SupervisorError(msg)
            self._refs[name] = ref

    def unregister(self, name: str, ref: ActorRef[Any] | None = None) -> bool:
        """Remove ``name``; if ``ref`` is given, only while ``name`` still maps to it.

        Returns True if something was removed.
        """
        with self._lock:
            current = self._refs.get(name)
            if current is None or (ref is not None and current is not ref):
                return False
            del self._refs[name]
            return True

    def __len__(self) -> int:
        return len(self._refs)

    def __contains__(self, name: object) -> bool:
        return name in self._refs

    def __repr__(self) -> str:
        return f"<Registry {len(self._refs)} names>"
