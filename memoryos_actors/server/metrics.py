"""Prometheus metrics of the server: HTTP traffic plus the memory system's counters.

Names follow Prometheus' rules: a ``memoryos_`` prefix, base units (seconds), ``_total`` on
counters. No label carries a user, tenant or key: label values are bounded (route templates,
methods, status codes, reasons).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ServerMetrics"]

_COUNTERS = (
    ("turns", "memoryos_turns", "Turns added since the server started."),
    ("retrievals", "memoryos_retrievals", "Retrievals served since the server started."),
    ("chats", "memoryos_chats", "Chat replies generated since the server started."),
    (
        "degraded_chats",
        "memoryos_degraded_chats",
        "Chat replies written by the offline fallback (a provider outage, or a reply that "
        "echoed the prompt back).",
    ),
    ("activations", "memoryos_user_activations", "User actor groups started."),
    ("passivations", "memoryos_user_passivations", "User actor groups stopped."),
    ("evicted_segments", "memoryos_evicted_segments", "Segments evicted from MTM to archives."),
    ("evicted_pages", "memoryos_evicted_pages", "Pages evicted from MTM to archives."),
    ("promoted_segments", "memoryos_promoted_segments", "Segments promoted to LPM."),
    (
        "user_group_restarts",
        "memoryos_user_group_restarts",
        "Restarts of user actor groups by their supervisor.",
    ),
)
_GAUGES = (
    ("active_users", "memoryos_active_users", "Users whose actor groups are live."),
    ("inflight", "memoryos_inflight_calls", "Memory calls in flight."),
    ("gateway_backlog", "memoryos_gateway_backlog", "Gateway jobs queued."),
    ("placement_backlog", "memoryos_placement_backlog", "Pages waiting for MTM placement."),
    (
        "damaged_users",
        "memoryos_damaged_users",
        "Users whose files were refused as damaged (their calls fail; others are served).",
    ),
)
_LATENCIES = (
    ("add_turn_ms", "memoryos_add_turn_latency_seconds", "add_turn latency quantiles, seconds."),
    ("retrieve_ms", "memoryos_retrieve_latency_seconds", "retrieve latency quantiles, seconds."),
)


class _MemoryCollector(Collector):
    """Reads :meth:`MemoryOS.stats` at scrape time."""

    def __init__(self, stats: Callable[[], dict[str, Any] | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        if not stats:
            return
        for key, name, doc in _COUNTERS:
            if key in stats:
                yield CounterMetricFamily(name, doc, value=float(stats[key]))
        for key, name, doc in _GAUGES:
            if key in stats:
                yield GaugeMetricFamily(name, doc, value=float(stats[key]))
        for key, name, doc in _LATENCIES:
            fam = GaugeMetricFamily(name, doc, labels=["quantile"])
            for q in ("50", "95", "99"):
                value = stats.get(f"{key}_p{q}")
                if value is not None:
                    fam.add_metric([f"0.{q}"], float(value) / 1000.0)
            yield fam
        gw = stats.get("gateway") or {}
        for key, name, doc in (
            ("calls", "memoryos_llm_calls", "LLM completion calls."),
            ("errors", "memoryos_llm_errors", "LLM completion calls that failed."),
            ("degraded", "memoryos_llm_degraded", "Completions answered by the fallback."),
            (
                "echoed_answers",
                "memoryos_llm_echoed_answers",
                "LLM answers rejected for echoing the prompt back (not used as replies).",
            ),
        ):
            if key in gw:
                yield CounterMetricFamily(name, doc, value=float(gw[key]))
        yield from _provider_metrics(gw)


_BREAKERS = ("completion", "embedding")
_PROVIDER_STATES = ("offline", "ok", "degraded", "misconfigured")


def _provider_metrics(gw: dict[str, Any]) -> Iterator[Metric]:
    """The circuit breakers and the provider's state (the names ``memoryos stats
    --prometheus`` uses)."""
    breaker = gw.get("breaker") or {}
    if breaker:
        is_open = GaugeMetricFamily(
            "memoryos_llm_breaker_open",
            "1 when the circuit breaker is not closed.",
            labels=["breaker"],
        )
        opened = CounterMetricFamily(
            "memoryos_llm_breaker_opened", "Times the circuit breaker opened.", labels=["breaker"]
        )
        for which in _BREAKERS:
            if which in breaker:
                is_open.add_metric([which], 0.0 if breaker[which] == "closed" else 1.0)
                opened.add_metric([which], float(breaker.get(f"{which}_times_opened", 0)))
        yield is_open
        yield opened
    state = (gw.get("provider") or {}).get("state")
    if state:
        fam = GaugeMetricFamily(
            "memoryos_llm_provider_state",
            "1 for the provider's current state (see /readyz).",
            labels=["state"],
        )
        for name in _PROVIDER_STATES:
            fam.add_metric([name], 1.0 if state == name else 0.0)
        yield fam


class ServerMetrics:
    """The server's metric registry (its own, not the process-global one)."""

    def __init__(self, stats: Callable[[], dict[str, Any] | None]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "memoryos_http_requests",
            "HTTP requests answered, by route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memoryos_http_request_duration_seconds",
            "Time to answer an HTTP request, seconds.",
            ["method", "route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=self.registry,
        )
        self.rejected = Counter(
            "memoryos_http_rejected_requests",
            "Requests refused before reaching the memory system, by reason.",
            ["reason"],
            registry=self.registry,
        )
        for reason in (
            "unauthorized",
            "rate_limited",
            "too_large",
            "bad_encoding",
            "key_file_invalid",
            "body_timeout",
            "stopping",
        ):
            self.rejected.labels(reason)
        self.registry.register(_MemoryCollector(stats))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)
