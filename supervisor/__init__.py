"""OTP-style supervision for pykka ThreadingActors.

Build workers on :class:`SupervisedActor`, describe them with :class:`ChildSpec`, and run
them under a :class:`Supervisor` (static children, a :class:`Strategy`, restart intensity,
optional :class:`Backoff`) or a :class:`DynamicSupervisor` (children added at run time).
A :class:`Registry` maps stable names to the current ref of restarted actors;
:func:`monitor`, :func:`kill`, :func:`send_after` and :func:`send_interval` complete the
toolbox. Nothing here knows about the memory system.

Every start, crash, restart, escalation and stop is logged with structlog under the
logger name ``"supervisor"``; configuring structlog is left to the application.
"""

from __future__ import annotations

from ._actor import (
    ExitCallback,
    SupervisedActor,
    exit_reason,
    kill,
    urgent,
    urgent_calls,
    wait_exit,
    wait_while_urgent,
)
from ._dynamic import DynamicSupervisor
from ._errors import Killed, MaxChildrenError, RestartIntensityExceeded, SupervisorError
from ._monitor import Down, MonitorRef, demonitor, monitor
from ._reason import ExitKind, ExitReason
from ._registry import Registry
from ._requests import (
    detach_child,
    format_tree,
    restart_child,
    start_child,
    stop,
    terminate_child,
    which_children,
)
from ._spec import Backoff, ChildInfo, ChildKind, ChildSpec, ChildStatus, Restart, Strategy
from ._supervisor import Supervisor
from ._sync import SafeCondition, SafeEvent, SafeFuture
from ._timers import TimerRef, active_timer_count, send_after, send_interval

#: Which distribution this ``supervisor`` comes from: PyPI's ``supervisor`` (supervisord)
#: uses the same top-level name, and ``memoryos_actors`` reads this to tell them apart.
__distribution__ = "memoryos-actors"

__all__ = [
    "Backoff",
    "SafeCondition",
    "SafeEvent",
    "SafeFuture",
    "ChildInfo",
    "ChildKind",
    "ChildSpec",
    "ChildStatus",
    "Down",
    "DynamicSupervisor",
    "ExitCallback",
    "ExitKind",
    "ExitReason",
    "Killed",
    "MaxChildrenError",
    "MonitorRef",
    "Registry",
    "Restart",
    "RestartIntensityExceeded",
    "Strategy",
    "SupervisedActor",
    "Supervisor",
    "SupervisorError",
    "TimerRef",
    "active_timer_count",
    "demonitor",
    "detach_child",
    "exit_reason",
    "format_tree",
    "kill",
    "monitor",
    "restart_child",
    "send_after",
    "send_interval",
    "start_child",
    "stop",
    "terminate_child",
    "urgent",
    "urgent_calls",
    "wait_while_urgent",
    "wait_exit",
    "which_children",
]
