"""``memoryos doctor`` and the provider check ``chat``, ``serve`` and ``mcp`` run at start.

``doctor`` prints one line per check of :func:`memoryos_actors.checkup.doctor` and exits 1
when any failed. The start-up check (:func:`provider_check`) refuses to start on a
provider configuration error, with the error's one line, and warns on stderr about an
outage; ``--skip-provider-check`` skips it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import KEYS_FILE_ENV

if TYPE_CHECKING:
    from ..config import MemoryConfig

__all__ = ["add_skip_flag", "doctor", "provider_check"]


def add_skip_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--skip-provider-check`` to a command that runs :func:`provider_check`."""
    parser.add_argument(
        "--skip-provider-check",
        action="store_true",
        help="start without first calling the configured LLM and embedder "
        "once (a configuration error then shows on the first reply)",
    )


def provider_check(args: argparse.Namespace, cfg: MemoryConfig) -> None:
    """Run the provider check unless ``--skip-provider-check``: raise the typed error of a
    configuration error, print a warning line on stderr for an outage.

    Anything a client library prints meanwhile goes to stderr: ``memoryos mcp`` speaks its
    protocol on stdout.
    """
    if getattr(args, "skip_provider_check", False):
        return
    from ..operations import startup_check
    from ._common import quiet_logging

    quiet_logging(cfg)
    with contextlib.redirect_stdout(sys.stderr):
        warnings = startup_check(cfg)
    for line in warnings:
        print(f"memoryos: warning: {line}", file=sys.stderr, flush=True)


def doctor(args: argparse.Namespace) -> int:
    """Print one line per check; 0 when all passed, 1 when one failed."""
    from ..operations import doctor as run_doctor
    from ._common import config_from_args, data_dir, quiet_logging

    cfg = config_from_args(args)
    quiet_logging(cfg)
    given = args.keys_file or os.environ.get(KEYS_FILE_ENV)
    with contextlib.redirect_stdout(sys.stderr):
        report = run_doctor(
            data_dir(args), cfg, keys_file=Path(given) if given else None, timeout=args.timeout
        )
    for line in report.lines():
        print(line, flush=True)
    return 0 if report.ok else 1
