"""Summaries and persona updates that MTM owes survive passivation, restart and a crash.

The loopback provider is stalled while those jobs are at the gateway; the user is then
passivated (or its MTM killed, or the process closed), the stalled answers come back to
nobody, and the user's next incarnation must ask for them again: the persona facts and the
segment summaries arrive, each persona update applied exactly once.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("litellm") is None:  # imported by the tests that use it
    pytest.skip("litellm is not installed", allow_module_level=True)

from fakeserver import FakeOpenAIServer
from gwhelpers import KEY_ENV, TOPIC_TURNS

from memoryos_actors import MemoryOS
from memoryos_actors.actors.lpm import LPMActor
from memoryos_actors.actors.mtm_recovery import applied_jobs
from memoryos_actors.actors.protocol import split_tag
from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig

FACT = "User performs comedy at open mic nights."
SUMMARY = "Comedy and puns."

TURNS = TOPIC_TURNS * 2


class Gate:
    """A provider that holds every summary and persona answer until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        if kind not in ("persona_update", "segment_persona", "segment_summary"):
            return None
        self.entered.set()
        self.release.wait(20.0)
        return {
            "summary": SUMMARY,
            "keywords": ["comedy"],
            "traits": [{"name": "Sense of humor", "level": "high", "evidence": "jokes"}],
            "facts": [FACT],
            "agent_traits": [],
        }


def _config(server: FakeOpenAIServer) -> MemoryConfig:
    return MemoryConfig(
        llm_backend="litellm",
        llm_model="openai/fake-model",
        llm_base_url=server.base_url,
        llm_api_key_env=KEY_ENV,
        llm_timeout_seconds=30.0,
        llm_max_retries=0,
        mtm_capacity=12,
        segment_max_pages=6,
        heat_tick_seconds=3600.0,
        summary_debounce_seconds=0.01,
        summary_every_pages=2,
        persona_debounce_seconds=0.0,
        promotion_threshold=2.0,
        fsync="never",
        log_level="critical",
        # The completion cache would answer the asked-again jobs from the stalled answers;
        # without it every answer below comes from the provider.
        cache_size=0,
    )


@pytest.fixture
def gate(server: FakeOpenAIServer, litellm_ready: None) -> Iterator[Gate]:
    g = Gate()
    server.state.responder = g
    yield g
    g.release.set()  # never leave a provider thread waiting


@pytest.fixture
def open_mem(tmp_path: Path) -> Iterator[Callable[[MemoryConfig], MemoryOS]]:
    opened: list[MemoryOS] = []

    def _open(config: MemoryConfig) -> MemoryOS:
        mem = MemoryOS.open(tmp_path / "data", config, clock=ManualClock(1_700_000_000.0))
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()


def _stall(mem: MemoryOS, gate: Gate, user: str) -> None:
    for q, r in TURNS:
        mem.add_turn(user, q, r)
    assert gate.entered.wait(10.0), "no summary or persona job reached the provider"


def _check_owed_work_arrived(mem: MemoryOS, user: str) -> None:
    state = mem.user_state(user)
    assert [f.text for f in state.kb].count(FACT) == 1
    levels = {t.name: t.level for t in state.traits if t.level is not None}
    assert levels.get("sense_of_humor") == "high"
    assert any(seg.summary == SUMMARY for seg in state.segments)


def test_work_owed_at_passivation_is_asked_for_when_the_user_comes_back(
    open_mem: Callable[[MemoryConfig], MemoryOS], server: FakeOpenAIServer, gate: Gate
) -> None:
    mem = open_mem(_config(server))
    _stall(mem, gate, "joker")
    assert mem.passivate("joker")  # does not wait for the stalled jobs
    gate.release.set()  # their answers now reach nobody (the incarnation is gone)
    mem.flush()
    assert mem.active_users() == []
    asked_before = server.chat_requests
    mem.user_state("joker")  # activates: the snapshot says what was owed
    mem.flush()
    assert server.chat_requests > asked_before, "nothing was asked for again"
    _check_owed_work_arrived(mem, "joker")


def test_an_answer_that_comes_before_lpm_has_started_waits_for_it(
    open_mem: Callable[[MemoryConfig], MemoryOS],
    server: FakeOpenAIServer,
    gate: Gate,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # At an activation MTM starts before LPM and asks for the owed work as it recovers;
    # with a quick provider the persona update can come back before LPM has started (a
    # loaded machine). It must wait for LPM, not be dropped as delivered.
    mem = open_mem(_config(server))
    _stall(mem, gate, "joker")
    assert mem.passivate("joker")
    gate.release.set()
    mem.flush()
    start = LPMActor.on_start

    def slow_start(self: LPMActor) -> None:
        time.sleep(0.5)  # fault injection: LPM takes longer to start than the answer
        start(self)

    monkeypatch.setattr(LPMActor, "on_start", slow_start)
    mem.user_state("joker")
    mem.flush()
    monkeypatch.setattr(LPMActor, "on_start", start)
    _check_owed_work_arrived(mem, "joker")


def test_work_owed_when_the_process_stops_is_asked_for_after_reopen(
    open_mem: Callable[[MemoryConfig], MemoryOS], server: FakeOpenAIServer, gate: Gate
) -> None:
    cfg = _config(server)
    mem = open_mem(cfg)
    _stall(mem, gate, "joker")
    started = time.monotonic()
    mem.close(timeout=0.5)  # flush cannot finish: the provider holds the answers
    # close keeps to its timeout: the gateway's answers still pending are cancelled when
    # it runs out, not after the gateway's own 5 s grace.
    assert time.monotonic() - started < 4.0
    gate.release.set()
    mem = open_mem(cfg)
    mem.user_state("joker")
    mem.flush()
    _check_owed_work_arrived(mem, "joker")


def test_an_answer_in_flight_when_mtm_crashes_is_applied_once(
    open_mem: Callable[[MemoryConfig], MemoryOS], server: FakeOpenAIServer, gate: Gate
) -> None:
    mem = open_mem(_config(server))
    _stall(mem, gate, "joker")
    assert mem.kill_actor("joker", "mtm")
    gate.release.set()
    mem.flush()
    _check_owed_work_arrived(mem, "joker")
    mem.passivate("joker")  # and a later incarnation does not apply it again
    mem.user_state("joker")
    mem.flush()
    _check_owed_work_arrived(mem, "joker")


def test_job_tags_carry_the_job_id_and_old_tags_have_none() -> None:
    assert split_tag("ab12.7:s3+s5|default") == ("ab12.7", "s3+s5", "default")
    assert split_tag("ab12.8:s4") == ("ab12.8", "s4", "")
    assert split_tag("s3|default") == ("", "s3", "default")
    records = [
        (1, {"t": "turn", "seq": 1}),
        (2, {"t": "persona", "job": "ab12.7"}),
        (3, {"t": "persona", "segment": "s1"}),
    ]
    assert applied_jobs(records) == {"ab12.7"}
