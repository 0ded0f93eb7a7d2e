"""Logging set-up: structlog with bound context, console or JSON output.

Library code only asks for loggers (``structlog.get_logger("memoryos.<part>")``) and binds
context (user, actor, event). This module configures output once, for the CLI and for
:meth:`MemoryOS.open`, and only when the application has not configured structlog itself.

The store's loggers are :func:`lazy_logger` proxies: importing structlog (with asyncio and
rich, a sizeable part of a short command's run) waits until an event is logged, and
:func:`configure_logging_on_first_event` lets a short command that may log nothing (such as
``memoryos stats``) set its output up only then.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "configure_logging",
    "configure_logging_on_first_event",
    "lazy_logger",
    "reported_elsewhere",
]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def configure_logging(level: str = "warning", fmt: str = "console", *, force: bool = False) -> None:
    """Send structlog events at ``level`` or above to stderr, as ``console`` text or ``json``.

    Does nothing if structlog is already configured (by the application or an earlier
    call), unless ``force`` is set.
    """
    import structlog

    global _deferred
    _deferred = None
    if structlog.is_configured() and not force:
        return
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            _drop_reported_elsewhere,
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.WARNING)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


_reported_elsewhere: frozenset[str] = frozenset()


@contextmanager
def reported_elsewhere(*events: str) -> Iterator[None]:
    """While in this block, leave ``events`` (event names, such as ``"chat.degraded"``)
    out of the output :func:`configure_logging` sets up: for a front end that tells its
    user about them in its own words, so that each is reported once, not twice."""
    global _reported_elsewhere
    saved = _reported_elsewhere
    _reported_elsewhere = saved | frozenset(events)
    try:
        yield
    finally:
        _reported_elsewhere = saved


def _drop_reported_elsewhere(_logger: Any, _method: str, event_dict: Any) -> Any:
    if event_dict.get("event") in _reported_elsewhere:
        import structlog

        raise structlog.DropEvent
    return event_dict


_deferred: tuple[str, str] | None = None
_deferred_lock = threading.Lock()


def configure_logging_on_first_event(level: str = "warning", fmt: str = "console") -> None:
    """Do what ``configure_logging(level, fmt, force=True)`` does, when the first event is
    logged through a :func:`lazy_logger` (at once if structlog is already imported).

    For a short command whose only possible log events come from the store: if none
    happens, structlog is never imported.
    """
    global _deferred
    if "structlog" in sys.modules:
        configure_logging(level, fmt, force=True)
        return
    with _deferred_lock:
        _deferred = (level, fmt)


def _apply_deferred() -> None:
    global _deferred
    with _deferred_lock:
        pending, _deferred = _deferred, None
    if pending is not None:
        configure_logging(*pending, force=True)


class _LazyLogger:
    """A structlog logger made on first use (see :func:`lazy_logger`)."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attr: str) -> Any:
        logger = self._logger
        if logger is None:
            import structlog

            _apply_deferred()
            logger = self._logger = structlog.get_logger(self._name)
        return getattr(logger, attr)


def lazy_logger(name: str) -> Any:
    """``structlog.get_logger(name)``, made (and structlog imported) on first use: every
    method of a structlog logger (``info``, ``error``, ``bind`` ...) works on it."""
    return _LazyLogger(name)
