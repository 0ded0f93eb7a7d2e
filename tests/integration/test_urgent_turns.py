"""Which calls are urgent (busy actors give way to them) and which are bulk.

A turn written after a pause in its user's writes is urgent, for a while after it too; a
turn written right after the user's last one (an import, a flood) is not, unless the last
was urgent and the user keeps up (its pages are placed as they come); a user's first turn
is not. A retrieval is urgent. See ``supervisor.urgent``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import memoryos_actors.conversation as conversation
from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.conversation import _Pauses


def test_a_turn_after_a_pause_is_urgent_and_one_right_after_the_last_is_not() -> None:
    pauses = _Pauses()
    assert not pauses.paused("ann", 100.0)  # never seen: a chat or an import, unknown
    assert not pauses.was_urgent("ann")
    pauses.returned("ann", 100.0, False)
    assert not pauses.paused("ann", 100.0 + conversation._PAUSE_S / 2)  # back to back
    assert pauses.paused("ann", 100.0 + 2 * conversation._PAUSE_S)  # after a pause
    assert not pauses.paused("bob", 200.0)  # per user
    assert not pauses.was_urgent("ann")
    pauses.returned("ann", 101.0, True)
    assert pauses.was_urgent("ann") and not pauses.was_urgent("bob")


def test_the_users_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conversation, "_PAUSES_KEPT", 8)
    pauses = _Pauses()
    for i in range(100):
        pauses.returned(f"user-{i}", float(i), False)
        assert len(pauses._last) <= 8
    # The latest are kept; the oldest were forgotten (their next turn counts as a first).
    assert pauses.paused("user-99", 99.0 + 2 * conversation._PAUSE_S)
    assert not pauses.paused("user-0", 1000.0)


@pytest.fixture
def lingers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Records the linger of every urgent call the memory system makes."""
    seen: list[float] = []

    @contextmanager
    def recording(linger: float = 0.0) -> Iterator[None]:
        seen.append(linger)
        yield

    monkeypatch.setattr(conversation, "urgent", recording)
    yield seen


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[MemoryOS]:
    with MemoryOS.open(tmp_path, MemoryConfig(log_level="critical", fsync="never")) as m:
        yield m


def test_turns_and_retrievals_are_marked_through_the_api(
    mem: MemoryOS, monkeypatch: pytest.MonkeyPatch, lingers: list[float]
) -> None:
    monkeypatch.setattr(conversation, "_PAUSE_S", 3600.0)  # every gap is short
    mem.add_turn("ann", "first", "ok")  # a first turn: bulk
    mem.add_turn("ann", "second", "ok")  # right after it: bulk
    assert lingers == []
    monkeypatch.setattr(conversation, "_PAUSE_S", 0.0)  # every gap is a pause
    mem.add_turn("ann", "third", "ok")
    assert lingers == [conversation._LINGER_S]
    mem.add_turn("bob", "a first turn is never urgent", "ok")
    assert lingers == [conversation._LINGER_S]
    mem.retrieve("ann", "what came first?")
    assert lingers == [conversation._LINGER_S, conversation._LINGER_S]
    assert mem.stats("ann")["stm_pages"] == 3
    mem.forget_user("ann")
    assert "ann" not in mem._conversation._pauses._last  # no trace of a forgotten user


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Records the timeout of every wait of a bulk turn for the urgent calls."""
    seen: list[float] = []
    monkeypatch.setattr(conversation, "wait_while_urgent", lambda t: seen.append(t) or True)
    return seen


def test_a_bulk_turn_lets_the_urgent_calls_in_progress_finish_first(
    mem: MemoryOS, monkeypatch: pytest.MonkeyPatch, lingers: list[float], waits: list[float]
) -> None:
    monkeypatch.setattr(conversation, "_PAUSE_S", 3600.0)
    mem.add_turn("ann", "first", "ok")
    mem.add_turn("ann", "second", "ok")
    assert waits == [conversation._BULK_WAIT_S] * 2  # bulk turns wait
    monkeypatch.setattr(conversation, "_PAUSE_S", 0.0)
    mem.add_turn("ann", "third", "ok")  # urgent: never waits for others
    assert waits == [conversation._BULK_WAIT_S] * 2
    assert lingers == [conversation._LINGER_S]


def test_a_user_that_keeps_up_stays_urgent_when_it_writes_again_at_once(
    mem: MemoryOS, monkeypatch: pytest.MonkeyPatch, lingers: list[float], waits: list[float]
) -> None:
    mem.add_turn("ann", "first", "ok")  # a first turn: bulk
    monkeypatch.setattr(conversation, "_PAUSE_S", 0.0)
    mem.add_turn("ann", "after a pause", "ok")  # urgent
    monkeypatch.setattr(conversation, "_PAUSE_S", 3600.0)  # from now on back to back
    mem.add_turn("ann", "late, written at once", "ok")  # kept up: still urgent
    assert lingers == [conversation._LINGER_S] * 2
    assert waits == [conversation._BULK_WAIT_S]  # only the first waited
    # A user whose pages queue up for placement no longer keeps up: bulk again.
    monkeypatch.setattr(conversation, "_KEEPS_UP_PAGES", -1)
    mem.add_turn("ann", "behind", "ok")
    assert lingers == [conversation._LINGER_S] * 2
    mem.add_turn("ann", "and bulk from then on", "ok")
    assert lingers == [conversation._LINGER_S] * 2
    assert waits == [conversation._BULK_WAIT_S] * 2  # the last one waited again
