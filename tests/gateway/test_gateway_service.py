"""GatewayService without a provider: caching, coalescing, accounting, lifecycle, actors."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from gwhelpers import chat_payload, gateway_config
from waiting import wait_until

from memoryos_actors.errors import InvalidInput, SystemClosed
from memoryos_actors.gateway import GatewayService, HashingEmbedder

MakeService = Callable[..., GatewayService]


class GatedEmbedder:
    """A local embedder that counts calls and can hold the first call until released."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(32)
        self.name, self.dim = "gated-32", 32
        self.batches: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        self.entered.set()
        self.release.wait(10)
        return self.inner.embed(texts)


def test_default_service_is_offline_and_says_so() -> None:
    with GatewayService() as svc:
        c = svc.complete("chat_reply", chat_payload(1))
        assert not c.degraded and c.backend == "offline (extractive, no LLM)"
        assert svc.stats()["backend"] == "offline (extractive, no LLM)"
        assert svc.embedder_info() == ("hashing-v1-512", 512)


def test_repeated_completion_is_served_from_cache(make_service: MakeService) -> None:
    svc = make_service()
    first = svc.complete(
        "segment_summary", {"pages": [{"query": "I like tea.", "response": "Ok."}]}
    )
    first.data["summary"] = "mutated by caller"
    again = svc.complete(
        "segment_summary", {"pages": [{"query": "I like tea.", "response": "Ok."}]}
    )
    assert again.data["summary"] != "mutated by caller"
    stats = svc.stats()
    assert stats["calls"] == 1 and stats["cache_hits"] == 1
    assert stats["cache"]["completions"]["hits"] == 1


def test_repeated_texts_are_embedded_once(make_service: MakeService) -> None:
    emb = GatedEmbedder()
    svc = make_service(embedder=emb)
    a = svc.embed(["alpha beta", "gamma", "alpha beta"])
    b = svc.embed(["gamma", "alpha beta"])
    assert emb.batches == [["alpha beta", "gamma"]]
    assert np.array_equal(a[0], a[2]) and np.array_equal(a[1], b[0])
    assert svc.stats()["embeddings"]["cache_hits"] == 2  # the whole second request


def test_concurrent_embed_requests_are_coalesced_into_one_batch(make_service: MakeService) -> None:
    emb = GatedEmbedder()
    emb.release.clear()
    svc = make_service(gateway_config(embed_coalesce_ms=1.0), embedder=emb)
    results: dict[int, np.ndarray] = {}

    def worker(i: int) -> None:
        results[i] = svc.embed([f"text number {i}"])

    first = threading.Thread(target=worker, args=(0,))
    first.start()
    emb.entered.wait(10)  # batch 1 (one text) is now inside the embedder
    others = [threading.Thread(target=worker, args=(i,)) for i in range(1, 9)]
    for t in others:
        t.start()
    wait_until(lambda: svc._batcher is not None and svc._batcher._queued_texts == 8, "8 queued")
    emb.release.set()
    for t in (first, *others):
        t.join(10)
    assert [len(b) for b in emb.batches] == [1, 8]  # 9 callers, 2 embedder calls
    direct = HashingEmbedder(32)
    for i, row in results.items():
        assert np.allclose(row[0], direct.embed([f"text number {i}"])[0])
    assert svc.stats()["embeddings"]["batch_size_max"] == 8


def test_embedding_without_coalescing_calls_the_embedder_directly(
    make_service: MakeService,
) -> None:
    emb = GatedEmbedder()
    svc = make_service(gateway_config(embed_coalesce_ms=0.0), embedder=emb)
    svc.embed(["one"])
    assert svc._batcher is None and emb.batches == [["one"]]


def test_close_stops_the_batcher_and_refuses_new_calls(make_service: MakeService) -> None:
    svc = make_service()
    svc.embed(["warm"])
    thread = svc._batcher._thread if svc._batcher else None
    svc.close()
    svc.close()  # idempotent
    assert thread is not None and not thread.is_alive()
    with pytest.raises(SystemClosed):
        svc.embed(["x"])
    with pytest.raises(SystemClosed):
        svc.complete("chat_reply", chat_payload(1))


def test_bad_requests_are_invalid_input(make_service: MakeService) -> None:
    svc = make_service()
    with pytest.raises(InvalidInput):
        svc.complete("poem", {})
    with pytest.raises(InvalidInput):
        svc.complete("chat_reply", {"query": "no context"})
    with pytest.raises(InvalidInput):
        svc.embed("a bare string")
    assert svc.embed([]).shape == (0, 64)
    with pytest.raises(InvalidInput, match="not JSON-serialisable"):
        svc.submit("chat_reply", {"context": "c", "query": "q", "extra": {1, 2}})


def test_an_offline_completion_serialises_its_payload_once(
    make_service: MakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The payload's canonical JSON (the cache key) is its JSON check too: checking it again
    # when submitted and when the offline backend answers was a third of the call's work.
    import json

    seen: list[object] = []
    real_dumps = json.dumps

    def counting_dumps(obj: object, **kw: object) -> str:
        seen.append(obj)
        return real_dumps(obj, **kw)  # type: ignore[arg-type]

    svc = make_service()
    payload = chat_payload("once")
    monkeypatch.setattr(json, "dumps", counting_dumps)
    svc.complete("chat_reply", payload)
    monkeypatch.undo()
    holds = [o is payload or (isinstance(o, tuple) and any(x is payload for x in o)) for o in seen]
    assert sum(holds) == 1


def test_usage_is_accounted_per_kind_and_per_user(make_service: MakeService) -> None:
    svc = make_service()
    svc.complete("chat_reply", chat_payload(1), user_id="ann")
    svc.complete("chat_reply", chat_payload(2), user_id="bob")
    svc.complete("segment_summary", {"pages": []}, user_id="ann")
    stats = svc.stats()
    assert stats["by_kind"]["chat_reply"]["calls"] == 2
    assert stats["by_user"]["ann"]["calls"] == 2 and stats["by_user"]["bob"]["calls"] == 1
    assert (
        stats["latency"]["count"] == 3 and stats["latency"]["p99_ms"] >= stats["latency"]["p50_ms"]
    )


def test_importing_the_package_does_not_import_litellm() -> None:
    code = (
        "import sys, memoryos_actors, memoryos_actors.gateway, memoryos_actors.gateway.service;"
        "print('litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
