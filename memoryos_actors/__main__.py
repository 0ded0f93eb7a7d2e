"""``python -m memoryos_actors``: the ``memoryos`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
