"""Calls from the sharded facade to its shard processes, and what the facade measures of them.

:class:`ShardCalls` sends one call to one shard through the engine's
:class:`~memoryos_actors.cluster._backend.ShardHost`, or one call to every shard at once
(their answers in shard order). A call that is safe to repeat is sent again after a shard
death while the engine restarts the shard, backing off from 10 ms to 0.5 s, for up to
:attr:`ClusterSettings.retry_seconds`; one that is not raises
:class:`~memoryos_actors.errors.ActorCrashed`, and a missing answer raises
:class:`~memoryos_actors.errors.Overloaded`. The calls in flight are counted, so that a
close waits for them and refuses new ones. The facade's own counters (turns, retrievals,
chats, shard retries) and latencies live here too, under the same lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, assert_never, cast

from memoryos_actors.api import Merge
from memoryos_actors.errors import ActorCrashed, Overloaded, SystemClosed

from ._backend import ShardDown, ShardHost
from ._call import ShardCall
from ._shard import error_from_reply

R = TypeVar("R")

__all__ = ["ClusterSettings", "ShardCalls", "merge_answers"]

#: Seconds the facade waits for a shard's answer before raising Overloaded.
_CALL_TIMEOUT_S = 120.0

#: Latency samples kept per name; past it, the older half is dropped.
_LATENCY_SAMPLES = 20000


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How the facade treats shard deaths (engine-independent part of a cluster's settings).

    Attributes:
        retry_seconds: how long a call that is safe to repeat keeps being sent to a dead
            shard while its engine restarts it, seconds.
        call_timeout_seconds: how long one call may wait for a shard's answer before
            :class:`~memoryos_actors.errors.Overloaded`, seconds.
    """

    retry_seconds: float = 60.0
    call_timeout_seconds: float = _CALL_TIMEOUT_S


def merge_answers(how: Merge, parts: list[Any]) -> Any:
    """The shards' answers ``parts`` (in shard order) to a call sent to every shard, as one
    answer, merged as ``how`` says (:class:`~memoryos_actors.api.Merge`)."""
    if how is Merge.NOTHING:
        return None
    if how is Merge.SORTED:
        return sorted(item for part in parts for item in part)
    if how is Merge.CONCAT:
        return [item for part in parts for item in part]
    if how is Merge.SECTIONS:
        return "\n".join(f"shard {n}:\n{text}" for n, text in enumerate(parts))
    if how is Merge.COUNTERS:
        merged: dict[str, Any] = {}
        for part in parts:
            for key, value in part.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                if isinstance(value, int) and isinstance(merged.get(key, 0), int):
                    merged[key] = merged.get(key, 0) + value
                else:
                    merged[key] = max(float(merged.get(key, 0.0)), float(value))
        damaged = [
            (user, why) for part in parts for user, why in (part.get("damaged") or {}).items()
        ]
        merged["damaged"] = dict(sorted(damaged))  # each shard's users, by id
        merged["shards"] = parts
        return merged
    assert_never(how)


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


class ShardCalls:
    """The calls of one facade to the shards ``host`` runs (thread-safe).

    Args:
        host: the engine's shard processes.
        settings: retry window and answer timeout.
        guard: called before every call is routed (the facade's layout check); whatever
            it raises refuses the call.
    """

    def __init__(
        self,
        host: ShardHost,
        settings: ClusterSettings,
        guard: Callable[[], None] | None = None,
    ) -> None:
        self.host = host
        #: Called before every call is routed; raises to refuse it (the layout changed).
        self.guard = guard
        self.settings = settings
        self.shards = host.shards
        self._lock = threading.Lock()
        self._closed = False
        self._inflight = 0
        self._idle = threading.Condition(self._lock)
        self._counters = {
            "turns": 0,
            "retrievals": 0,
            "chats": 0,
            "degraded_chats": 0,
            "shard_retries": 0,
        }
        self._latency: dict[str, list[float]] = {"add_turn_ms": [], "retrieve_ms": []}

    # -- calls -----------------------------------------------------------------------------

    def _begin(self) -> None:
        guard = self.guard
        if guard is not None:
            guard()
        with self._lock:
            if self._closed:
                raise SystemClosed("the memory system is closed")
            self._inflight += 1

    def _end(self) -> None:
        with self._lock:
            self._inflight -= 1
            self._idle.notify_all()

    def call(
        self,
        shard: int,
        call: ShardCall[..., R],
        *,
        retry: bool,
        timeout: float | None = None,
    ) -> R:
        """``call`` on shard ``shard``; sent again after a shard death when ``retry``.

        ``timeout``: seconds to wait for the answer (default ``call_timeout_seconds``).
        """
        self._begin()
        try:
            wait = self.settings.call_timeout_seconds if timeout is None else timeout
            deadline = time.monotonic() + self.settings.retry_seconds
            pause = 0.01
            while True:
                try:
                    handle = self.host.submit(shard, "call", call)
                    reply = self.host.result(handle, wait)
                    if reply[0] == "ok":
                        # The shard ran ``call``'s method: its answer has the method's type.
                        return cast("R", reply[1])
                    raise error_from_reply(reply)
                except ShardDown as exc:
                    if not retry or time.monotonic() > deadline:
                        raise ActorCrashed(
                            f"shard {shard} died during {call.name} ({exc}); "
                            + (
                                f"it did not come back within {self.settings.retry_seconds} s"
                                if retry
                                else "the call may or may not have taken effect"
                            )
                        ) from None
                    self.count("shard_retries")
                    time.sleep(pause)  # the engine is restarting the shard
                    pause = min(pause * 2, 0.5)
                except TimeoutError:
                    raise Overloaded(
                        f"shard {shard} did not answer {call.name} within {wait} s"
                    ) from None
        finally:
            self._end()

    def call_all(
        self, call: ShardCall[..., R], *, retry: bool = True, timeout: float | None = None
    ) -> list[R]:
        """``call`` on every shard at once (each sent again after a shard death when
        ``retry``); the answers in shard order, or the first failure raised."""
        results: list[R | None] = [None] * self.shards
        failures: list[BaseException] = []

        def one(n: int) -> None:
            try:
                results[n] = self.call(n, call, retry=retry, timeout=timeout)
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                failures.append(exc)

        threads = [
            threading.Thread(target=one, args=(n,), name=f"memoryos-fanout-{n}")
            for n in range(1, self.shards)
        ]
        for t in threads:
            t.start()
        one(0)
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        return cast("list[R]", results)  # every shard answered

    def info(self, shard: int) -> dict[str, Any]:
        """The shard's ``info()``, asked again while the engine restarts it."""
        deadline = time.monotonic() + self.settings.retry_seconds
        while True:
            try:
                info: dict[str, Any] = self.host.result(
                    self.host.submit(shard, "info"), self.settings.call_timeout_seconds
                )
                return info
            except ShardDown as exc:
                if time.monotonic() > deadline:
                    raise ActorCrashed(f"shard {shard} is down ({exc})") from None
                time.sleep(0.05)
            except TimeoutError:
                raise Overloaded(f"shard {shard} did not answer info") from None

    # -- what the facade measures ----------------------------------------------------------

    def count(self, *names: str) -> None:
        """Add 1 to each of the counters ``names``."""
        with self._lock:
            for name in names:
                self._counters[name] += 1

    def observe(self, name: str, started: float) -> None:
        """Record the latency of a call that started at ``started`` (``perf_counter``
        seconds) under ``name`` (``add_turn_ms`` or ``retrieve_ms``), in milliseconds."""
        with self._lock:
            values = self._latency[name]
            values.append((time.perf_counter() - started) * 1000.0)
            if len(values) > _LATENCY_SAMPLES:
                del values[: _LATENCY_SAMPLES // 2]

    def measured(self) -> dict[str, Any]:
        """The counters, and p50/p95/p99 of each latency in milliseconds
        (``add_turn_ms_p50``...)."""
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            for name, values in self._latency.items():
                for label, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99)):
                    out[f"{name}_{label}"] = _percentile(values, p)
        return out

    # -- closing ---------------------------------------------------------------------------

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the calls in flight; False if already closed."""
        with self._lock:
            if self._closed:
                return False
            deadline = time.monotonic() + timeout
            while self._inflight and time.monotonic() < deadline:
                self._idle.wait(0.05)
        return True

    def mark_closed(self) -> None:
        """Refuse every call from now on (:class:`~memoryos_actors.errors.SystemClosed`)."""
        with self._lock:
            self._closed = True
