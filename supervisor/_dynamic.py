"""DynamicSupervisor: one_for_one children started and terminated at run time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pykka import ActorRef

from ._registry import Registry
from ._spec import Backoff, Strategy
from ._supervisor import Supervisor

__all__ = ["DynamicSupervisor"]


class DynamicSupervisor(Supervisor):
    """A supervisor that starts with no children; children are added with
    ``start_child`` and removed with ``terminate_child`` while it runs.

    The strategy is always ``ONE_FOR_ONE``. A child that exits and is not restarted
    (``TEMPORARY``, or ``TRANSIENT`` after a normal exit) is forgotten, and so is a
    terminated one, freeing its id and its slot under ``max_children``. Restart intensity
    and backoff work as for :class:`Supervisor`.
    """

    _dynamic: ClassVar[bool] = True

    @classmethod
    def start(  # type: ignore[override]
        cls,
        *,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        backoff: Backoff | None = None,
        registry: Registry | None = None,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ActorRef[Any]:
        """Start an empty dynamic supervisor and return its ref.

        Args:
            max_children: cap on live children (running or restarting); ``start_child``
                beyond it raises :class:`MaxChildrenError`. None: no cap.
            max_restarts: restarts allowed within ``max_seconds`` before escalating.
            max_seconds: the intensity window, seconds.
            backoff: optional delay before restarts.
            registry: where children's names (and ``name``) are registered.
            name: label in logs and trees.
            clock: monotonic seconds (default ``time.monotonic``).
        """
        return cls._launch(
            (),
            strategy=Strategy.ONE_FOR_ONE,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            backoff=backoff,
            registry=registry,
            name=name,
            clock=clock,
            max_children=max_children,
        )
