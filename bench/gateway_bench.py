"""Gateway bench: LLM calls per stored turn and embedding batch sizes.

Runs the memory system (``memoryos_actors.system.MemoryOS``) with the litellm backend and
litellm embedder pointed at the tests' fake OpenAI-compatible server on 127.0.0.1, which
adds a simulated provider latency to every request. Several users add turns concurrently;
after :meth:`MemoryOS.flush` we read the gateway's accounting and the server's request
counters. If the system cannot run (``--mode simulate``, or it fails to start), a plain
per-turn pattern is driven through :class:`GatewayService` instead: one ``page_meta`` and one
embedding per turn, a debounced ``segment_summary`` per topic, a ``persona_update`` when a
topic has had ``--promote-every`` turns. Results go to ``bench/results/gateway.json``.

Run: ``python bench/gateway_bench.py [--users 8 --turns 40 --latency-ms 20]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent / "tests" / "gateway"))

from fakeserver import FakeOpenAIServer

KEY_ENV = "BENCH_FAKE_LLM_KEY"
TOPICS = [
    ("hiking", "I went hiking on the mountain trail with new boots this weekend."),
    ("cooking", "I cooked a mushroom risotto and the rice came out creamy."),
    ("python", "My python service leaks memory when the cache grows."),
    ("violin", "I practise violin scales before orchestra rehearsal."),
    ("garden", "The tomatoes in my garden need more sun this spring."),
]


def _turn(user: int, i: int) -> tuple[str, str]:
    # Runs of 5 turns per topic, so segments form and continuity is mostly true.
    name, line = TOPICS[(i // 5 + user) % len(TOPICS)]
    return (
        f"{line} Turn {i} of user {user}: what about {name} next?",
        f"About {name}: here is advice number {i} for you.",
    )


def run_system(server: FakeOpenAIServer, users: int, turns: int) -> dict[str, Any]:
    """Drive the real memory system; returns the gateway stats and timing."""
    from memoryos_actors.config import MemoryConfig
    from memoryos_actors.system import MemoryOS

    cfg = MemoryConfig(
        llm_backend="litellm",
        llm_model="openai/fake-model",
        llm_base_url=server.base_url,
        llm_api_key_env=KEY_ENV,
        embedder="litellm",
        embedding_model="openai/fake-embed",
        llm_timeout_seconds=10.0,
        fsync="never",
        log_level="error",
        summary_debounce_seconds=0.05,
    )
    with tempfile.TemporaryDirectory() as tmp, MemoryOS.open(tmp, cfg) as mem:
        t0 = time.perf_counter()

        def feed(u: int) -> None:
            for i in range(turns):
                q, r = _turn(u, i)
                mem.add_turn(f"user{u}", q, r)

        threads = [threading.Thread(target=feed, args=(u,)) for u in range(users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        mem.flush(timeout=60.0)
        elapsed = time.perf_counter() - t0
        return {"mode": "system", "elapsed_s": elapsed, "gateway": mem.gateway_service.stats()}


def run_simulated(
    server: FakeOpenAIServer, users: int, turns: int, promote_every: int, debounce: int
) -> dict[str, Any]:
    """Drive the per-turn call pattern straight through a GatewayService."""
    from types import SimpleNamespace

    from memoryos_actors.gateway import GatewayService

    cfg = SimpleNamespace(
        llm_backend="litellm",
        llm_model="openai/fake-model",
        llm_base_url=server.base_url,
        llm_api_key_env=KEY_ENV,
        embedder="litellm",
        embedding_model="openai/fake-embed",
        llm_timeout_seconds=10.0,
        llm_max_concurrency=8,
        embed_coalesce_ms=2.0,
    )
    svc = GatewayService(cfg)
    t0 = time.perf_counter()

    def feed(u: int) -> None:
        prev: dict[str, str] | None = None
        chain = ""
        pending: list[dict[str, str]] = []
        topic_turns = 0
        for i in range(turns):
            q, r = _turn(u, i)
            page = {"query": q, "response": r}
            svc.embed([f"{q} {r}"])
            meta = svc.complete(
                "page_meta",
                {"page": page, "previous_page": prev, "previous_meta_chain": chain},
                user_id=f"user{u}",
            )
            chain = meta.data["meta_chain"]
            pending.append(page)
            topic_turns += 1
            if len(pending) >= debounce:  # debounced summary refresh
                svc.complete("segment_summary", {"pages": pending}, user_id=f"user{u}")
                pending = []
            if topic_turns >= promote_every:
                svc.complete(
                    "persona_update", {"pages": [page], "trait_names": []}, user_id=f"user{u}"
                )
                topic_turns = 0
            prev = page

    threads = [threading.Thread(target=feed, args=(u,)) for u in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    stats = svc.stats()
    svc.close()
    return {"mode": "simulate", "elapsed_s": elapsed, "gateway": stats}


def main(argv: list[str] | None = None) -> int:
    """Run the bench; print and write ``bench/results/gateway.json``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--turns", type=int, default=40, help="turns per user")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="simulated provider latency")
    ap.add_argument("--mode", choices=("auto", "system", "simulate"), default="auto")
    ap.add_argument("--promote-every", type=int, default=20, help="simulate: turns per promotion")
    ap.add_argument("--debounce", type=int, default=4, help="simulate: turns per summary")
    add_out_dir(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault(KEY_ENV, "sk-bench-dummy")

    t_imp = time.perf_counter()
    from memoryos_actors.gateway.litellm_backend import import_litellm

    import_litellm()
    litellm_import_s = time.perf_counter() - t_imp

    with FakeOpenAIServer(embed_dim=64, latency=args.latency_ms / 1000.0) as server:
        result: dict[str, Any] | None = None
        error = None
        if args.mode in ("auto", "system"):
            try:
                result = run_system(server, args.users, args.turns)
            except Exception as exc:
                if args.mode == "system":
                    raise
                error = f"{type(exc).__name__}: {exc}"
        if result is None:
            result = run_simulated(
                server, args.users, args.turns, args.promote_every, args.debounce
            )
        chat_http, embed_http = server.chat_requests, server.embed_requests
        batch_sizes = list(server.state.embed_batch_sizes)

    g = result["gateway"]
    stored = args.users * args.turns
    by_kind = {k: v["calls"] for k, v in g["by_kind"].items()}
    out = {
        "mode": result["mode"],
        "system_error": error,
        "users": args.users,
        "turns_per_user": args.turns,
        "stored_turns": stored,
        "provider_latency_ms": args.latency_ms,
        "elapsed_s": round(result["elapsed_s"], 3),
        "turns_per_s": round(stored / result["elapsed_s"], 1),
        "litellm_import_s": round(litellm_import_s, 3),
        "llm_calls": g["calls"],
        "llm_http_requests": chat_http,
        "llm_calls_per_turn": round(g["calls"] / stored, 3),
        "llm_http_per_turn": round(chat_http / stored, 3),
        "llm_calls_by_kind": by_kind,
        "completion_cache_hits": g["cache_hits"],
        "degraded": g["degraded"],
        "llm_latency_ms": g["latency"],
        "embed_requests": g["embeddings"]["requests"],
        "embed_http_requests": embed_http,
        "embed_texts": g["embeddings"]["texts"],
        "embed_cache_hits": g["embeddings"]["cache_hits"],
        "embed_batch_size_mean": round(sum(batch_sizes) / len(batch_sizes), 2)
        if batch_sizes
        else 0,
        "embed_batch_size_max": max(batch_sizes) if batch_sizes else 0,
        "embed_requests_per_http_call": round(g["embeddings"]["requests"] / embed_http, 2)
        if embed_http
        else 0,
    }
    (bench_out_dir(args) / "gateway.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
