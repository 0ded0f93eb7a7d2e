"""User activation and passivation: :class:`Lifecycle` moves a user between passive (files
only) and active (a live actor group), through the user directory
(:mod:`memoryos_actors.directory`), and runs every call of a user (:meth:`Lifecycle.call`:
bounded, activating the user if needed). It works on the facade's
:class:`~memoryos_actors.core.SystemCore`.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import pykka
import structlog

import supervisor
from supervisor import ChildKind, ChildSpec, Restart, Strategy, Supervisor

from .actors import persist
from .actors.base import (
    PlacementBacklog,
    Preload,
    UserEnv,
    actor_names,
)
from .actors.lpm import LPMActor
from .actors.mtm import MTMActor
from .actors.protocol import Ping, Snapshot
from .actors.stm import STMActor
from .core import ASK_TIMEOUT_S
from .directory import UserEntry, UserPhase
from .errors import CorruptDataError, Overloaded, UnknownUser
from .store.userstore import UserStore, user_exists
from .validation import check_user_id as _check_user_id
from .validation import typed_cause as _typed_cause

if TYPE_CHECKING:
    from .barrier import Barriers
    from .core import SystemCore

log = structlog.get_logger("memoryos.system")

T = TypeVar("T")


__all__ = ["Lifecycle", "SlotDemand"]


#: Most threads passivating users in the background (started on demand). An activation
#: that finds no free slot hands one idle user to this pool and waits: the pool must not
#: be smaller than the number of activations waiting at once (one per calling thread), or
#: their passivations queue behind each other. Passivation mostly waits (mailbox barriers,
#: snapshot fsyncs, thread joins), so many overlap well.
_BG_PASSIVATIONS = 64

#: Most headroom passivations in flight at once (see ``Lifecycle._keep_headroom``).
_HEADROOM_PASSIVATIONS = 32


def _placement_backlog(user_id: str, cfg: Any, core: Any) -> PlacementBacklog:
    """The user's placement queue: ``placement_backlog_seconds`` of MTM's measured pace,
    never fewer pages than two chain-meta batches (so meta is still asked for in full
    batches) and never more than four times ``max_inflight_per_user`` (the limit until
    the pace is measured); part of the process's bound (``core.fair_gate``), its settle
    lags observed as ``settle_lag_ms``."""
    cap = max(64, cfg.max_inflight_per_user * 4)
    floor = min(cap, max(16, 2 * cfg.meta_batch_max_pages))
    metrics = core.metrics
    return PlacementBacklog(
        f"user {user_id!r} MTM backlog",
        cfg.placement_backlog_seconds,
        floor,
        cap,
        user=user_id,
        gate=core.fair_gate,
        on_lag=lambda ms: metrics.observe("settle_lag_ms", ms),
    )


class _StartOnce:
    """A child start function that adopts an already running group the first time.

    The user's group is started in the activating caller's thread (so its recovery does
    not hold up the ``users`` supervisor); the supervisor's first call returns it, and any
    later call (a restart after the group itself failed) starts a fresh one.
    """

    def __init__(self, ref: pykka.ActorRef[Any], start: Callable[[], pykka.ActorRef[Any]]) -> None:
        self._ref: pykka.ActorRef[Any] | None = ref
        self._start = start
        self._lock = threading.Lock()

    def __call__(self) -> pykka.ActorRef[Any]:
        with self._lock:
            ref, self._ref = self._ref, None
        return ref if ref is not None else self._start()


class SlotDemand:
    """How many group slots activations take while one passivation runs: the activation
    rate observed over the last ``window`` activations times the mean passivation time.

    Thread-safe. The rate is measured up to now, so it decays once activations stop.
    ``alpha`` weighs each new passivation time in the running mean.
    """

    def __init__(self, window: int = 64, alpha: float = 0.2) -> None:
        self._starts: deque[float] = deque(maxlen=window)
        self._alpha = alpha
        self._passivation_s = 0.0
        self._lock = threading.Lock()

    def activation_started(self, now: float) -> None:
        """An activation began at ``now`` (a ``time.monotonic()`` value)."""
        with self._lock:
            self._starts.append(now)

    def passivation_took(self, seconds: float) -> None:
        """A passivation took ``seconds``."""
        with self._lock:
            if self._passivation_s == 0.0:
                self._passivation_s = seconds
            else:
                self._passivation_s += self._alpha * (seconds - self._passivation_s)

    def slots_per_passivation(self, now: float) -> float:
        """Activations expected while one passivation runs (0.0 before any data)."""
        with self._lock:
            if len(self._starts) < 2:
                return 0.0
            span = now - self._starts[0]
            return len(self._starts) / span * self._passivation_s if span > 0 else 0.0


class Lifecycle:
    """Activation, passivation, the idle sweep and the per-user call of one memory system.

    Built by the facade from its :class:`~memoryos_actors.core.SystemCore` and its
    :class:`~memoryos_actors.barrier.Barriers` (a passivation drains the user's tiers
    before the snapshot). Thread-safe.
    """

    def __init__(self, core: SystemCore, barriers: Barriers) -> None:
        self._core = core
        self._barriers = barriers
        self._lock = threading.Lock()
        # Passivates least recently used idle users in the background: those activations
        # waiting for a slot hand over, and those keeping some slots free below
        # max_active_users (see _keep_headroom). Threads are started on demand.
        self._passivator = ThreadPoolExecutor(
            _BG_PASSIVATIONS, thread_name_prefix="memoryos-passivate"
        )
        self._bg_passivating = 0
        self._demand = SlotDemand()  # sizes the headroom kept below max_active_users
        self._activation_ms: list[float] = []

    # -- calls -----------------------------------------------------------------------------

    def call(self, user_id: str, fn: Callable[[UserEntry], T], *, create: bool = True) -> T:
        """Run ``fn`` as one call of ``user_id`` (activating the user if needed).

        At most ``max_inflight_total`` calls run at once (beyond that a call waits up to
        ``overload_timeout_seconds``, then :class:`Overloaded`). Reads pass
        ``create=False``: a user with no data raises :class:`UnknownUser` and no file is
        written for it.
        """
        core = self._core
        if not core.inflight.acquire(timeout=core.config.overload_timeout_seconds):
            raise Overloaded(
                f"{core.config.max_inflight_total} calls in flight (max_inflight_total)"
            )
        try:
            try:
                entry = self._enter(user_id, create)
            except CorruptDataError as exc:
                # Remembered for stats() and /metrics: one user's damage stays that user's.
                core.damaged[user_id] = str(exc)
                raise
            core.damaged.pop(user_id, None)
            try:
                return fn(entry)
            finally:
                self._leave(entry)
        finally:
            core.inflight.release()

    def activation_samples(self) -> list[float]:
        """The last activations' durations, milliseconds, oldest first (at most 10,000)."""
        with self._lock:
            return list(self._activation_ms)

    # -- user directory --------------------------------------------------------------------

    def _enter(self, user_id: str, create: bool = True) -> UserEntry:
        """Count a call in flight for ``user_id``, activating the user's group if needed.

        With ``create`` false (every read), a user with no data is not created:
        :class:`UnknownUser` is raised and nothing is written.
        """
        deadline = time.monotonic() + self._core.config.overload_timeout_seconds
        entry, must_activate = self._core.directory.enter(user_id, deadline)
        if not must_activate:
            return entry
        try:
            self._activate(entry, deadline, create)
        except BaseException:
            store, entry.store = entry.store, None
            try:
                if store is not None:
                    store.close()
            finally:
                self._core.directory.activation_failed(entry)
            raise
        return entry

    def _leave(self, entry: UserEntry) -> None:
        self._core.directory.leave(entry)

    def _new_store(self, user_id: str, embedder: tuple[str, int], create: bool = True) -> UserStore:
        cfg = self._core.config
        return UserStore(
            self._core.data_dir,
            user_id,
            fsync=cfg.fsync,
            fsync_interval=cfg.fsync_interval_seconds,
            archive=cfg.archive_enabled,
            config_fingerprint=cfg.fingerprint(),
            embedder=embedder,
            read_only=self._core.read_only,
            create=create,
        )

    def require_data(self, user_id: str) -> None:
        """Raise :class:`UnknownUser` unless ``user_id`` is live or has stored data."""
        if self._core.directory.phase(user_id) is not UserPhase.ACTIVE and not user_exists(
            self._core.data_dir, user_id
        ):
            raise UnknownUser(f"no data for user {user_id!r}")

    def _activate(self, entry: UserEntry, deadline: float, create: bool = True) -> None:
        """Load the user's state once and start its group (the entry is ``ACTIVATING``).

        The snapshot and the WAL tail are read once, here, in the caller's thread, and handed
        to the three tier actors; the user's group supervisor is started here too, so its
        tiers recover in their own threads. The ``users`` supervisor only adopts the
        running group: activations of different users proceed in parallel.

        Without ``create``, a user with no data raises :class:`UnknownUser` before anything
        is done: no slot is made, no file is written. The user is ``ACTIVATING`` here, so no
        import or forget of it can run meanwhile and the check stays true.
        """
        if not create and not user_exists(self._core.data_dir, entry.user_id):
            raise UnknownUser(f"no data for user {entry.user_id!r}")
        started = time.perf_counter()
        self._demand.activation_started(time.monotonic())
        self._make_room(entry, deadline)
        cfg = self._core.config
        name, dim = self._core.gateway_service.embedder_info()
        store = self._new_store(entry.user_id, (name, dim), create)
        entry.store = store
        store.check_embedder(name, dim, cfg.fingerprint())
        env = UserEnv(
            user_id=entry.user_id,
            config=cfg,
            store=store,
            gateway=self._core.gateway,
            registry=self._core.registry,
            clock=self._core.clock,
            insert_backlog=_placement_backlog(entry.user_id, cfg, self._core),
            metrics=self._core.metrics,
            epoch=entry.epoch,
            preload=Preload(persist.recover(store)),
            catch_up_gate=self._core.catch_up_gate,
            fair_share=self._core.fair_share,
        )
        entry.env = env
        stm_n, mtm_n, lpm_n = actor_names(entry.user_id)
        children = [
            ChildSpec(id="stm", start=functools.partial(STMActor.start, env), name=stm_n),
            ChildSpec(id="mtm", start=functools.partial(MTMActor.start, env), name=mtm_n),
            ChildSpec(id="lpm", start=functools.partial(LPMActor.start, env), name=lpm_n),
        ]
        start_group = functools.partial(
            Supervisor.start,
            children,
            strategy=Strategy.REST_FOR_ONE,
            registry=self._core.registry,
            max_restarts=3,
            max_seconds=5.0,
        )
        try:
            group = start_group()
        except supervisor.SupervisorError as exc:
            # A tier that cannot load the user's files fails in on_start; the supervisor
            # wraps that error. Callers get the typed error that names the file.
            raise _typed_cause(exc) from None
        spec = ChildSpec(
            id=f"user:{entry.user_id}",
            start=_StartOnce(group, start_group),
            kind=ChildKind.SUPERVISOR,
            restart=Restart.PERMANENT,
        )
        try:
            supervisor.start_child(self._core.tree.users, spec)
        except BaseException as exc:
            supervisor.stop(group, timeout=ASK_TIMEOUT_S)
            if isinstance(exc, supervisor.SupervisorError):
                raise _typed_cause(exc) from None
            raise
        try:
            # Wait until STM is up: its first answer comes after on_start.
            self._core.ask(stm_n, Ping())
        except BaseException:
            self.stop_group(entry, snapshot=False)  # never leave an adopted group behind
            raise
        elapsed = (time.perf_counter() - started) * 1000.0
        self._core.metrics.inc("activations")
        with self._lock:
            self._activation_ms.append(elapsed)
            if len(self._activation_ms) > 10000:
                del self._activation_ms[:5000]
        self._core.directory.activated(entry)
        log.debug("user.activated", user=entry.user_id, epoch=entry.epoch, ms=round(elapsed, 3))

    def _make_room(self, me: UserEntry, deadline: float) -> None:
        """Wait until a group slot is free for ``me``, passivating least recently used idle
        users in the background meanwhile (never in this thread: an activation waits for
        whichever passivation frees a slot first, not for one of its own).

        Every entry other than ``me`` holds (or is about to hold, or is releasing) a live
        group, so they all count against ``max_active_users``. If every one of them is
        busy, wait for one to go idle, until ``deadline``.
        """
        self._core.directory.wait_for_room(
            me, self._core.config.max_active_users, deadline, self._passivate_later
        )
        self._keep_headroom()

    def _passivate_later(self, victim: UserEntry) -> None:
        """Passivate ``victim`` (already ``DRAINING``) on the background pool, or here if
        the pool is shut down (the memory system is closing)."""
        try:
            self._passivator.submit(self._passivate, victim)
        except RuntimeError:
            self._passivate(victim)

    def _keep_headroom(self) -> None:
        """Keep some group slots free below ``max_active_users``: passivate least recently
        used idle users in the background while more slots are held (and not being
        released) than that.

        How many: as many as activations take while one passivation runs, twice over
        (see :class:`SlotDemand`), but no fewer than ``max_active_users // 20`` (and 1) and
        no more than a quarter of ``max_active_users`` above that floor. At most as many
        headroom passivations run at once (at least 2, at most ``_HEADROOM_PASSIVATIONS``).
        """
        cap = self._core.config.max_active_users
        need = math.ceil(2.0 * self._demand.slots_per_passivation(time.monotonic()))
        limit = cap - max(1, cap // 20, min(cap // 4, need))
        in_flight = max(2, min(_HEADROOM_PASSIVATIONS, need))
        while True:
            with self._lock:
                if self._bg_passivating >= in_flight:
                    return
                self._bg_passivating += 1
            victim = self._core.directory.pick_above(limit)
            if victim is None:
                with self._lock:
                    self._bg_passivating -= 1
                return

            def run(victim: UserEntry = victim) -> None:
                try:
                    self._passivate(victim)
                finally:
                    with self._lock:
                        self._bg_passivating -= 1

            try:
                self._passivator.submit(run)
            except RuntimeError:  # shutting down: do it here
                run()

    def stop_group(self, entry: UserEntry, *, snapshot: bool) -> None:
        """Stop the user's actors (after a snapshot if asked) and close its store.

        Never raises: a failure is logged and the group is stopped anyway, so the user's
        next call starts from the files (the WAL has every acknowledged turn).
        """
        if snapshot and not self._core.read_only:
            try:
                stm = self._core.registry.lookup(actor_names(entry.user_id)[0])
                if (
                    stm is not None
                    and entry.env is not None
                    and not entry.env.mtm_recovered.is_set()
                ):
                    # MTM has not finished recovering (activated moments ago on a busy
                    # machine, it may still be placing pages a previous incarnation left):
                    # the files plus the WAL are its whole state, so a snapshot would only
                    # make this passivation wait for that work, which stops early instead.
                    stm = None
                    self._core.metrics.inc("passivation_snapshots_skipped")
                if stm is not None:
                    # Summaries and persona updates still owed are not asked for now: the
                    # snapshot carries them (and the jobs at the gateway), and the user's
                    # next activation asks for them.
                    self._barriers.drain_user(entry.user_id, summaries=False)
                    stm.ask(Snapshot(), timeout=ASK_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the snapshot is an optimisation; the WAL has everything
                log.warning("user.passivate_snapshot_failed", user=entry.user_id, error=repr(exc))
        try:
            # Taken back from the users supervisor and stopped here, in the caller's
            # thread: groups of different users stop in parallel.
            group = supervisor.detach_child(
                self._core.tree.users, f"user:{entry.user_id}", timeout=ASK_TIMEOUT_S
            )
            if group is not None:
                supervisor.stop(group, timeout=ASK_TIMEOUT_S)
        except supervisor.SupervisorError:
            pass  # the group was never adopted or already gone
        except Exception as exc:  # noqa: BLE001 - passivation goes on; the log says why
            log.warning("user.passivate_stop_failed", user=entry.user_id, error=repr(exc))
        store, entry.store = entry.store, None
        if store is not None:
            try:
                store.close()
            except Exception as exc:  # noqa: BLE001 - logged; the entry is left passive
                log.warning("user.store_close_failed", user=entry.user_id, error=repr(exc))

    def _passivate(self, entry: UserEntry) -> None:
        """Snapshot and stop a user's group (the entry is already ``DRAINING``)."""
        started = time.monotonic()
        try:
            self.stop_group(entry, snapshot=True)
            self._demand.passivation_took(time.monotonic() - started)
        finally:
            self._core.metrics.inc("passivations")
            self._core.directory.finish(entry, UserPhase.PASSIVE)
        log.debug("user.passivated", user=entry.user_id)

    def sweep_idle(self) -> int:
        """Passivate users idle for longer than ``idle_timeout_seconds``; return how many.

        One user at a time: each is picked (and marked ``DRAINING``) only when the previous
        one is passive, so a sweep never holds back users it has not reached yet.
        """
        cutoff = time.monotonic() - self._core.config.idle_timeout_seconds
        done = 0
        while not self._core.directory.closed:
            entry = self._core.directory.pick_idle(idle_before=cutoff)
            if entry is None:
                break
            self._passivate(entry)
            done += 1
        return done

    def passivate(self, user_id: str) -> bool:
        """See :meth:`~memoryos_actors.api.MemoryAPI.passivate`."""
        user_id = _check_user_id(user_id)
        deadline = time.monotonic() + self._core.config.overload_timeout_seconds
        entry = self._core.directory.claim_active(user_id, UserPhase.DRAINING, deadline)
        if entry is None:
            return False
        self._passivate(entry)
        return True

    def active_users(self) -> list[str]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.active_users`."""
        return self._core.directory.active()

    def user_epoch(self, user_id: str) -> int:
        """See :meth:`~memoryos_actors.api.MemoryAPI.user_epoch`."""
        entry = self._core.directory.get(_check_user_id(user_id))
        return entry.epoch if entry is not None else 0

    def user_phase(self, user_id: str) -> UserPhase:
        """See :meth:`~memoryos_actors.api.MemoryAPI.user_phase`."""
        return self._core.directory.phase(_check_user_id(user_id))

    # -- shutdown --------------------------------------------------------------------------

    def passivate_all(self, deadline: float) -> None:
        """Passivate every active user (at close: the directory takes no new call), each
        waited for until ``deadline`` (a ``time.monotonic()`` value, at least 1 s from
        now); a user still busy then is left as it is (its WAL has every turn)."""
        directory = self._core.directory
        for uid in directory.active():
            try:
                entry = directory.claim_active(
                    uid, UserPhase.DRAINING, max(deadline, time.monotonic() + 1.0)
                )
            except Overloaded as exc:
                log.warning("close.user_busy", user=uid, error=repr(exc))
                continue
            if entry is not None:
                self._passivate(entry)

    def shutdown(self) -> None:
        """Wait for the background passivations and stop their threads."""
        self._passivator.shutdown(wait=True)
