"""Read-only views of a running system: users, the supervision tree, a user's tiers, the
archive, stored page ids, counters, and fault injection for drills. :class:`Inspection`
works on the facade's :class:`~memoryos_actors.core.SystemCore`.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import supervisor

from .actors.base import (
    ASSISTANT_PREFIX,
    actor_names,
    percentile,
)
from .actors.protocol import Inspect
from .core import COUNTERS
from .directory import UserEntry, UserPhase
from .errors import InvalidInput
from .reports import UserState
from .store.archived import decode_archived
from .store.userstore import list_users
from .text import keywords
from .validation import check_text as _check_text
from .validation import check_timeout as _check_timeout
from .validation import check_user_id as _check_user_id

if TYPE_CHECKING:
    from .activation import Lifecycle
    from .core import SystemCore

__all__ = ["Inspection"]


class Inspection:
    """The read-only calls of the facade and ``kill_actor`` (thread-safe). The contracts
    are documented on :class:`~memoryos_actors.api.MemoryAPI`."""

    def __init__(self, core: SystemCore, lifecycle: Lifecycle) -> None:
        self._core = core
        self._lifecycle = lifecycle

    def users(self) -> list[str]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.users`."""
        return sorted(
            u for u in list_users(self._core.data_dir) if not u.startswith(ASSISTANT_PREFIX)
        )

    def tree(self) -> str:
        """See :meth:`~memoryos_actors.api.MemoryAPI.tree`."""
        return supervisor.format_tree(self._core.tree.root)

    def user_state(self, user_id: str) -> UserState:
        """See :meth:`~memoryos_actors.api.MemoryAPI.user_state`."""
        uid = _check_user_id(user_id)

        def run(_e: UserEntry) -> UserState:
            stm_n, mtm_n, lpm_n = actor_names(uid)
            # STM first, then MTM: a page STM handed over before it answered is placed
            # before MTM answers (one mailbox, in order), so every stored page is in one
            # of the two pictures; one handed over in between is in both, and kept as
            # MTM's.
            stm = self._core.ask(stm_n, Inspect())
            mtm = self._core.ask(mtm_n, Inspect())
            lpm = self._core.ask(lpm_n, Inspect())
            placed = {p.page_id for seg in mtm.segments for p in seg.pages}
            return UserState(
                user_id=uid,
                turns=stm.turns,
                stm=stm.pages,
                segments=tuple(sorted(mtm.segments, key=lambda r: -r.heat)),
                profile=lpm.profile,
                traits=lpm.traits,
                kb=lpm.kb,
                agents=lpm.agents,
                persona_updates=lpm.updates,
                outbox=tuple(p for p in stm.outbox if p.page_id not in placed),
            )

        return self._lifecycle.call(uid, run, create=False)

    def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.archive`."""
        uid = _check_user_id(user_id)
        if query is not None:
            _check_text(query, "query", self._core.config.max_text_bytes, setting="max_text_bytes")
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidInput(f"limit must be None or an int >= 0, got {limit!r}")

        def run(entry: UserEntry) -> list[dict[str, Any]]:
            assert entry.store is not None
            store = entry.store
            if query is None:
                records = [rec for _seq, rec in store.archive_records()]
                return records if limit is None else records[:limit]
            hits = store.archive.search(keywords(query), limit=10 if limit is None else limit)
            # Deleted memories are left out, corrected ones shown corrected.
            edited = (store.edits.apply(hit.record) for hit in hits)
            return [rec for rec in edited if rec is not None]

        return self._lifecycle.call(uid, run, create=False)

    def stored_page_ids(self, user_id: str) -> list[str]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.stored_page_ids`."""
        ids = self.user_state(user_id).page_ids()
        for rec in self.archive(user_id):
            held = decode_archived(rec)
            if held is not None:
                ids.extend(str(p["page_id"]) for p in held.pages)
        return ids

    def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        """See :meth:`~memoryos_actors.api.MemoryAPI.kill_actor`."""
        uid = _check_user_id(user_id)
        names = dict(zip(("stm", "mtm", "lpm"), actor_names(uid), strict=True))
        if tier not in names:
            raise InvalidInput(f"tier must be 'stm', 'mtm' or 'lpm', got {tier!r}")
        if not isinstance(reason, str):
            raise InvalidInput(f"reason must be a str, got {type(reason).__name__}")
        wait_s = _check_timeout(timeout)
        name = names[tier]

        def run(_e: UserEntry) -> bool:
            old = self._core.registry.require(name)
            supervisor.kill(old, reason)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if self._core.registry.lookup(name) not in (None, old):
                    return True
                time.sleep(0.005)
            return False

        return self._lifecycle.call(uid, run, create=False)

    def _placement(self, user_id: str) -> dict[str, Any]:
        """A user's placement queue: pages queued, its limit, and its settle lags (ms from
        the turn that pushed a page out of STM to its placement in MTM: the last 512)."""
        entry = self._core.directory.get(user_id)
        env = entry.env if entry is not None else None
        if env is None:
            return {"placement_backlog": 0, "settle_lag_ms": None}
        backlog = env.insert_backlog
        lags = sorted(backlog.lags)
        return {
            "placement_backlog": backlog.pending,
            "placement_limit": backlog.limit,
            "settle_lag_ms": (
                {
                    "p50": percentile(lags, 50),
                    "p99": percentile(lags, 99),
                    "max": lags[-1],
                    "oldest_queued": backlog.oldest_age() * 1000.0,
                }
                if lags
                else None
            ),
        }

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.stats`."""
        if user_id is not None:
            st = self.user_state(user_id)
            return {
                "user_id": st.user_id,
                "turns": st.turns,
                "stm_pages": len(st.stm),
                "mtm_segments": len(st.segments),
                "mtm_pages": sum(len(seg.pages) for seg in st.segments),
                "kb_facts": len(st.kb),
                "traits_set": len(st.traits),
                "persona_updates": st.persona_updates,
                "archived_records": len(self.archive(user_id)),
                "gateway": self._core.gateway_service.stats().get("by_user", {}).get(user_id, {}),
                **self._placement(st.user_id),
            }
        acts = sorted(self._lifecycle.activation_samples())

        def pct(p: float) -> float:
            return acts[min(len(acts) - 1, int(p * len(acts)))] if acts else 0.0

        entries = self._core.directory.entries()
        active = sum(1 for e in entries if e.phase is UserPhase.ACTIVE)
        inflight = sum(e.inflight for e in entries)
        restarts = sum(c.restarts for c in supervisor.which_children(self._core.tree.users))
        metrics = self._core.metrics.snapshot()
        return {
            **{name: metrics.pop(name) for name in COUNTERS},
            "active_users": active,
            "inflight": inflight,
            "gateway_backlog": self._core.gateway.pending,
            "placement_backlog": sum(
                e.env.insert_backlog.pending for e in entries if e.env is not None
            ),
            "placement_limit": self._core.fair_gate.limit,
            "placement_waits": self._core.fair_gate.waits,
            "settle_lag_oldest_ms": max(
                (e.env.insert_backlog.oldest_age() for e in entries if e.env is not None),
                default=0.0,
            )
            * 1000.0,
            **metrics,
            "activation_ms_p50": pct(0.5),
            "activation_ms_p99": pct(0.99),
            "user_group_restarts": restarts,
            "damaged_users": len(self._core.damaged),
            "damaged": dict(sorted(self._core.damaged.items())),
            "threads": threading.active_count(),
            "gateway": self._core.gateway_service.stats(),
        }
