"""Why an actor stopped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ExitKind", "ExitReason"]

ExitKind = Literal["normal", "shutdown", "crash", "killed", "noproc"]


@dataclass(frozen=True, slots=True)
class ExitReason:
    """Why an actor stopped.

    ``kind`` is one of:

    - ``"normal"``: the actor was stopped with a plain pykka ``stop()`` (by itself or
      anyone else) and its ``on_stop`` returned.
    - ``"shutdown"``: its supervisor (or :func:`supervisor.stop`) stopped it in an orderly
      way, e.g. during a sibling's restart or the supervisor's own shutdown.
    - ``"crash"``: an unexpected exception escaped ``on_start``, a message handler or
      ``on_stop``; ``exception`` holds it.
    - ``"killed"``: :func:`supervisor.kill` was called, or a supervisor forced a child
      that did not stop within its ``shutdown`` timeout; ``detail`` holds the reason.
    - ``"noproc"``: the monitored actor was already gone and its reason is unknown.

    ``crash`` and ``killed`` are *abnormal*: a ``TRANSIENT`` child is restarted only after
    those.
    """

    kind: ExitKind
    exception: BaseException | None = None
    detail: str = ""

    @classmethod
    def normal(cls) -> ExitReason:
        """An orderly stop requested with pykka's ``stop()``."""
        return _NORMAL

    @classmethod
    def shutdown(cls) -> ExitReason:
        """An orderly stop requested by a supervisor."""
        return _SHUTDOWN

    @classmethod
    def crash(cls, exc: BaseException) -> ExitReason:
        """A failure caused by the unexpected exception ``exc``."""
        return cls("crash", exc, f"{type(exc).__name__}: {exc}")

    @classmethod
    def killed(cls, reason: str = "killed") -> ExitReason:
        """A failure forced from outside by :func:`supervisor.kill`."""
        return cls("killed", None, reason)

    @classmethod
    def noproc(cls) -> ExitReason:
        """The actor was already gone; why is unknown."""
        return _NOPROC

    @property
    def abnormal(self) -> bool:
        """True for ``crash`` and ``killed``: the exits that restart a TRANSIENT child."""
        return self.kind in ("crash", "killed")

    def __str__(self) -> str:
        return f"{self.kind}({self.detail})" if self.detail else self.kind


_NORMAL = ExitReason("normal")
_SHUTDOWN = ExitReason("shutdown")
_NOPROC = ExitReason("noproc")
