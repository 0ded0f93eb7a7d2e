"""What the agent-runtime adapters (#44) cost per call over the library call they make.

In one process, on one offline memory system (``fsync`` ``never``, so the WAL's disk
flush does not hide the adapter's own cost), pairs of calls alternate, ``--calls`` of each:

* ``add_items`` of the OpenAI Agents SDK session (a user message and the assistant's
  reply, as the SDK makes them) against ``add_turn`` of the same texts; and the two
  ``add_items`` calls of one ``Runner.run`` (the input, then the reply, which joins the
  input's page) against the same ``add_turn``;
* ``get_items(limit=20)`` against the ``memories(kinds=["page"])`` listing it reads;
* the LlamaIndex block's ``aput`` (a user and an assistant message) against ``add_turn``;
* the block's ``aget`` (the latest user message) against ``retrieve`` of the same text;
* the LangGraph store's ``put`` of a new key against ``remember`` of the same text, its
  ``put`` of a key it holds against ``correct_memory``, its ``get`` against
  ``get_memory`` and its ``search`` with a query against ``retrieve`` (each of its calls
  lists the user's facts first; the store's user holds as many facts as the library's).

The library calls are made as a program would make them, synchronously; the adapters'
calls are awaited in one event loop (each runs the library call in a worker thread, which
is part of what it costs); the LangGraph store's are its synchronous ones, which call the
library directly, as a graph run with ``invoke`` makes them. Reported: p50 and p99 of each (ms) and the difference (the
adapter's overhead). The history grows as the bench runs (``--history`` pages first).

    python bench/adapters_bench.py [--calls 300] [--history 100] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench._out import add_out_dir, run_header, write_result


async def _run_like_the_sdk(session: Any, items: list[dict[str, Any]]) -> None:
    """What ``Runner.run`` does: the input first, the new items after the model answered
    (the second call joins the first's page: a listing, a turn and a delete)."""
    await session.add_items(items[:1])
    await session.add_items(items[1:])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _pair(
    calls: int,
    library: Callable[[int], Any],
    adapter: Callable[[int], Awaitable[Any]],
) -> tuple[list[float], list[float]]:
    lib_ms: list[float] = []
    ada_ms: list[float] = []
    for i in range(calls):
        start = time.perf_counter()
        library(i)
        lib_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await adapter(i)
        ada_ms.append((time.perf_counter() - start) * 1000)
    return lib_ms, ada_ms


async def _bench(mem: Any, calls: int, history: int) -> dict[str, dict[str, float]]:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    from memoryos_actors.integrations.langgraph import MemoryStore
    from memoryos_actors.integrations.llamaindex import MemoryOSBlock
    from memoryos_actors.integrations.openai_agents import MemorySession

    for i in range(history):
        mem.add_turn("lib", f"history question {i} about topic{i % 17}", f"answer {i}")
        mem.add_turn("sess", f"history question {i} about topic{i % 17}", f"answer {i}")
        mem.add_turn("block", f"history question {i} about topic{i % 17}", f"answer {i}")
        mem.add_turn("graph", f"history question {i} about topic{i % 17}", f"answer {i}")
    mem.flush()
    session = MemorySession("sess", mem)
    block = MemoryOSBlock(mem=mem, user_id="block")
    store = MemoryStore(mem)
    notes = ("graph", "notes")
    fact_id = mem.remember("lib", "note 0 about topic0")
    store.put(notes, "held", {"text": "note 0 about topic0"})

    def note(i: int) -> str:
        return f"note {i} about topic{i % 17}"

    async def sync(fn: Callable[[], Any]) -> Any:
        return fn()  # the store's synchronous call, timed in the loop like the others

    def sdk_items(i: int) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": f"question {i} about topic{i % 17}"},
            {
                "id": f"msg_{i}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"reply {i}", "annotations": []}],
            },
        ]

    def messages(i: int) -> list[ChatMessage]:
        return [
            ChatMessage(role=MessageRole.USER, content=f"question {i} about topic{i % 17}"),
            ChatMessage(role=MessageRole.ASSISTANT, content=f"reply {i}"),
        ]

    pairs: dict[str, tuple[Callable[[int], Any], Callable[[int], Awaitable[Any]]]] = {
        "session.add_items vs add_turn": (
            lambda i: mem.add_turn("lib", f"question {i} about topic{i % 17}", f"reply {i}"),
            lambda i: session.add_items(sdk_items(i)),
        ),
        "session run: input, then reply vs add_turn": (
            lambda i: mem.add_turn("lib", f"question {i} about topic{i % 17}", f"reply {i}"),
            lambda i: _run_like_the_sdk(session, sdk_items(i)),
        ),
        "session.get_items(20) vs memories(page)": (
            lambda i: mem.memories("sess", kinds=["page"]),
            lambda i: session.get_items(limit=20),
        ),
        "block.aput vs add_turn": (
            lambda i: mem.add_turn("lib", f"question {i} about topic{i % 17}", f"reply {i}"),
            lambda i: block.aput(messages(i)),
        ),
        "block.aget vs retrieve": (
            lambda i: mem.retrieve("block", f"what about topic{i % 17}?"),
            lambda i: block.aget([messages(i)[0]]),
        ),
        "store.put (new key) vs remember": (
            lambda i: mem.remember("lib", note(i)),
            lambda i: sync(lambda: store.put(notes, f"k{i}", {"text": note(i)})),
        ),
        "store.put (held key) vs correct_memory": (
            lambda i: mem.correct_memory("lib", fact_id, note(i)),
            lambda i: sync(lambda: store.put(notes, "held", {"text": note(i)})),
        ),
        "store.get vs get_memory": (
            lambda i: mem.get_memory("lib", fact_id),
            lambda i: sync(lambda: store.get(notes, "held")),
        ),
        "store.search(query) vs retrieve": (
            lambda i: mem.retrieve("lib", f"what about topic{i % 17}?"),
            lambda i: sync(lambda: store.search(("graph",), query=f"what about topic{i % 17}?")),
        ),
    }
    out: dict[str, dict[str, float]] = {}
    for name, (library, adapter) in pairs.items():
        await _pair(10, library, adapter)  # warm-up
        lib_ms, ada_ms = await _pair(calls, library, adapter)
        out[name] = {
            "library_p50_ms": statistics.median(lib_ms),
            "library_p99_ms": _pct(lib_ms, 0.99),
            "adapter_p50_ms": statistics.median(ada_ms),
            "adapter_p99_ms": _pct(ada_ms, 0.99),
        }
        row = out[name]
        row["overhead_p50_ms"] = row["adapter_p50_ms"] - row["library_p50_ms"]
        row["overhead_p99_ms"] = row["adapter_p99_ms"] - row["library_p99_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls of each kind")
    parser.add_argument("--history", type=int, default=100, help="pages stored first, per user")
    add_out_dir(parser)
    args = parser.parse_args()

    from memoryos_actors import MemoryConfig, MemoryOS

    with tempfile.TemporaryDirectory() as tmp:
        with MemoryOS.open(tmp, MemoryConfig(fsync="never", log_level="error")) as mem:
            rows = asyncio.run(_bench(mem, args.calls, args.history))
    print(f"{'pair':42} {'lib p50':>8} {'lib p99':>8} {'ada p50':>8} {'ada p99':>8}  overhead")
    for name, r in rows.items():
        print(
            f"{name:42} {r['library_p50_ms']:8.2f} {r['library_p99_ms']:8.2f} "
            f"{r['adapter_p50_ms']:8.2f} {r['adapter_p99_ms']:8.2f}  "
            f"{r['overhead_p50_ms']:+.2f} p50 / {r['overhead_p99_ms']:+.2f} p99 ms"
        )
    result = {**run_header("adapters"), "calls": args.calls, "history": args.history, "rows": rows}
    print(f"wrote {write_result(args, 'adapters.json', result)}")


if __name__ == "__main__":
    main()
