"""The supervision tree of one memory system, and its timers.

::

    root (one_for_one)
    ├── gateway (one_for_one pool of GatewayWorker)
    ├── retrieval (one_for_one pool of RetrievalWorker)
    ├── heat-ticker
    ├── janitor (passivates idle users)
    └── users (DynamicSupervisor)
        └── user:<id> (rest_for_one): stm, mtm, lpm

The users' groups are started and stopped by :class:`~memoryos_actors.activation.Lifecycle`;
this module starts everything above them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka

import supervisor
from supervisor import ChildKind, ChildSpec, Supervisor

from .actors.protocol import HeatTick
from .actors.workers import GatewayWorker, HeatTicker, RetrievalWorker

if TYPE_CHECKING:
    from .core import SystemCore

__all__ = ["SupervisionTree"]


class _Sweep:
    """Janitor message: passivate idle users."""


class _Janitor(supervisor.SupervisedActor):
    """Runs the idle sweep of the user directory on a timer."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        super().__init__()
        self._sweep = sweep

    def on_receive(self, message: object) -> object:
        if isinstance(message, _Sweep):
            return self._sweep()
        raise TypeError(f"janitor got an unknown message: {type(message).__name__}")


class SupervisionTree:
    """The running tree: its root, the ``users`` supervisor, and the two timers (the heat
    tick every ``heat_tick_seconds``, the idle sweep every quarter of
    ``idle_timeout_seconds``, between 0.05 and 30 s)."""

    def __init__(
        self,
        root: pykka.ActorRef[Any],
        users: pykka.ActorRef[Any],
        timers: tuple[supervisor.TimerRef, ...],
    ) -> None:
        self.root = root
        #: The dynamic supervisor of the users' groups.
        self.users = users
        self._timers = timers

    @classmethod
    def start(cls, core: SystemCore, sweep_idle: Callable[[], int]) -> SupervisionTree:
        """Start the tree for ``core``; the janitor runs ``sweep_idle`` on its timer."""
        cfg = core.config
        reg = core.registry
        gateway_children = [
            ChildSpec(
                id=name,
                start=functools.partial(GatewayWorker.start, name, core.gateway),
                name=name,
            )
            for name in core.gateway.worker_names
        ]
        retrieval_children = [
            ChildSpec(
                id=name,
                start=functools.partial(RetrievalWorker.start, cfg, reg, core.gateway, core.clock),
                name=name,
            )
            for name in core.retrieval_names
        ]

        def pool(children: list[ChildSpec]) -> Callable[[], pykka.ActorRef[Any]]:
            return functools.partial(
                Supervisor.start, children, registry=reg, max_restarts=10, max_seconds=5.0
            )

        children = [
            ChildSpec(
                id="gateway",
                start=pool(gateway_children),
                kind=ChildKind.SUPERVISOR,
                name="gateway",
            ),
            ChildSpec(
                id="retrieval",
                start=pool(retrieval_children),
                kind=ChildKind.SUPERVISOR,
                name="retrieval",
            ),
            ChildSpec(
                id="heat-ticker",
                start=functools.partial(HeatTicker.start, reg, core.gateway),
                name="heat-ticker",
            ),
            ChildSpec(
                id="janitor",
                start=functools.partial(_Janitor.start, sweep_idle),
                name="janitor",
            ),
            ChildSpec(
                id="users",
                start=functools.partial(
                    supervisor.DynamicSupervisor.start,
                    max_children=cfg.max_active_users,
                    # One user's crash loop restarts that user's group; only a storm across
                    # many users at once escalates to the root.
                    max_restarts=max(100, cfg.max_active_users),
                    max_seconds=5.0,
                    registry=reg,
                ),
                kind=ChildKind.SUPERVISOR,
                name="users",
            ),
        ]
        root = Supervisor.start(
            children, registry=reg, name="root", max_restarts=5, max_seconds=5.0
        )
        ticker = supervisor.send_interval(
            reg.require("heat-ticker"), cfg.heat_tick_seconds, HeatTick()
        )
        sweep_every = max(0.05, min(cfg.idle_timeout_seconds / 4.0, 30.0))
        sweeper = supervisor.send_interval(reg.require("janitor"), sweep_every, _Sweep())
        return cls(root, reg.require("users"), (ticker, sweeper))

    def stop_timers(self) -> None:
        """Stop the heat tick and the idle sweep."""
        for timer in self._timers:
            timer.cancel()

    def stop(self, timeout: float) -> None:
        """Stop the whole tree, waiting at most ``timeout`` seconds."""
        supervisor.stop(self.root, timeout=timeout)
