"""SupervisedActor: a pykka ThreadingActor with OTP failure semantics, exit hooks and kill.

Failure semantics (differences from plain pykka are marked *):

- An exception escaping ``on_start`` is a crash: the actor stops with
  ``ExitReason.crash(exc)`` and ``on_failure`` runs (*pykka only logs it).
- An exception of a type in ``expected_errors`` raised while handling an ``ask`` is sent
  to the asker and the actor goes on. Raised while handling a ``tell`` it is logged
  (event ``expected_error_dropped``) and the actor goes on.
- Any other exception raised while handling a message is a crash, for ``tell`` *and*
  ``ask`` (*pykka keeps running after a failed ``ask``): the asker, if any, receives the
  exception first, then ``on_failure`` runs, the actor stops with
  ``ExitReason.crash(exc)`` and messages still queued are answered with
  ``pykka.ActorDeadError``.
- ``kill(ref, reason)`` makes the actor fail as if its code raised ``Killed(reason)``;
  see :func:`kill` for what that means for a thread.

Every exit is reported exactly once, with its :class:`ExitReason`, to the hooks
registered on the actor (monitors, the supervisor, timers).
"""

from __future__ import annotations

import ctypes
import itertools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pykka
import structlog
from pykka import ActorDeadError, ActorRef, ActorRegistry
from pykka._envelope import Envelope
from pykka.messages import _ActorStop

from ._errors import Killed, _Fatal
from ._reason import ExitReason
from ._sync import SafeCondition, SafeFuture, new_inbox

__all__ = [
    "ExitCallback",
    "SupervisedActor",
    "exit_reason",
    "kill",
    "urgent",
    "urgent_calls",
    "wait_exit",
    "wait_while_urgent",
]

_log = structlog.get_logger("supervisor")

ExitCallback = Callable[[ActorRef[Any], ExitReason], None]
"""A hook told ``(ref, reason)`` once, when the actor has stopped."""

YIELD_EVERY_S = 0.0005
"""Default ``SupervisedActor.yield_every_s``: half a millisecond, a tenth of CPython's
switch interval. Measured with ``bench/fairness.py`` (a user adding a turn every 50 ms
beside 16 threads flooding 100 others, offline): its ``add_turn`` p99 was 60 ms with no
yields and 13-23 ms with these (bench/README.md has the runs)."""

# Message that wakes an actor idling in ``inbox.get()`` after a kill. It never reaches a
# handler: the loop checks the kill flag right after every ``get``.
_KILL = object()

_watch_ids = itertools.count(1)

# PyThreadState_SetAsyncExc(thread_id, exc_class or NULL): schedules ``exc_class`` to be
# raised in that thread the next time it runs Python bytecode; NULL clears a pending one.
_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc

# Bytecode loop iterations that let a Killed sent to the running thread land (the first
# backward jump does it; the bound only keeps a Python that never delivers it from
# spinning long).
_LAND_SPINS = 100_000


def _take_pending_killed() -> None:
    """Make sure no Killed sent to the calling thread is left to land later.

    Clearing it with ``PyThreadState_SetAsyncExc(tid, NULL)`` leaves CPython's
    interpreter-wide "asynchronous exception pending" flag set (3.11: the flag is reset
    only when a thread takes its exception): every later bytecode check takes the slow
    path, and under ``sys.settrace`` (coverage, debuggers, profilers) a call never returns.
    So a Killed is sent again to this thread and taken here, which resets the flag: whether
    the first one already landed (in the handler) or is still pending, exactly one lands
    in the loop below."""
    tid = ctypes.c_ulong(threading.get_ident())
    try:
        # It may land as soon as the call returns: inside the ``try`` too.
        _set_async_exc(tid, ctypes.py_object(Killed))
        for _ in range(_LAND_SPINS):
            pass
    except Killed:
        return
    _set_async_exc(tid, None)  # never landed: clear it, the old way


class _Life:
    """Exit bookkeeping shared by a SupervisedActor and its ref (which outlives it)."""

    __slots__ = ("done", "exit", "lock", "ready", "started_ok", "watchers")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Event()  # on_start returned, or the actor exited
        self.done = threading.Event()  # exit reason final and every hook told
        self.watchers: dict[int, ExitCallback] = {}
        self.exit: ExitReason | None = None
        self.started_ok = False

    def watch(self, ref: ActorRef[Any], callback: ExitCallback) -> int | None:
        """Call ``callback(ref, reason)`` once when the actor exits; at once if it has.

        Returns a token for :meth:`unwatch`, or None when the callback already ran.
        """
        with self.lock:
            reason = self.exit
            if reason is None:
                token = next(_watch_ids)
                self.watchers[token] = callback
                return token
        callback(ref, reason)
        return None

    def unwatch(self, token: int) -> bool:
        with self.lock:
            return self.watchers.pop(token, None) is not None


def _give_way() -> None:
    """Let go of the interpreter lock for a moment (see ``yield_every_s``)."""
    time.sleep(0)


class _Urgent:
    """Urgent calls in progress in this process, and until when the last one lingers
    (see :func:`urgent`).

    Both are read without the lock (attribute loads, atomic in CPython) on every message;
    they are changed under ``cond``.
    """

    __slots__ = ("cond", "count", "until")

    def __init__(self) -> None:
        self.count = 0
        self.until = 0.0  # time.perf_counter() until which yields go on after a call
        # Guards both, notified when the count drops to 0. Actors wait on it (and may be
        # killed while they do): a SafeCondition, whose ``with`` a kill cannot leave held.
        self.cond = SafeCondition(threading.Lock())


_URGENT = _Urgent()

URGENT_HOLD_S = 0.002
"""Longest a busy actor steps aside after a message while an urgent call is in progress
(seconds): it waits, holding nothing, until no urgent call is left or this long."""


@contextmanager
def urgent(linger: float = 0.0) -> Iterator[None]:
    """Mark an urgent call while the block runs, and for ``linger`` seconds after it.

    An actor that has been busy for ``SupervisedActor.yield_every_s`` steps aside after
    its message while an urgent call is in progress (it waits until none is left, at most
    :data:`URGENT_HOLD_S`), and gives way (a ``time.sleep(0)``) while one lingers. A call
    that someone waits on with little else going on (a chat user's turn, a retrieval that
    a reply waits for) is urgent, and so is, for a while, the background work it leaves
    behind (``linger``: its pages being placed, its caller's next call); bulk work (a
    writer storing a backlog as fast as it can) is not, and with nothing urgent the actors
    run their messages back to back without a thread switch between them. Bulk callers
    can wait for urgent calls to finish with :func:`wait_while_urgent`. Nests; thread-
    safe.
    """
    state = _URGENT
    with state.cond:
        state.count += 1
    try:
        yield
    finally:
        with state.cond:
            state.count -= 1
            if not state.count:
                state.cond.notify_all()
            if linger > 0:
                state.until = max(state.until, time.perf_counter() + linger)


def wait_while_urgent(timeout: float) -> bool:
    """Wait, at most ``timeout`` seconds, while an urgent call is in progress (see
    :func:`urgent`); True when none is left. For bulk work about to start: it lets the
    urgent call's threads find the interpreter lock free."""
    state = _URGENT
    if not state.count:
        return True
    with state.cond:
        return state.cond.wait_for(lambda: not state.count, timeout)


def _step_aside() -> None:
    """Wait, holding nothing, while an urgent call is in progress (see ``URGENT_HOLD_S``)."""
    wait_while_urgent(URGENT_HOLD_S)


def urgent_calls() -> int:
    """Urgent calls in progress now, not counting lingering ones (see :func:`urgent`)."""
    return _URGENT.count


class _Pace:
    """When an actor's thread gives way after a message (see ``yield_every_s``)."""

    __slots__ = ("every", "last")

    def __init__(self, every: float | None) -> None:
        self.every = every
        self.last = time.perf_counter()

    def restart(self) -> None:
        """The thread just waited (and so let go of the lock): start counting again."""
        self.last = time.perf_counter()

    def after_message(self) -> None:
        if self.every is None:
            return
        now = time.perf_counter()
        if now - self.last < self.every:
            return
        state = _URGENT
        if state.count:
            # A call is urgent now and this actor has been busy: step aside until it is
            # done (bounded), so its threads find the interpreter lock free.
            _step_aside()
            self.last = time.perf_counter()
        elif now < state.until:
            self.last = now
            _give_way()
        # else nothing urgent: keep the lock, no thread switch


class SupervisedActor(pykka.ThreadingActor):
    """A ``pykka.ThreadingActor`` to build supervised workers on.

    Subclass it exactly like a ``ThreadingActor`` (``on_start``, ``on_receive``, proxy
    methods, ``on_stop``, ``on_failure``). Differences from pykka, all on the failure path
    so the per-message cost stays that of pykka's own loop plus two attribute stores:

    - ``on_start`` raising is a crash (``ExitReason.crash``); ``on_failure`` runs.
    - An unexpected exception while handling a ``tell`` or an ``ask`` is a crash: the
      asker receives the exception, then the actor stops and its supervisor applies the
      child's restart type.
    - ``expected_errors``: exception types that are replies, not crashes. Raised during an
      ``ask`` they go to the asker and the actor goes on; raised during a ``tell`` they
      are logged and the actor goes on.
    - The exit is reported with an :class:`ExitReason` (``normal`` after a plain pykka
      ``stop()``, ``shutdown`` when a supervisor stopped it, ``crash``, ``killed``).
    - The inbox is a ``queue.SimpleQueue`` and replies use a :class:`SafeFuture`: neither
      has a Python-level lock that a :func:`kill` of a sender or replier could leave
      held (see ``_sync.py``).
    """

    @staticmethod
    def _create_actor_inbox() -> Any:
        return new_inbox()

    @staticmethod
    def _create_future() -> Any:
        return SafeFuture()

    expected_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    """Exception types that are replies to the asker, not crashes."""

    yield_every_s: ClassVar[float | None] = YIELD_EVERY_S
    """Let other threads take the interpreter lock after a message once this actor has
    been busy for this long (seconds of handling messages without waiting for one;
    None: never).

    CPython hands the lock to a thread that wakes up (an actor with a new message, a
    caller whose answer came) only when the holder blocks or after the switch interval
    (5 ms), and then to any of the threads waiting. An actor that is busy for long
    stretches in pure Python, with many others, makes each wake-up of a thread that has
    little to do wait for several such intervals. Letting go between messages (a
    ``time.sleep(0)``) gives waiting threads their turn at points where this actor holds
    nothing. Waiting for a message lets go of the lock anyway, so it starts the count
    afresh: an actor that handles a message now and then never pays for a yield.

    It does so only while an urgent call is in progress or lingers somewhere in the
    process (:func:`urgent`): while one is in progress it steps aside (waits, at most
    ``URGENT_HOLD_S``, until none is left) rather than yield, so the urgent call's threads
    find the lock free instead of drawing lots for it with every busy thread; while one
    lingers it yields. Without one, yields would only add thread switches to bulk work."""

    # Class-level defaults: the hot loop reads these without any fallback logic.
    _sv_kill_reason: str | None = None
    _sv_busy: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        life = _Life()
        # The ref carries the life too: refs hold their actor only weakly, and the exit
        # reason must stay readable after the actor object is gone.
        self._sv_life = self.actor_ref._sv_life = life  # type: ignore[attr-defined]
        self._sv_lock = life.lock
        self._sv_ready = life.ready
        self._sv_done = life.done
        self._sv_watchers = life.watchers
        self._sv_reason: ExitReason | None = None
        self._sv_stop_reason: ExitReason | None = None
        self._sv_tid = 0
        self._sv_async_sent = False
        self._sv_disarmed = False

    # ------------------------------------------------------------------ the thread

    def _actor_loop(self) -> None:
        self._sv_tid = threading.get_ident()
        reason: ExitReason
        try:
            reason = self._sv_lifecycle()
        except BaseException as exc:  # noqa: BLE001 - a Killed that landed in loop code
            reason = self._sv_reason_for(exc)
        reason = self._sv_disarm(reason)
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        try:
            self._sv_cleanup()
        except Exception as exc:  # noqa: BLE001
            _log.error("cleanup_failed", actor=str(self), error=repr(exc))
        self._sv_drain_inbox()
        self._sv_finish(reason)

    def _sv_lifecycle(self) -> ExitReason:
        self._sv_busy = True
        try:
            self.on_start()
        except Exception as exc:  # noqa: BLE001 - an on_start failure is a crash
            self._sv_busy = False
            return self._sv_fail(exc, None)
        self._sv_busy = False
        self._sv_life.started_ok = True
        self._sv_ready.set()
        return self._sv_run()

    def _sv_run(self) -> ExitReason:
        # Same shape as pykka's ``_actor_loop_running``; only the except branches differ.
        inbox = self.actor_inbox
        stopped = self.actor_stopped
        handle = self._handle_receive
        pace = _Pace(self.yield_every_s)
        give_way = pace.after_message
        while not stopped.is_set():
            waits = inbox.empty()
            envelope = inbox.get()
            if waits:  # waiting for a message let go of the lock: count busy time afresh
                pace.restart()
            if self._sv_kill_reason is not None:
                if envelope.reply_to is not None:
                    envelope.reply_to.set_exception(
                        (ActorDeadError, ActorDeadError(f"{self} was killed"), None)
                    )
                return self._sv_killed_reason()
            self._sv_busy = True
            try:
                response = handle(envelope.message)
                self._sv_busy = False
                if envelope.reply_to is not None:
                    envelope.reply_to.set(response)
                give_way()
            except Exception as exc:  # noqa: BLE001
                self._sv_busy = False
                if isinstance(exc, self.expected_errors) and not isinstance(exc, _Fatal):
                    if envelope.reply_to is not None:
                        envelope.reply_to.set_exception()
                    else:
                        _log.warning("expected_error_dropped", actor=str(self), error=repr(exc))
                    continue
                return self._sv_fail(exc, envelope.reply_to)
        if self._sv_kill_reason is not None:
            return self._sv_killed_reason()
        return self._sv_reason or self._sv_stop_reason or ExitReason.normal()

    def _stop(self) -> None:
        # Called by pykka's _handle_receive for a stop message, in the actor's thread.
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        try:
            self.on_stop()
        except Exception as exc:  # noqa: BLE001 - a failing on_stop makes the exit a crash
            self._sv_reason = self._sv_reason_for(exc)
            _log.error("on_stop_failed", actor=str(self), reason=str(self._sv_reason))
        else:
            self._sv_reason = self._sv_stop_reason or ExitReason.normal()

    def _sv_fail(self, exc: BaseException, reply_to: pykka.Future[Any] | None) -> ExitReason:
        tb = exc.__traceback__
        if isinstance(exc, Killed):
            reason = self._sv_killed_reason()
            exc = Killed(reason.detail).with_traceback(tb)
        else:
            reason = ExitReason.crash(exc)
            _log.error("actor_crashed", actor=str(self), reason=str(reason), exc_info=exc)
        if reply_to is not None:
            try:
                reply_to.set_exception((type(exc), exc, tb))
            except queue.Full:  # already answered
                pass
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        try:
            self.on_failure(type(exc), exc, tb)
        except Exception as hook_exc:  # noqa: BLE001
            _log.error("on_failure_failed", actor=str(self), error=repr(hook_exc))
        return reason

    def _sv_killed_reason(self) -> ExitReason:
        return ExitReason.killed(self._sv_kill_reason or "killed")

    def _sv_reason_for(self, exc: BaseException) -> ExitReason:
        if isinstance(exc, Killed):
            return self._sv_killed_reason()
        return ExitReason.crash(exc)

    def _sv_disarm(self, reason: ExitReason) -> ExitReason:
        # After this no Killed can be raised in this thread: ``kill`` sends one only while
        # ``_sv_busy`` (checked under the lock), and a pending one is taken here. The
        # retry covers a pending Killed landing while we take the lock.
        while True:
            try:
                with self._sv_lock:
                    self._sv_busy = False
                    self._sv_disarmed = True
                    if self._sv_async_sent:
                        _take_pending_killed()
                return reason
            except Killed:
                reason = self._sv_killed_reason()

    def _sv_cleanup(self) -> None:
        """Hook run in the actor's thread after it stopped handling messages, on every exit
        path (normal, crash, killed), before the exit is reported. Cannot be killed."""
        self.on_exit()

    def on_exit(self) -> None:
        """Called in the actor's thread once it has stopped handling messages, on every
        exit path (a stop, a crash, a kill), after ``on_stop``/``on_failure`` where those
        ran and before the exit is reported to watchers. It cannot be interrupted by a
        kill. For giving back what the actor may hold across messages (a shared permit):
        nothing slow. Default: nothing."""

    def _sv_drain_inbox(self) -> None:
        # get_nowait, not pykka's empty()/get(): a concurrent drain must never block us.
        inbox = self.actor_inbox
        while True:
            try:
                envelope = inbox.get_nowait()  # type: ignore[attr-defined]
            except queue.Empty:
                return
            if envelope.reply_to is None:
                continue
            try:
                if isinstance(envelope.message, _ActorStop):
                    envelope.reply_to.set(None)
                else:
                    envelope.reply_to.set_exception(
                        (
                            ActorDeadError,
                            ActorDeadError(f"{self.actor_ref} stopped before handling the message"),
                            None,
                        )
                    )
            except queue.Full:
                pass

    # ----------------------------------------------------------------- exit hooks

    def _sv_finish(self, reason: ExitReason) -> bool:
        """Record the exit reason (first caller wins) and tell every hook once."""
        with self._sv_lock:
            if self._sv_life.exit is not None:
                return False
            self._sv_life.exit = reason
            watchers = list(self._sv_watchers.values())
            self._sv_watchers.clear()
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        self._sv_ready.set()
        ref = self.actor_ref
        for callback in watchers:
            try:
                callback(ref, reason)
            except Exception as exc:  # noqa: BLE001 - one bad hook must not starve the rest
                _log.error("exit_hook_failed", actor=str(self), error=repr(exc))
        self._sv_done.set()
        return True

    @property
    def stop_requested(self) -> bool:
        """Whether this actor has been asked to stop: it still handles the messages queued
        before the request, and long work in one of them may end early."""
        return self._sv_stop_reason is not None or self._sv_kill_reason is not None

    def on_stop_requested(self) -> None:
        """Called in the requesting thread right after a stop or kill is requested.

        For an actor that may be blocked waiting on something of its own (not its mailbox)
        inside a message: wake that wait here (set an Event; nothing slow, no exceptions),
        then see :attr:`stop_requested` and return early. Default: nothing.
        """

    def _sv_stop_requested(self) -> None:
        try:
            self.on_stop_requested()
        except Exception as exc:  # noqa: BLE001 - a hook must not break the stop
            _log.error("stop_hook_failed", actor=str(self), error=repr(exc))

    def _sv_request_stop(self, reason: ExitReason) -> None:
        """Ask the actor to stop after the messages already queued; exit with ``reason``."""
        self._sv_stop_reason = reason
        try:
            self.actor_ref.tell(_ActorStop())
        except ActorDeadError:
            pass
        self._sv_stop_requested()

    def _sv_kill(self, reason: str) -> bool:
        own_thread = self._sv_tid == threading.get_ident()
        with self._sv_lock:
            if self._sv_life.exit is not None or self._sv_kill_reason is not None:
                return False
            self._sv_kill_reason = reason
            if (
                self._sv_busy
                and not own_thread
                and not self._sv_disarmed
                and not self._sv_async_sent
            ):
                self._sv_async_sent = True
                _set_async_exc(ctypes.c_ulong(self._sv_tid), ctypes.py_object(Killed))
        _log.warning("actor_killed", actor=str(self), reason=reason)
        # Report the exit now rather than when the thread gets round to it: a thread stuck
        # in C code (a long sleep, a blocking read) only sees the Killed when it returns.
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        self.actor_inbox.put(Envelope(_KILL))
        if not own_thread:
            self._sv_stop_requested()
        self._sv_finish(ExitReason.killed(reason))
        if own_thread and self._sv_busy:
            raise Killed(reason)
        return True


def _life_of(ref: ActorRef[Any]) -> _Life:
    """The exit bookkeeping of a SupervisedActor's ref.

    Raises TypeError for refs to actors that are not SupervisedActors.
    """
    life = getattr(ref, "_sv_life", None)
    if life is None:
        msg = (
            f"{ref} is a {ref.actor_class.__name__}, not a SupervisedActor; only "
            "SupervisedActor subclasses can be killed, monitored and supervised"
        )
        raise TypeError(msg)
    return life  # type: ignore[no-any-return]


def _actor_of(ref: ActorRef[Any]) -> SupervisedActor | None:
    """The SupervisedActor behind ``ref``; None once it has been garbage-collected
    (which happens only after it exited). Raises TypeError if not supervised."""
    _life_of(ref)
    return ref._actor_weakref()


def kill(ref: ActorRef[Any], reason: str = "killed") -> bool:
    """Make a running SupervisedActor fail as if its code raised ``Killed(reason)``.

    What happens, in order:

    1. The actor is marked dead at once: it leaves pykka's registry, ``ref.is_alive()``
       turns False, new ``tell``/``ask`` raise ``ActorDeadError``, and every exit hook
       (its supervisor, monitors, timers) is told ``ExitReason.killed(reason)`` from the
       calling thread. A supervisor can therefore restart the child without waiting for
       the old thread.
    2. If the actor is inside a handler (or ``on_start``/``on_stop``), ``Killed`` is raised
       asynchronously in its thread (``PyThreadState_SetAsyncExc``). CPython delivers it
       the next time that thread executes Python bytecode: a handler in a Python loop is
       interrupted within a few bytecodes, but one blocked in a C call (``time.sleep``,
       a socket read, a lock) sees it only when that call returns; until then the old
       thread is *abandoned*, still alive but cut off. The asker of the interrupted
       message receives ``Killed(reason)``; queued messages get ``ActorDeadError``.
       A handler that catches ``Killed`` still cannot keep the actor alive: the loop
       checks the kill flag before taking the next message.
    3. If the actor is idle, a wake-up message makes its thread exit without handling
       anything else.

    Races: the ``busy`` flag is written by the actor without a lock (keeping the hot loop
    lock-free). The kill flag is set before ``busy`` is read and the loop reads the kill
    flag before each ``get``, so under the GIL either the handler gets the ``Killed`` or the
    loop sees the flag; never neither. A ``Killed`` still pending when the actor leaves its
    loop is taken in its own thread before its clean-up runs, so it can't land in clean-up
    code (taken, not cleared: clearing it leaves CPython's pending flag set). A kill that
    lands while the actor is inside library code (e.g. setting a reply) may leave that
    one reply unanswered; the asker then needs its timeout.

    Called from the actor's own handler, ``kill`` raises ``Killed`` directly.

    Returns:
        True if this call killed the actor; False if it had already exited or been killed.

    Raises:
        TypeError: ``ref`` is not a SupervisedActor.
    """
    actor = _actor_of(ref)
    if actor is None:
        return False
    return actor._sv_kill(reason)


def wait_exit(ref: ActorRef[Any], timeout: float | None = None) -> ExitReason | None:
    """Wait up to ``timeout`` seconds (None: forever) until the actor behind ``ref`` has
    exited and its hooks were told; return its reason, or None on timeout.

    For a killed actor this returns as soon as the kill was reported, possibly before the
    abandoned thread has ended (see :func:`kill`).
    """
    life = _life_of(ref)
    if not life.done.wait(timeout):
        return None
    return life.exit


def exit_reason(ref: ActorRef[Any]) -> ExitReason | None:
    """The reason the actor behind ``ref`` exited, or None while it is running."""
    return _life_of(ref).exit
