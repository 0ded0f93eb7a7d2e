"""Hostile input: wrong types, huge or broken text, NaN times, unknown actor messages.

Every public call either works or raises a :class:`MemoryOSError` subclass, and the system
keeps serving afterwards with every user's data intact.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pykka
import pytest
from faultutil import check_ledger, small_config, turn_query, wait_restarted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

from memoryos_actors import (
    AgentProfile,
    InvalidInput,
    ManualClock,
    MemoryOS,
    MemoryOSError,
    UserProfile,
)
from memoryos_actors.actors.base import actor_names

KEEPER = "keeper"  # a user the fuzzer never names: its data must survive everything
LIMIT = 2048  # max_text_bytes, small so that "huge" stays cheap

_HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(math.nan),
    st.just(-math.inf),
    st.binary(max_size=8),
    st.just(""),
    st.just(" "),
    st.just("\x00"),
    st.text(max_size=12).map(lambda t: f"{t}\x00{t}"),
    st.text(max_size=12).map(lambda t: f"{t}\ud800"),
    st.just("x" * (LIMIT + 1)),
    st.just("é" * LIMIT),
    st.just("y" * 3_000_000),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers()),
    st.builds(object),
    st.just(Path("no-such-dir") / "x"),
)
_TEXT = st.one_of(st.text(max_size=40), _HOSTILE)
_USER = st.one_of(st.sampled_from(["fuzz-a", "fuzz-b", "Fuzz a/../b"]), _HOSTILE)
_TS = st.one_of(st.none(), st.floats(min_value=0, max_value=2e9), _HOSTILE)
_PROFILE = st.one_of(
    st.just(UserProfile(name="Ann")), st.just(AgentProfile(role="guide")), _HOSTILE
)
_LIMIT = st.one_of(st.none(), st.integers(-5, 50), _HOSTILE)


def _calls(mem: MemoryOS, tmp: Path) -> st.SearchStrategy[tuple[str, tuple[Any, ...]]]:
    path = st.one_of(
        st.just(tmp / "out.json"),
        st.just(tmp),
        st.just(tmp / "none" / "x"),
        st.just(tmp / "junk.bin"),
        _HOSTILE,
    )
    return st.one_of(
        st.tuples(st.just("add_turn"), st.tuples(_USER, _TEXT, _TEXT, _TS, _TEXT)),
        st.tuples(st.just("retrieve"), st.tuples(_USER, _TEXT, _TEXT, _TS)),
        st.tuples(st.just("chat"), st.tuples(_USER, _TEXT, _TEXT)),
        st.tuples(st.just("set_user_profile"), st.tuples(_USER, _PROFILE)),
        st.tuples(st.just("set_agent_profile"), st.tuples(_USER, _PROFILE, _TEXT)),
        st.tuples(st.just("user_state"), st.tuples(_USER)),
        st.tuples(st.just("stats"), st.tuples(_USER)),
        st.tuples(st.just("archive"), st.tuples(_USER, _TEXT, _LIMIT)),
        st.tuples(st.just("export_user"), st.tuples(_USER, path)),
        st.tuples(st.just("import_user"), st.tuples(path, _USER)),
        st.tuples(st.just("forget_user"), st.tuples(_USER)),
        st.tuples(st.just("passivate"), st.tuples(_USER)),
        st.tuples(st.just("flush"), st.tuples(st.one_of(st.just(30.0), _HOSTILE))),
    )


def _keeper_ledger(mem: MemoryOS) -> dict[str, str]:
    ledger = {}
    for n in range(1, 16):
        ledger[mem.add_turn(KEEPER, turn_query(KEEPER, n), "ok")] = turn_query(KEEPER, n)
    mem.set_user_profile(KEEPER, UserProfile(name="Keeper"))
    return ledger


def test_hostile_arguments_to_every_public_call_raise_only_typed_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "junk.bin").write_bytes(b"\x93\x00garbage")
    with MemoryOS.open(
        tmp_path / "data", small_config(max_text_bytes=LIMIT), clock=ManualClock(1_700_000_000.0)
    ) as mem:
        ledger = _keeper_ledger(mem)
        untyped: list[str] = []

        @settings(
            max_examples=150,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(call=_calls(mem, tmp_path))
        def run(call: tuple[str, tuple[Any, ...]]) -> None:
            name, args = call
            try:
                getattr(mem, name)(*args)
            except MemoryOSError:
                pass
            except Exception as exc:  # noqa: BLE001 - the finding
                untyped.append(f"{name}{args!r:.200}: {type(exc).__name__}: {exc}")

        run()
        assert untyped == []
        # Still serving, and the keeper's data is intact.
        mem.flush()
        assert check_ledger(mem, KEEPER, ledger) == []
        assert mem.user_state(KEEPER).profile.name == "Keeper"
        assert mem.add_turn("after-fuzz", "hello", "hi") == "p1"


@pytest.mark.parametrize("bad", [None, 42, 3.5, object(), b"\x00", "a\x00b"])
def test_open_refuses_a_hostile_data_dir_or_config_with_a_typed_error(
    tmp_path: Path, bad: object
) -> None:
    with pytest.raises(InvalidInput, match="data_dir"):
        MemoryOS.open(bad)  # type: ignore[arg-type]
    if bad is None:  # no configuration: the defaults
        MemoryOS.open(tmp_path / "d", bad).close()
    else:
        with pytest.raises(InvalidInput, match="config"):
            MemoryOS.open(tmp_path / "d", bad)  # type: ignore[arg-type]


def test_unknown_messages_crash_only_the_actor_which_restarts_with_data_intact(
    tmp_path: Path,
) -> None:
    with MemoryOS.open(
        tmp_path / "data", small_config(), clock=ManualClock(1_700_000_000.0)
    ) as mem:
        ledger = _keeper_ledger(mem)
        mem.flush()
        names = [
            *actor_names(KEEPER),
            "heat-ticker",
            "janitor",
            *(n for n in mem.registry.names() if n.startswith(("gateway/", "retrieval/"))),
        ]
        for name in names:
            # A sibling's restart (rest_for_one) may have this name unregistered briefly.
            wait_until(lambda n=name: mem.registry.lookup(n) is not None, f"{name} registered")
            ref = mem.registry.require(name)
            with pytest.raises(Exception) as info:
                ref.ask(object(), timeout=30)
            assert not isinstance(info.value, pykka.Timeout), name
            ref = wait_restarted(mem, name, ref)
            ref.tell(object())  # no asker: a crash all the same
            wait_restarted(mem, name, ref)
        mem.flush()
        assert check_ledger(mem, KEEPER, ledger) == []
        assert mem.user_state(KEEPER).profile.name == "Keeper"
        q = turn_query(KEEPER, 99)
        ledger[mem.add_turn(KEEPER, q, "ok")] = q
        assert mem.retrieve(KEEPER, "glacier hike").stm
        mem.flush()
        assert check_ledger(mem, KEEPER, ledger) == []
