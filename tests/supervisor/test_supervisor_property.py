"""Random crashes and stops against a small model of OTP supervisor semantics."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from svhelpers import ManualClock, child_refs, settle, worker_spec

import supervisor as sv


@dataclass
class ModelChild:
    id: str
    restart: sv.Restart
    status: str = "running"
    restarts: int = 0


class Model:
    """What an OTP supervisor's children look like after each exit (frozen clock)."""

    def __init__(self, children: list[ModelChild], strategy: sv.Strategy, max_restarts: int):
        self.children = children
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.restarts = 0
        self.alive = True

    def find(self, child_id: str) -> ModelChild | None:
        return next((c for c in self.children if c.id == child_id), None)

    def exit(self, child: ModelChild, abnormal: bool) -> None:
        restart = child.restart is sv.Restart.PERMANENT or (
            child.restart is sv.Restart.TRANSIENT and abnormal
        )
        if not restart:
            if child.restart is sv.Restart.TEMPORARY:
                self.children.remove(child)
            else:
                child.status = "stopped"
            return
        self.restarts += 1
        if self.restarts > self.max_restarts:  # the clock never moves: all in one window
            self.alive = False
            return
        i = self.children.index(child)
        if self.strategy is sv.Strategy.ONE_FOR_ONE:
            group = [child]
        elif self.strategy is sv.Strategy.ONE_FOR_ALL:
            group = list(self.children)
        else:
            group = self.children[i:]
        for member in group:
            if member is not child and member.restart is sv.Restart.TEMPORARY:
                self.children.remove(member)
            elif member is child or member.status == "running":
                member.status = "running"
                member.restarts += 1

    def view(self) -> list[tuple[str, str, int]]:
        return [(c.id, c.status, c.restarts) for c in self.children]


restart_types = st.sampled_from(list(sv.Restart))
operations = st.lists(
    st.tuples(st.sampled_from(["crash", "kill", "stop"]), st.integers(0, 3)),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    types=st.lists(restart_types, min_size=2, max_size=4),
    strategy=st.sampled_from(list(sv.Strategy)),
    max_restarts=st.integers(0, 5),
    ops=operations,
)
def test_live_tree_matches_the_otp_model_after_every_step(
    types: list[sv.Restart],
    strategy: sv.Strategy,
    max_restarts: int,
    ops: list[tuple[str, int]],
) -> None:
    ids = [f"c{i}" for i in range(len(types))]
    model = Model(
        [ModelChild(i, t) for i, t in zip(ids, types, strict=True)], strategy, max_restarts
    )
    sup = sv.Supervisor.start(
        [worker_spec(i, restart=t) for i, t in zip(ids, types, strict=True)],
        strategy=strategy,
        max_restarts=max_restarts,
        max_seconds=1.0,
        clock=ManualClock(),
    )
    all_refs = list(child_refs(sup).values())
    try:
        for op, index in ops:
            child_id = ids[index % len(ids)]
            child = model.find(child_id)
            ref = child_refs(sup).get(child_id)
            if child is None or child.status != "running":
                assert ref is None
                continue
            assert ref is not None
            if op == "crash":
                ref.tell("crash")
            elif op == "kill":
                sv.kill(ref, "property")
            else:
                ref.tell("stop_self")
            settle(sup, ref)
            model.exit(child, abnormal=op != "stop")
            if not model.alive:
                reason = sv.wait_exit(sup, timeout=10)
                assert reason is not None and reason.kind == "crash"
                assert isinstance(reason.exception, sv.RestartIntensityExceeded)
                break
            children = sv.which_children(sup, timeout=10)
            assert [(c.id, c.status, c.restarts) for c in children] == model.view()
            for c in children:
                assert (c.ref is not None) == (c.status == "running")
                assert c.ref is None or c.ref.is_alive()
            all_refs.extend(c.ref for c in children)
    finally:
        if sup.is_alive():
            sv.stop(sup, timeout=10)
    # Whatever happened, stopping the tree leaves no child behind.
    assert not any(r is not None and r.is_alive() for r in all_refs)
