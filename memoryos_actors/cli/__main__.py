"""``python -m memoryos_actors.cli``: the ``memoryos`` command."""

from memoryos_actors.cli.app import main

raise SystemExit(main())
