"""The tiers' gateway client: bounded per-worker backlogs and redo delivery."""

from __future__ import annotations

import queue

import pytest

import supervisor
from memoryos_actors.actors.base import Backlog, GatewayClient
from memoryos_actors.actors.protocol import CompletionDone, CompletionJob
from memoryos_actors.errors import Overloaded
from memoryos_actors.gateway.service import GatewayService


class _Inbox(supervisor.SupervisedActor):
    def __init__(self, out: queue.Queue[object]) -> None:
        super().__init__()
        self.out = out

    def on_receive(self, message: object) -> object:
        self.out.put(message)
        return None


def test_backlog_waits_then_raises_overloaded_and_frees_on_release() -> None:
    b = Backlog(2, "test backlog")
    b.acquire(0.1)
    assert b.try_acquire() is True
    assert b.try_acquire() is False
    with pytest.raises(Overloaded, match="test backlog: 2 items pending"):
        b.acquire(0.05)
    b.release()
    b.wait_below_limit(0.05)  # a slot is free now: returns at once
    b.reset()
    assert b.pending == 0


def test_redone_answer_reaches_the_actor_that_asked_for_the_degraded_one() -> None:
    registry = supervisor.Registry()
    service = GatewayService()
    client = GatewayClient(service, registry, ("gateway/0",), 8)
    out: queue.Queue[object] = queue.Queue()
    ref = _Inbox.start(out)
    registry.register("user:u/mtm", ref)
    try:
        payload = {"pages": [{"query": "q", "response": "r"}]}
        client.remember_degraded(CompletionJob("segment_summary", payload, "u", "user:u/mtm", "s3"))
        # The gateway hands back its own copy of the payload; equal content is enough.
        client.deliver_redo(
            "segment_summary",
            {"pages": [{"response": "r", "query": "q"}]},
            "u",
            {"summary": "fresh", "keywords": []},
        )
        got = out.get(timeout=5)
        assert got == CompletionDone(
            "segment_summary", "s3", {"summary": "fresh", "keywords": []}, degraded=False
        )
        # Delivered once: a second redo of the same request has nobody to go to.
        client.deliver_redo("segment_summary", payload, "u", {"summary": "again"})
        with pytest.raises(queue.Empty):
            out.get(timeout=0.1)
    finally:
        supervisor.stop(ref, timeout=5)
        service.close()
