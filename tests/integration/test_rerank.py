"""The optional ``rerank`` setting: retrieval's best candidates reordered by the LLM.

With the offline backend the reranker is lexical (the share of the query's keywords a page
holds); the tests check the wiring a real provider uses: more candidates fetched, one call
of kind ``rerank`` per retrieve, the answer cut to ``top_k_pages`` in the LLM's order, and
retrieval's own order kept when the provider cannot answer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sysutil import SMALL

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.errors import ConfigError, ProviderUnavailable
from memoryos_actors.gateway.offline import OfflineBackend
from memoryos_actors.gateway.prompts import validate_output

_TURNS = [
    ("My sister Clara lives in Porto.", "Porto is lovely."),
    ("We cooked a lentil soup last night.", "Sounds warming."),
    ("Clara gave me a blue scarf for my birthday.", "What a kind gift."),
    ("The train to the coast was late again.", "That is annoying."),
    ("I planted tomatoes and basil on the balcony.", "Nice garden."),
    ("My scarf from Clara is my favourite one.", "It sounds lovely."),
] * 3


def _fill(mem: MemoryOS) -> None:
    for i, (q, r) in enumerate(_TURNS):
        mem.add_turn("alice", f"{q} ({i})", r, timestamp=1_700_000_000.0 + 60 * i)
    mem.flush()


def _rerank_calls(mem: MemoryOS) -> int:
    by_kind = mem.stats().get("gateway", {}).get("by_kind") or {}
    return int((by_kind.get("rerank") or {}).get("calls") or 0)


def test_rerank_asks_the_llm_once_per_retrieve_and_keeps_top_k_pages(
    open_mem: Callable[..., MemoryOS],
) -> None:
    config = MemoryConfig(
        **{**SMALL, "stm_capacity": 2, "top_k_pages": 3, "rerank": True, "rerank_candidates": 8}
    )
    mem = open_mem(config)
    _fill(mem)
    before = _rerank_calls(mem)
    ctx = mem.retrieve("alice", "What did Clara give me, the scarf?")
    assert _rerank_calls(mem) == before + 1
    assert len(ctx.mtm) == 3
    # The offline reranker puts pages holding most of the question's words first.
    assert "scarf" in ctx.mtm[0].text.lower() and "clara" in ctx.mtm[0].text.lower()


def test_rerank_is_off_by_default_and_no_call_is_made(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "stm_capacity": 2, "top_k_pages": 3}))
    assert MemoryConfig().rerank is False
    _fill(mem)
    mem.retrieve("alice", "What did Clara give me?")
    assert _rerank_calls(mem) == 0


def test_an_unavailable_provider_keeps_retrievals_own_order(
    open_mem: Callable[..., MemoryOS], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = open_mem(MemoryConfig(**{**SMALL, "stm_capacity": 2, "top_k_pages": 3}), sub="a")
    _fill(plain)
    want = [h.item_id for h in plain.retrieve("alice", "the train to the coast").mtm]
    mem = open_mem(
        MemoryConfig(**{**SMALL, "stm_capacity": 2, "top_k_pages": 3, "rerank": True}), sub="b"
    )
    _fill(mem)

    def down(*_a: object, **_k: object) -> object:
        raise ProviderUnavailable("provider down")

    monkeypatch.setattr(type(mem._core.gateway_service), "complete", down)
    got = [h.item_id for h in mem.retrieve("alice", "the train to the coast").mtm]
    assert got == want


def test_rerank_candidates_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="rerank_candidates"):
        MemoryConfig(rerank_candidates=0)


def test_a_rerank_answer_keeps_ids_once_in_order_and_drops_what_is_no_id() -> None:
    assert validate_output("rerank", {"order": [3, "1", 3, "x", True, 0]}) == {"order": [3, 1, 0]}
    offline = OfflineBackend().complete(
        "rerank",
        {
            "query": "blue scarf",
            "pages": [
                {"id": 0, "text": "soup"},
                {"id": 1, "text": "a scarf"},
                {"id": 2, "text": "a blue scarf"},
            ],
        },
    )
    assert offline == {"order": [2, 1, 0]}
