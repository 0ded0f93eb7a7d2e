"""CPU cost of one chat-completion call, per client path, against a loopback provider.

The provider is the tests' fake OpenAI-compatible server (``tests/gateway/fakeserver.py``)
running in a *separate process*, so the CPU time measured here (``time.process_time`` of
this process) is the client's alone: request building, HTTP, response parsing. Each path
sends the same prompt (a ``page_meta`` request rendered by the gateway's prompt code).

Paths:

* ``litellm_sync``   ``litellm.completion``, one call at a time
* ``litellm_async``  ``litellm.acompletion``, ``--concurrency`` calls in flight
* ``openai_sync``    the ``openai`` SDK's ``OpenAI().chat.completions.create``
* ``openai_async``   ``AsyncOpenAI``, ``--concurrency`` in flight
* ``httpx_sync``     a raw ``httpx.Client`` POST + ``json`` decode
* ``httpx_async``    a raw ``httpx.AsyncClient`` POST, ``--concurrency`` in flight
* ``aiohttp_async``  a raw ``aiohttp.ClientSession`` POST, ``--concurrency`` in flight
* ``gateway_async``  this project's gateway core (:class:`GatewayService`, litellm backend
  with its OpenAI-compatible fast path), ``--concurrency`` in flight, including the
  validation of each answer

Each path first runs ``--warmup`` calls (imports, connection pools), then ``--calls``
timed ones, repeated ``--repeats`` times; the median CPU ms per call is reported with
the min and max over repeats, plus wall time per call.

Run: ``python bench/client_cpu.py [--calls 300 --repeats 3 --concurrency 16]``.
Results: ``bench/results/client_cpu.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parent
sys.path.insert(0, str(_ROOT))

KEY = "sk-fake-bench"


def start_server(latency_s: float) -> tuple[subprocess.Popen[str], str]:
    """The fake provider in its own process; returns (process, base_url)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from fakeserver import FakeOpenAIServer;"
        "s = FakeOpenAIServer(latency=float(sys.argv[2])).start();"
        "print(s.base_url, flush=True); sys.stdin.read(); s.stop()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(_ROOT / "tests" / "gateway"), str(latency_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def messages() -> list[dict[str, str]]:
    from memoryos_actors.gateway.prompts import render_messages

    return render_messages(
        "page_meta",
        {
            "page": {
                "query": "I went hiking on the ridge trail with new boots.",
                "response": "Nice! How did the boots hold up on the rocks?",
            },
            "previous_page": None,
            "previous_meta_chain": "",
        },
    )


def measure(run: Callable[[int], None], calls: int, warmup: int, repeats: int) -> dict[str, Any]:
    run(warmup)
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        run(calls)
        cpu.append((time.process_time() - c0) * 1000.0 / calls)
        wall.append((time.perf_counter() - w0) * 1000.0 / calls)
    return {
        "cpu_ms_per_call": round(statistics.median(cpu), 3),
        "cpu_ms_min": round(min(cpu), 3),
        "cpu_ms_max": round(max(cpu), 3),
        "wall_ms_per_call": round(statistics.median(wall), 3),
    }


def _gather(make: Callable[[], Any], n: int, concurrency: int) -> None:
    async def main() -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with sem:
                await make()

        await asyncio.gather(*(one() for _ in range(n)))

    asyncio.run(main())


def paths(base_url: str, concurrency: int) -> dict[str, Callable[[], Callable[[int], None]]]:
    msgs = messages()
    body = {"model": "fake-model", "messages": msgs, "temperature": 0.0, "max_tokens": 512}

    def litellm_sync() -> Callable[[int], None]:
        import litellm

        def run(n: int) -> None:
            for _ in range(n):
                r = litellm.completion(
                    model="openai/fake-model",
                    messages=msgs,
                    api_base=base_url,
                    api_key=KEY,
                    max_retries=0,
                    temperature=0.0,
                    max_tokens=512,
                )
                json.loads(r.choices[0].message.content)

        return run

    def litellm_async() -> Callable[[int], None]:
        import litellm

        async def one() -> None:
            r = await litellm.acompletion(
                model="openai/fake-model",
                messages=msgs,
                api_base=base_url,
                api_key=KEY,
                max_retries=0,
                temperature=0.0,
                max_tokens=512,
            )
            json.loads(r.choices[0].message.content)

        return lambda n: _gather(one, n, concurrency)

    def openai_sync() -> Callable[[int], None]:
        import openai

        client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)

        def run(n: int) -> None:
            for _ in range(n):
                r = client.chat.completions.create(
                    model="fake-model",
                    messages=msgs,  # type: ignore[arg-type]
                    temperature=0.0,
                    max_tokens=512,
                )
                json.loads(r.choices[0].message.content or "{}")

        return run

    def openai_async() -> Callable[[int], None]:
        import openai

        def run(n: int) -> None:
            async def main() -> None:
                client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
                sem = asyncio.Semaphore(concurrency)

                async def one() -> None:
                    async with sem:
                        r = await client.chat.completions.create(
                            model="fake-model",
                            messages=msgs,  # type: ignore[arg-type]
                            temperature=0.0,
                            max_tokens=512,
                        )
                        json.loads(r.choices[0].message.content or "{}")

                await asyncio.gather(*(one() for _ in range(n)))
                await client.close()

            asyncio.run(main())

        return run

    def httpx_sync() -> Callable[[int], None]:
        import httpx

        client = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {KEY}"})

        def run(n: int) -> None:
            for _ in range(n):
                r = client.post("/chat/completions", json=body)
                json.loads(r.json()["choices"][0]["message"]["content"])

        return run

    def httpx_async() -> Callable[[int], None]:
        import httpx

        def run(n: int) -> None:
            async def main() -> None:
                async with httpx.AsyncClient(
                    base_url=base_url, headers={"Authorization": f"Bearer {KEY}"}
                ) as client:
                    sem = asyncio.Semaphore(concurrency)

                    async def one() -> None:
                        async with sem:
                            r = await client.post("/chat/completions", json=body)
                            json.loads(r.json()["choices"][0]["message"]["content"])

                    await asyncio.gather(*(one() for _ in range(n)))

            asyncio.run(main())

        return run

    def aiohttp_async() -> Callable[[int], None]:
        import aiohttp

        def run(n: int) -> None:
            async def main() -> None:
                async with aiohttp.ClientSession(
                    headers={"Authorization": f"Bearer {KEY}"}
                ) as session:
                    sem = asyncio.Semaphore(concurrency)

                    async def one() -> None:
                        async with sem:
                            async with session.post(f"{base_url}/chat/completions", json=body) as r:
                                data = await r.json()
                            json.loads(data["choices"][0]["message"]["content"])

                    await asyncio.gather(*(one() for _ in range(n)))

            asyncio.run(main())

        return run

    def gateway_async() -> Callable[[int], None]:
        from memoryos_actors.config import MemoryConfig
        from memoryos_actors.gateway.service import GatewayService

        os.environ["BENCH_FAKE_LLM_KEY"] = KEY
        cfg = MemoryConfig(
            llm_backend="litellm",
            llm_model="openai/fake-model",
            llm_base_url=base_url,
            llm_api_key_env="BENCH_FAKE_LLM_KEY",
            llm_max_concurrency=concurrency,
            cache_size=0,
        )
        service = GatewayService(cfg)
        payload = {
            "page": {"query": "q", "response": "r"},
            "previous_page": None,
            "previous_meta_chain": "",
        }
        counter = iter(range(10**9))

        def run(n: int) -> None:
            futures = [
                service.submit("page_meta", {**payload, "previous_meta_chain": str(next(counter))})
                for _ in range(n)
            ]
            for f in futures:
                assert not f.result(60).degraded

        run.service = service  # type: ignore[attr-defined]
        return run

    return {
        "litellm_sync": litellm_sync,
        "litellm_async": litellm_async,
        "openai_sync": openai_sync,
        "openai_async": openai_async,
        "httpx_sync": httpx_sync,
        "httpx_async": httpx_async,
        "aiohttp_async": aiohttp_async,
        "gateway_async": gateway_async,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency-ms", type=float, default=0.0, help="provider latency per call")
    p.add_argument("--paths", default="", help="comma-separated subset of the paths")
    add_out_dir(p)
    args = p.parse_args(argv)
    proc, base_url = start_server(args.latency_ms / 1000.0)
    results: dict[str, Any] = {}
    try:
        table = paths(base_url, args.concurrency)
        chosen = [s for s in args.paths.split(",") if s] or list(table)
        for name in chosen:
            run = table[name]()
            results[name] = measure(run, args.calls, args.warmup, args.repeats)
            svc = getattr(run, "service", None)
            if svc is not None:
                svc.close()
            print(f"{name:14s} {results[name]}", flush=True)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    out = {
        "command": "python bench/client_cpu.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "calls": args.calls,
        "repeats": args.repeats,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "cpu_count": os.cpu_count(),
        "paths": results,
    }
    (bench_out_dir(args) / "client_cpu.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
