"""The job watch flush waits on: jobs owed, settled, and replaced by the jobs asked again
in their place (a summary or persona update whose answer read a page deleted since)."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.actors.base import JobWatch


def _watch(token: str, *owed: str) -> JobWatch:
    """A watch of incarnation ``token`` owing ``owed``."""
    watch = JobWatch()
    watch.start(token)
    for job in owed:
        watch.owe(token, job)
    return watch


def test_a_replaced_job_is_waited_for_through_its_successors() -> None:
    watch = _watch("t", "t.1", "t.2", "t.3")
    assert watch.left("t", frozenset({"t.1"})) == {"t.1"}
    watch.settle("t", "t.1", ["t.2", "t.3"])  # dropped, asked again as t.2 and t.3
    assert watch.left("t", frozenset({"t.1"})) == {"t.2", "t.3"}
    watch.settle("t", "t.2")
    assert watch.left("t", frozenset({"t.1"})) == {"t.3"}
    watch.owe("t", "t.4")
    watch.settle("t", "t.3", ["t.4"])  # dropped again
    assert watch.left("t", frozenset({"t.1"})) == {"t.4"}
    watch.settle("t", "t.4")
    assert watch.left("t", frozenset({"t.1"})) == frozenset()
    assert watch._replaced == {}  # forgotten once nothing they stand for is owed


def test_another_incarnation_forgets_replacements_and_ignores_the_old_token() -> None:
    watch = _watch("a", "a.1", "a.2")
    watch.settle("a", "a.1", ["a.2"])
    watch.start("b")
    assert watch.left("a", frozenset({"a.1"})) is None
    assert watch.left("b", frozenset({"a.1"})) == frozenset()
    watch.settle("a", "a.2", ["a.1"])  # from the old incarnation: ignored
    assert watch._replaced == {}


def test_wait_returns_when_the_successor_is_settled() -> None:
    watch = _watch("t", "t.1", "t.2")
    watch.settle("t", "t.1", ["t.2"])
    done = threading.Event()

    def waiter() -> None:
        watch.wait("t", frozenset({"t.1"}), 30.0)
        done.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not done.wait(0.05)  # t.2 stands for t.1
    watch.settle("t", "t.2")
    thread.join(30.0)
    assert done.is_set()


# An operation: owe a new job, settle an owed one plainly, or settle one with successors
# owed already (picked by index among the jobs owed at that moment).
_OPS = st.lists(
    st.tuples(
        st.sampled_from(("owe", "settle", "replace")),
        st.integers(0, 50),
        st.lists(st.integers(0, 50), max_size=3),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_what_is_left_matches_a_model_that_never_forgets(ops) -> None:
    # The model keeps every replacement forever; the watch forgets those that stand for
    # nothing owed. Both must agree on what any set of jobs ever asked still waits for.
    watch = JobWatch()
    watch.start("t")
    owed: set[str] = set()
    replaced: dict[str, list[str]] = {}
    asked: list[str] = []

    def model_left(jobs: set[str]) -> set[str]:
        out, seen, stack = set(), set(), list(jobs)
        while stack:
            job = stack.pop()
            if job in seen:
                continue
            seen.add(job)
            if job in owed:
                out.add(job)
            stack.extend(replaced.get(job, ()))
        return out

    for op, pick, follow in ops:
        current = sorted(owed)
        if op == "owe" or not current:
            job = f"t.{len(asked) + 1}"
            asked.append(job)
            owed.add(job)
            watch.owe("t", job)
            continue
        job = current[pick % len(current)]
        successors = [] if op == "settle" else [current[i % len(current)] for i in follow]
        successors = [s for s in successors if s != job]
        owed.discard(job)
        if successors:
            replaced[job] = successors
        watch.settle("t", job, successors)
        for i in range(len(asked)):
            for j in range(i, min(len(asked), i + 3)):
                jobs = set(asked[i : j + 1])
                assert watch.left("t", frozenset(jobs)) == model_left(jobs)


def test_a_long_chain_of_replacements_is_followed_and_forgotten() -> None:
    # Each job dropped and asked again as the next one, 3,000 times over.
    watch = _watch("t", "t.0")
    for n in range(3000):
        watch.owe("t", f"t.{n + 1}")
        watch.settle("t", f"t.{n}", [f"t.{n + 1}"])
    assert watch.left("t", frozenset({"t.0"})) == {"t.3000"}
    watch.settle("t", "t.3000")
    assert watch.left("t", frozenset({"t.0"})) == frozenset()
    assert watch._replaced == {}


def test_a_dropped_update_owed_again_is_waited_for_until_its_new_jobs_are_settled() -> None:
    watch = _watch("t")
    token, note = watch.owe_again("t.1")
    assert token == "t" and watch.owed_again("t") == {note}
    assert watch.owed_again("other") == frozenset()
    watch.owe("t", "t.2")
    watch.settle("t", note, ["t.2"])  # MTM asked it again as t.2
    assert watch.owed_again("t") == {note}  # through t.2
    assert watch.left("t", watch.owed_again("t")) == {"t.2"}
    watch.settle("t", "t.2")
    assert watch.owed_again("t") == frozenset()
