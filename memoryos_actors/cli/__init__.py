"""The ``memoryos`` command line (see :mod:`memoryos_actors.cli.app`).

Importing this package stays cheap: rich, the memory system and the benchmarks are
imported only by the command that needs them.
"""

from __future__ import annotations

from .app import main
from .prometheus import render_prometheus

__all__ = ["main", "render_prometheus"]
