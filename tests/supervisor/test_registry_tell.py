"""Registry.tell: a message to a name whose actor may be gone is delivered or reported as
not delivered; only the dead-actor case is absorbed, every other error propagates."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from svhelpers import Worker, worker_spec

import supervisor as sv


def test_a_tell_to_a_live_actor_is_delivered_and_handled() -> None:
    registry = sv.Registry()
    sup = sv.Supervisor.start([worker_spec("a", name="svc")], registry=registry)
    try:
        release, entered = threading.Event(), threading.Event()
        assert registry.tell("svc", ("spin", release, entered)) is True
        assert entered.wait(10)  # the worker got it
        release.set()
    finally:
        sv.stop(sup, timeout=10)


def test_a_tell_to_a_stopped_actor_or_a_free_name_returns_false() -> None:
    registry = sv.Registry()
    ref = Worker.start()
    registry.register("x", ref)  # registered by hand: nobody unregisters it on stop
    sv.stop(ref, timeout=5)
    assert not ref.is_alive() and registry.lookup("x") is ref
    assert registry.tell("x", "ping") is False  # pykka's ActorDeadError, absorbed
    assert registry.tell("nobody", "ping") is False


def test_a_tell_through_a_supervised_name_after_its_tree_stopped_returns_false() -> None:
    registry = sv.Registry()
    sup = sv.Supervisor.start([worker_spec("a", name="svc")], registry=registry)
    sv.stop(sup, timeout=10)
    assert registry.tell("svc", "ping") is False


class _BrokenRef:
    """Stands in for a ref whose tell fails for a reason other than a dead actor."""

    def is_alive(self) -> bool:
        return True

    def tell(self, message: Any) -> None:
        raise RuntimeError("a bug in the sender's path")


def test_errors_other_than_a_dead_actor_propagate() -> None:
    registry = sv.Registry()
    with pytest.raises(TypeError):
        registry.tell(["not", "a", "name"], "ping")  # type: ignore[arg-type]
    registry.register("broken", _BrokenRef())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="a bug in the sender's path"):
        registry.tell("broken", "ping")
