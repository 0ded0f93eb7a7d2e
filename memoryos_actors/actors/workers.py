"""Shared actors of a memory system: gateway workers, retrieval workers, the heat ticker.

These serve every user. They hold no user state: a gateway worker starts completions on
the gateway's async core and tells each answer to the asker's registry name; a retrieval worker fans a query out
to a user's three tiers in parallel and merges the answers; the ticker tells every live MTM
actor to recompute heat.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import structlog

from supervisor import SupervisedActor

from ..errors import MemoryOSError, ProviderUnavailable, UnknownUser
from ..hits import MTMHits
from ..lexicon import stem
from ..messages import Retrieve
from ..text import keywords
from ..tiers.context import build_context
from .base import GatewayClient, actor_names, persona_owner
from .protocol import (
    HeatTick,
    LPMSearch,
    MTMSearch,
    Ping,
    STMPages,
    emb_to_bytes,
)

if TYPE_CHECKING:
    from supervisor import Registry

    from ..clock import Clock
    from ..config import MemoryConfig
    from ..hits import LPMView

__all__ = ["GatewayWorker", "HeatTicker", "RetrievalWorker"]

_RERANK_SIDE_CHARS = 600
"""Characters of each side of a page (query, response) shown to the reranking LLM."""


def _rerank_text(query: str, response: str) -> str:
    """A page as the reranking LLM reads it: both sides, each cut to a bound."""
    return f"User: {query[:_RERANK_SIDE_CHARS]}\nAssistant: {response[:_RERANK_SIDE_CHARS]}"


log = structlog.get_logger("memoryos.workers")

#: Degraded requests redone per heat tick.
_REDO_PER_TICK = 100

#: How long a retrieval waits for a user's tier actor that is being restarted (seconds).
_RESTART_WAIT_S = 2.0


class GatewayWorker(SupervisedActor):
    """A gateway slot owner: while it runs, its backlog slots take jobs.

    Jobs are started on the gateway's async core by the asker itself
    (:meth:`GatewayClient.submit`), so a worker's mailbox holds no job; a worker exists so
    that the pool's restarts and the system's close stop new jobs (a job reserved on a
    worker that is not running is not started).
    """

    def __init__(self, name: str, client: GatewayClient) -> None:
        super().__init__()
        self.name = name
        self.client = client

    def on_receive(self, message: object) -> object:
        if isinstance(message, Ping):
            return None
        raise TypeError(f"gateway worker got an unknown message: {type(message).__name__}")


class RetrievalWorker(SupervisedActor):
    """Answers :class:`~memoryos_actors.messages.Retrieve` with a ``MemoryContext``."""

    expected_errors = (MemoryOSError,)

    def __init__(
        self, config: MemoryConfig, registry: Registry, gateway: GatewayClient, clock: Clock
    ) -> None:
        super().__init__()
        self.config = config
        self.registry = registry
        self.gateway = gateway
        self.clock = clock

    def _ref(self, name: str, user_id: str) -> Any:
        deadline = time.monotonic() + _RESTART_WAIT_S
        while True:
            ref = self.registry.lookup(name)
            if ref is not None:
                return ref
            if time.monotonic() > deadline:
                raise UnknownUser(f"user {user_id!r} is not active")
            time.sleep(0.002)

    def on_receive(self, message: object) -> object:
        if isinstance(message, Retrieve):
            return self._retrieve(message)
        if isinstance(message, Ping):
            return None
        raise TypeError(f"retrieval worker got an unknown message: {type(message).__name__}")

    def _retrieve(self, msg: Retrieve) -> Any:
        started = time.perf_counter()
        cfg = self.config
        stm_name, mtm_name, lpm_name = actor_names(msg.user_id)
        stm, mtm, lpm = (self._ref(n, msg.user_id) for n in (stm_name, mtm_name, lpm_name))
        query_emb = self.gateway.embed_one(msg.query, user_id=msg.user_id)
        q_bytes = emb_to_bytes(query_emb)
        query_kw = keywords(msg.query)
        now = msg.timestamp
        f_stm = stm.ask(STMPages(), block=False)
        # With rerank, more candidates than top_k_pages for the LLM to choose from.
        wanted = max(cfg.top_k_pages, cfg.rerank_candidates) if cfg.rerank else cfg.top_k_pages
        f_mtm = mtm.ask(
            MTMSearch(
                q_bytes,
                query_kw,
                cfg.top_m_segments,
                wanted,
                now,
                cfg.retrieval_mode,
                msg.query,
            ),
            block=False,
        )
        cold_terms: tuple[str, ...] = ()
        if cfg.retrieval_mode == "hybrid" and cfg.cold_tier:
            cold_terms = tuple(sorted({stem(k) for k in query_kw}))
        f_lpm = lpm.ask(
            LPMSearch(msg.assistant_id, q_bytes, cfg.kb_top_k, cfg.agent_traits_top_k, cold_terms),
            block=False,
        )
        stm_pages = f_stm.get(timeout=30)
        mtm_hits = f_mtm.get(timeout=30)
        lpm_view = f_lpm.get(timeout=30)
        if cfg.shared_agent_persona:
            lpm_view = self._with_shared_persona(msg, q_bytes, lpm_view)
        if cfg.rerank:
            mtm_hits = self._rerank(msg, mtm_hits)
        return build_context(
            user_id=msg.user_id,
            assistant_id=msg.assistant_id,
            query=msg.query,
            stm_pages=stm_pages,
            mtm_hits=mtm_hits,
            lpm_view=lpm_view,
            elapsed_ms=(time.perf_counter() - started) * 1000.0,
        )

    def _rerank(self, msg: Retrieve, hits: MTMHits) -> MTMHits:
        """``hits`` reordered by the configured LLM (prompt kind ``rerank``) and cut to
        ``top_k_pages``: the pages it names first, in its order, then the others in
        retrieval's order. When the provider cannot answer, retrieval's own order is kept
        (no offline stand-in, nothing queued to redo: a later retrieve asks again)."""
        top_k = self.config.top_k_pages
        if len(hits.pages) <= 1:
            return hits
        payload = {
            "query": msg.query,
            "pages": [
                {"id": i, "text": _rerank_text(hit.page.query, hit.page.response)}
                for i, hit in enumerate(hits.pages)
            ],
        }
        try:
            answer = self.gateway.service.complete(
                "rerank", payload, user_id=msg.user_id, fallback=False
            )
            named = [i for i in answer.data["order"] if 0 <= i < len(hits.pages)]
        except ProviderUnavailable as exc:
            log.warning("retrieve.rerank_skipped", user=msg.user_id, reason=str(exc))
            named = []
        order = list(dict.fromkeys([*named, *range(len(hits.pages))]))[:top_k]
        pages = tuple(hits.pages[i] for i in order)
        kept = {hit.segment_id for hit in pages}
        segments = tuple(s for s in hits.segments if s.segment.segment_id in kept)
        return dataclasses.replace(hits, pages=pages, segments=segments)

    def _with_shared_persona(self, msg: Retrieve, q_bytes: bytes, own: Any) -> Any:
        """Replace the agent part of a user's LPM view with the assistant's shared one."""
        owner = persona_owner(msg.user_id, msg.assistant_id, True)
        ref = self.registry.lookup(actor_names(owner)[2])
        if ref is None:
            return own  # the shared persona is not loaded: answer with what the user has
        shared: LPMView = ref.ask(
            LPMSearch(msg.assistant_id, q_bytes, 0, self.config.agent_traits_top_k),
            block=True,
            timeout=30,
        )
        return dataclasses.replace(
            own, agent_profile=shared.agent_profile, agent_traits=shared.agent_traits
        )


class HeatTicker(SupervisedActor):
    """Tells every live MTM actor to recompute heat; driven by a ``send_interval`` timer.

    Each tick also asks the gateway to redo work it answered in degraded mode while the
    provider was down (at most ``_REDO_PER_TICK`` requests; nothing happens while the
    provider's breaker is still open). Fresh answers go to the actors that asked.
    """

    def __init__(self, registry: Registry, client: GatewayClient | None = None) -> None:
        super().__init__()
        self.registry = registry
        self.client = client
        self.ticks = 0

    def on_receive(self, message: object) -> object:
        if isinstance(message, HeatTick):
            self.ticks += 1
            if self.client is not None and self.client.service.pending_count():
                self.client.service.redo_pending(limit=_REDO_PER_TICK)
            for name in self.registry.names():
                if name.startswith("user:") and name.endswith("/mtm"):
                    # Not delivered: that user's MTM stopped since names() was read.
                    self.registry.tell(name, HeatTick())
            return None
        if isinstance(message, Ping):
            return None
        raise TypeError(f"heat ticker got an unknown message: {type(message).__name__}")
