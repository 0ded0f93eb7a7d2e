"""The core of a running memory system: what every part of the facade shares.

:class:`SystemCore` holds the data directory, the configuration, the clock, the actor
registry, the metrics, the LLM gateway, the user directory and the supervision tree, and
offers the two helpers every call goes through: :meth:`SystemCore.ask` (a request to a
named actor, followed across one restart) and :meth:`SystemCore.check_writable`.

The facade (:class:`~memoryos_actors.system.MemoryOS`) builds one core and hands it to the
objects it is composed of: :class:`~memoryos_actors.activation.Lifecycle`,
:class:`~memoryos_actors.barrier.Barriers`,
:class:`~memoryos_actors.conversation.Conversation`,
:class:`~memoryos_actors.inspection.Inspection`,
:class:`~memoryos_actors.portability.Portability` and
:class:`~memoryos_actors.editing.MemoryEditing`. Each of them reads the core's public
attributes only; none reaches into another.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pykka

from supervisor import Registry

from .actors.admission import FairGate, FairShare
from .actors.base import ASSISTANT_PREFIX, CatchUpGate, GatewayClient, Metrics
from .clock import Clock
from .config import MemoryConfig
from .directory import UserDirectory
from .errors import ActorCrashed, MemoryOSError, Overloaded, ReadOnlyError
from .gateway.service import GatewayService
from .tree import SupervisionTree

__all__ = ["ASK_TIMEOUT_S", "COUNTERS", "SystemCore"]

#: Seconds a single actor request may take before the facade gives up on it.
ASK_TIMEOUT_S = 120.0

#: The process's placement bound never drops below this many pages, nor starts above cap.
_GATE_FLOOR = 64
_GATE_CAP = 4096

#: The facade's own counters (in :attr:`SystemCore.metrics`), reported by ``stats()``
#: from the start, in this order.
COUNTERS = ("turns", "retrievals", "chats", "degraded_chats", "activations", "passivations")

#: Counters the actors increment, also reported from the start (not only once non-zero).
_ACTOR_COUNTERS = (
    "evicted_segments",
    "evicted_pages",
    "promoted_segments",
    "stale_replies_dropped",
    "archive_writes_deferred",
)


class SystemCore:
    """What the parts of one memory system share (see the module docstring).

    Attributes:
        data_dir: the data directory.
        config: the configuration.
        clock: stamps turns and retrievals given no timestamp.
        read_only: opened with ``read_only=True``: nothing in ``data_dir`` is changed.
        registry: the actors' stable names.
        metrics: counters and latency samples (thread-safe).
        gateway_service: the LLM and embedding gateway.
        gateway: how actors reach the gateway's worker pool.
        directory: every user's lifecycle phase and calls in flight.
        catch_up_gate: one MTM catch-up at a time in the process.
        fair_gate: the bound on all users' placement queues, and the fair order of the
            writers it holds up.
        fair_share: the run permits of MTM placement, granted fairly between users.
        inflight: bounds the calls in flight (``max_inflight_total``).
        damaged: users whose files were refused as damaged (user id -> the error), until
            a later activation succeeds or ``repair_user`` runs.
        retrieval_names: the retrieval workers' registry names.
    """

    def __init__(
        self, data_dir: Path, config: MemoryConfig, clock: Clock, *, read_only: bool
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.clock = clock
        self.read_only = read_only
        self.registry = Registry()
        self.metrics = Metrics()
        for name in (*COUNTERS, *_ACTOR_COUNTERS):
            self.metrics.inc(name, 0)  # reported from the start, not only once non-zero
        self.gateway_service = GatewayService(config)
        workers = tuple(f"gateway/{i}" for i in range(config.gateway_workers))
        self.gateway = GatewayClient(
            self.gateway_service, self.registry, workers, config.max_inflight_total
        )
        self.gateway_service.on_redo = self.gateway.deliver_redo
        self.directory = UserDirectory(
            config.max_inflight_per_user, is_pinned=lambda u: u.startswith(ASSISTANT_PREFIX)
        )
        self.catch_up_gate = CatchUpGate(1)
        # All users' placement queues together hold at most placement_backlog_seconds of
        # the process's measured pace; writers wait for it in fair order (admission.py).
        self.fair_gate = FairGate(config.placement_backlog_seconds, _GATE_FLOOR, _GATE_CAP)
        # MTM placement runs under a few permits granted in fair order between users.
        self.fair_share = FairShare(max(2, os.cpu_count() or 2))
        self.inflight = threading.BoundedSemaphore(config.max_inflight_total)
        self.damaged: dict[str, str] = {}
        self.retrieval_names = tuple(f"retrieval/{i}" for i in range(config.retrieval_workers))
        # itertools.count: next() is one C call, so concurrent callers never share a turn.
        self._retrieval_rr = itertools.count()
        self._tree: SupervisionTree | None = None

    # -- the supervision tree --------------------------------------------------------------

    def start_tree(self, sweep_idle: Callable[[], int]) -> SupervisionTree:
        """Start the supervision tree (once); ``sweep_idle`` is the janitor's idle sweep
        (a callable returning how many users it passivated)."""
        if self._tree is not None:
            raise RuntimeError("the supervision tree is already started")
        self._tree = SupervisionTree.start(self, sweep_idle)
        return self._tree

    @property
    def tree(self) -> SupervisionTree:
        """The running supervision tree (root, ``users`` supervisor, timers)."""
        if self._tree is None:
            raise RuntimeError("the supervision tree is not started")
        return self._tree

    # -- calls -----------------------------------------------------------------------------

    def next_retrieval_worker(self) -> str:
        """The registry name of the retrieval worker for the next request (round robin)."""
        return self.retrieval_names[next(self._retrieval_rr) % len(self.retrieval_names)]

    def ask(self, name: str, message: object, timeout: float = ASK_TIMEOUT_S) -> Any:
        """Ask the actor registered as ``name``, following it across one restart.

        ``timeout`` in seconds. Raises :class:`Overloaded` when the actor does not answer
        in time (the request may still run), :class:`ActorCrashed` when it crashed on the
        message, :class:`MemoryOSError` when no actor is registered as ``name`` for 10 s.
        """
        deadline = time.monotonic() + min(timeout, 10.0)
        while True:
            ref = self.registry.lookup(name)
            if ref is None:
                if time.monotonic() > deadline:
                    raise MemoryOSError(f"actor {name!r} is not running")
                time.sleep(0.002)
                continue
            try:
                return ref.ask(message, timeout=timeout)
            except pykka.ActorDeadError:
                # The message never ran (the actor was stopping): safe to send again.
                if time.monotonic() > deadline:
                    raise MemoryOSError(f"actor {name!r} is not running") from None
                time.sleep(0.002)
            except MemoryOSError:
                raise
            except pykka.Timeout:
                # The request may still run: a caller retrying add_turn should pass the
                # same turn_key so the turn is stored once.
                raise Overloaded(
                    f"actor {name!r} did not answer within {timeout} s; the request may "
                    "still complete (retry add_turn with the same turn_key)"
                ) from None
            except Exception as exc:
                # The actor crashed handling the message; its supervisor restarts it.
                raise ActorCrashed(
                    f"actor {name!r} crashed while handling {type(message).__name__}: {exc!r}"
                ) from exc

    def check_writable(self, what: str) -> None:
        """Raise :class:`ReadOnlyError` for ``what`` when the system was opened read-only."""
        if self.read_only:
            raise ReadOnlyError(f"{what}: {self.data_dir} was opened read-only")
