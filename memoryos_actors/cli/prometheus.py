"""Prometheus text exposition (format 0.0.4) of :meth:`MemoryOS.stats` output.

Used by ``memoryos stats --prometheus``; no client library is needed for a text format this
small, and a scraper (or a file collector) reads it as is.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["render_prometheus"]

_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class _Exposition:
    """Collects metric families and renders the Prometheus text format (version 0.0.4)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._families: dict[str, tuple[str, str, list[tuple[str, dict[str, str], float]]]] = {}

    def add(
        self,
        name: str,
        kind: str,
        help_text: str,
        value: Any,
        labels: dict[str, str] | None = None,
        *,
        suffix: str = "",
    ) -> None:
        """Add one sample of family ``prefix_name`` (``suffix`` for summary _sum/_count)."""
        if value is None or isinstance(value, (str, list, dict)):
            return
        number = float(value)
        family = f"{self._prefix}_{name}"
        if not _METRIC_NAME.match(family):
            raise ValueError(f"bad metric name {family!r}")
        entry = self._families.setdefault(family, (kind, help_text, []))
        if entry[0] != kind:
            raise ValueError(f"metric {family} registered as {entry[0]} and {kind}")
        entry[2].append((family + suffix, dict(labels or {}), number))

    def render(self) -> str:
        out: list[str] = []
        for family, (kind, help_text, samples) in self._families.items():
            out.append(f"# HELP {family} {_escape_help(help_text)}")
            out.append(f"# TYPE {family} {kind}")
            for sample_name, labels, value in samples:
                for key in labels:
                    if not _LABEL_NAME.match(key):
                        raise ValueError(f"bad label name {key!r}")
                label_text = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
                label_part = "{" + label_text + "}" if label_text else ""
                out.append(f"{sample_name}{label_part} {_format_value(value)}")
        return "\n".join(out) + "\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _summary(exp: _Exposition, name: str, help_text: str, latency: dict[str, Any]) -> None:
    """A latency summary in seconds from an accounting ``{count, mean_ms, pNN_ms}`` dict."""
    count = int(latency.get("count", 0) or 0)
    for q, key in (("0.5", "p50_ms"), ("0.95", "p95_ms"), ("0.99", "p99_ms")):
        if key in latency:
            exp.add(name, "summary", help_text, float(latency[key]) / 1000.0, {"quantile": q})
    exp.add(
        name,
        "summary",
        help_text,
        float(latency.get("mean_ms", 0.0)) * count / 1000.0,
        suffix="_sum",
    )
    exp.add(name, "summary", help_text, count, suffix="_count")


def render_prometheus(stats: dict[str, Any], prefix: str = "memoryos") -> str:
    """Render :meth:`MemoryOS.stats` output as Prometheus text exposition format.

    Process counters (turns, retrievals, LLM calls, tokens) count since the data
    directory was opened by this process; ``stored_*`` gauges describe the data on disk.
    Latencies are summaries in seconds with quantiles 0.5, 0.95 and 0.99.
    """
    exp = _Exposition(prefix)
    if "user_id" in stats:  # per-user stats
        labels = {"user": str(stats["user_id"])}
        for key, help_text in (
            ("turns", "Turns stored for the user."),
            ("stm_pages", "Pages in the user's STM."),
            ("mtm_segments", "Segments in the user's MTM."),
            ("mtm_pages", "Pages in the user's MTM segments."),
            ("kb_facts", "Facts in the user's LPM knowledge base."),
            ("traits_set", "User traits with a level."),
            ("archived_records", "Records evicted from MTM to the user's archive."),
        ):
            exp.add(f"user_{key}", "gauge", help_text, stats.get(key), labels)
        gw = stats.get("gateway") or {}
        exp.add(
            "user_llm_calls_total",
            "counter",
            "LLM calls made for the user.",
            gw.get("calls", 0),
            labels,
        )
        for kind in ("prompt", "completion"):
            exp.add(
                "user_llm_tokens_total",
                "counter",
                "LLM tokens spent for the user.",
                gw.get(f"{kind}_tokens", 0),
                {**labels, "type": kind},
            )
        return exp.render()

    for key, help_text in (
        ("turns", "Turns added by this process."),
        ("retrievals", "Retrievals served by this process."),
        ("chats", "Chat replies generated by this process."),
        ("degraded_chats", "Chat replies written by the offline fallback during an outage."),
        ("activations", "User actor groups started."),
        ("passivations", "User actor groups stopped after idling or for room."),
    ):
        exp.add(f"{key}_total", "counter", help_text, stats.get(key))
    exp.add(
        "active_users", "gauge", "Users whose actor groups are live.", stats.get("active_users")
    )
    exp.add("inflight_calls", "gauge", "Calls in flight.", stats.get("inflight"))
    exp.add("gateway_backlog", "gauge", "Gateway jobs queued.", stats.get("gateway_backlog"))
    exp.add("threads", "gauge", "Threads in the process.", stats.get("threads"))
    exp.add(
        "user_group_restarts_total",
        "counter",
        "Restarts of user actor groups by the users supervisor.",
        stats.get("user_group_restarts"),
    )
    exp.add(
        "actor_restarts_total",
        "counter",
        "Restarts of every child in the supervision tree.",
        stats.get("tree_restarts"),
    )
    exp.add(
        "damaged_users",
        "gauge",
        "Users whose files were refused as damaged.",
        stats.get("damaged_users"),
    )
    for user in sorted(stats.get("damaged") or {}):
        exp.add(
            "user_damaged",
            "gauge",
            "1 for each user whose files are damaged (memoryos repair USER).",
            1,
            {"user": str(user)},
        )
    for q, key in (("0.5", "activation_ms_p50"), ("0.99", "activation_ms_p99")):
        if key in stats:
            exp.add(
                "activation_latency_seconds",
                "gauge",
                "User activation latency quantiles, seconds.",
                float(stats[key]) / 1000.0,
                {"quantile": q},
            )

    stored = stats.get("stored") or {}
    exp.add("users", "gauge", "Users with data in the data directory.", stored.get("users"))
    for key, help_text in (
        ("turns", "Turns stored over all users."),
        ("stm_pages", "Pages in STM over all users."),
        ("mtm_segments", "MTM segments over all users."),
        ("mtm_pages", "Pages in MTM segments over all users."),
        ("kb_facts", "LPM facts over all users."),
        ("traits_set", "User traits with a level over all users."),
        ("archived_records", "Records in the archives over all users."),
    ):
        exp.add(f"stored_{key}", "gauge", help_text, stored.get(key))

    gw = stats.get("gateway") or {}
    if gw:
        embedder = gw.get("embedder") or {}
        exp.add(
            "info",
            "gauge",
            "Backend and embedder in use (value is always 1).",
            1,
            {
                "backend": str(gw.get("backend", "")),
                "embedder": str(embedder.get("name", "")),
                "embedding_dim": str(embedder.get("dim", "")),
            },
        )
        for key, help_text in (
            ("calls", "LLM completion calls."),
            ("errors", "LLM completion calls that failed."),
            ("degraded", "LLM completions answered by the offline fallback."),
            ("cache_hits", "LLM completions answered from the cache."),
            ("retries", "LLM call retries."),
        ):
            exp.add(f"llm_{key}_total", "counter", help_text, gw.get(key))
        for kind in ("prompt", "completion"):
            exp.add(
                "llm_tokens_total",
                "counter",
                "LLM tokens spent.",
                gw.get(f"{kind}_tokens"),
                {"type": kind},
            )
        exp.add(
            "llm_cost_usd_total", "counter", "Estimated LLM cost, US dollars.", gw.get("cost_usd")
        )
        for kind, counters in sorted((gw.get("by_kind") or {}).items()):
            exp.add(
                "llm_calls_by_kind_total",
                "counter",
                "LLM calls per prompt kind.",
                counters.get("calls"),
                {"kind": str(kind)},
            )
        if isinstance(gw.get("latency"), dict):
            _summary(exp, "llm_latency_seconds", "LLM call latency, seconds.", gw["latency"])
        emb = gw.get("embeddings") or {}
        for key, help_text in (
            ("requests", "Embedding requests."),
            ("texts", "Texts embedded."),
            ("batches", "Embedding batches sent to the embedder."),
            ("cache_hits", "Embeddings answered from the cache."),
            ("errors", "Embedding requests that failed."),
        ):
            exp.add(f"embedding_{key}_total", "counter", help_text, emb.get(key))
        if isinstance(emb.get("latency"), dict):
            _summary(
                exp,
                "embedding_latency_seconds",
                "Embedding batch latency, seconds.",
                emb["latency"],
            )
        breaker = gw.get("breaker") or {}
        for which in ("completion", "embedding"):
            if which in breaker:
                exp.add(
                    "llm_breaker_open",
                    "gauge",
                    "1 when the circuit breaker is not closed.",
                    0 if breaker[which] == "closed" else 1,
                    {"breaker": which},
                )
                exp.add(
                    "llm_breaker_opened_total",
                    "counter",
                    "Times the breaker opened.",
                    breaker.get(f"{which}_times_opened"),
                    {"breaker": which},
                )
        provider = gw.get("provider") or {}
        if provider.get("state"):
            for state in ("offline", "ok", "degraded", "misconfigured"):
                exp.add(
                    "llm_provider_state",
                    "gauge",
                    "1 for the provider's current state (see /readyz).",
                    1 if provider["state"] == state else 0,
                    {"state": state},
                )
        conc = gw.get("concurrency") or {}
        exp.add("llm_in_flight", "gauge", "LLM calls in flight.", conc.get("in_flight"))
        exp.add(
            "llm_pending_redo",
            "gauge",
            "Degraded completions queued for a redo.",
            gw.get("pending_redo"),
        )
    return exp.render()
