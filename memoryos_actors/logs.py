"""Logging set-up: structlog with bound context, console or JSON output.

Library code only asks for loggers (``structlog.get_logger("memoryos.<part>")``) and binds
context (user, actor, event). This module configures output once, for the CLI and for
:meth:`MemoryOS.open`, and only when the application has not configured structlog itself.
"""

from __future__ import annotations

import logging
import sys

import structlog

__all__ = ["configure_logging"]

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
    if structlog.is_configured() and not force:
        return
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
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
