"""The memory system end to end, through the public API."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sysutil import SMALL, all_page_ids, turn_text

import supervisor
from memoryos_actors import (
    AgentProfile,
    AsyncMemoryOS,
    DataDirLocked,
    InvalidInput,
    ManualClock,
    MemoryConfig,
    MemoryOS,
    StorageError,
    SystemClosed,
    UserProfile,
)
from memoryos_actors.actors.base import actor_names


def test_add_turn_returns_sequential_page_ids(open_mem) -> None:
    mem = open_mem()
    ids = [mem.add_turn("u", *turn_text("u", i)) for i in range(1, 6)]
    assert ids == ["p1", "p2", "p3", "p4", "p5"]


def test_thousand_turns_are_all_kept_exactly_once_across_tiers_and_archive(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 1001):
        mem.add_turn("solo", *turn_text("solo", i))
    mem.flush()
    ids = all_page_ids(mem, "solo")
    counts = Counter(ids)
    assert [pid for pid, c in counts.items() if c > 1] == []
    assert set(ids) == {f"p{i}" for i in range(1, 1001)}
    state = mem.user_state("solo")
    assert state.turns == 1000
    assert len(state.stm) == 7
    assert len(state.segments) <= SMALL["mtm_capacity"]
    assert all(len(s.pages) <= SMALL["segment_max_pages"] for s in state.segments)
    assert mem.archive("solo"), "with a 12-segment MTM, 1,000 turns must have evicted some"


def test_the_tiers_offline_jobs_are_answered_in_their_own_threads(open_mem, monkeypatch) -> None:
    # No provider: each tier's job (a page's chain meta, a summary, a persona update) is
    # answered by the offline backend in the asking actor's thread, not handed to the
    # gateway's loop and back; the pages get their meta and summaries as before.
    from memoryos_actors.gateway.offline import OfflineBackend

    answered_in: Counter[tuple[str, str]] = Counter()
    answer = OfflineBackend.answer

    def watched(self: OfflineBackend, kind: str, payload: Any) -> Any:
        answered_in[kind, threading.current_thread().name.split("-")[0]] += 1
        return answer(self, kind, payload)

    monkeypatch.setattr(OfflineBackend, "answer", watched)
    mem = open_mem()
    for i in range(1, 41):
        mem.add_turn("solo", *turn_text("solo", i))
    mem.flush()
    asked = {kind for kind, _thread in answered_in}
    assert {"page_meta", "segment_summary", "persona_update"} <= asked, answered_in
    owners = {
        "page_meta": "STMActor",
        "page_meta_batch": "STMActor",
        "segment_summary": "MTMActor",
        "persona_update": "MTMActor",
    }
    assert {(kind, owners[kind]) for kind in asked} == set(answered_in), answered_in
    state = mem.user_state("solo")
    assert all(page.chain_id for page in state.stm)
    assert all(seg.summary for seg in state.segments)


def test_stm_applies_an_offline_chain_meta_in_the_message_that_asked_for_it(
    open_mem, monkeypatch
) -> None:
    # The offline answer to STM's chain-meta job is there when the job is asked for: STM
    # applies it at once instead of telling itself the answer (a second message per turn)
    # and arming a timeout for it. MTM's summaries still come by its answer inbox.
    from memoryos_actors.actors.base import GatewayClient

    told: Counter[str] = Counter()
    deliver = GatewayClient.deliver

    def watched(self: GatewayClient, name: str, done: Any) -> None:
        told[name] += 1
        deliver(self, name, done)

    monkeypatch.setattr(GatewayClient, "deliver", watched)
    mem = open_mem()
    for i in range(1, 41):
        mem.add_turn("solo", *turn_text("solo", i))
    mem.flush()
    stm, mtm, _lpm = actor_names("solo")
    assert told[stm] == 0 and told[mtm] > 0, told
    state = mem.user_state("solo")
    assert all(page.chain_id and page.meta_chain for page in state.stm)
    assert all(page.chain_id for seg in state.segments for page in seg.pages)


def _fail_the_first_page_meta(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fault injection: the offline backend fails the first chain-meta job it is asked
    for; returns the list the failed job's kind is added to."""
    from memoryos_actors.gateway.offline import OfflineBackend

    failed: list[str] = []
    answer = OfflineBackend.answer

    def flaky(self: OfflineBackend, kind: str, payload: Any) -> Any:
        if kind.startswith("page_meta") and not failed:
            failed.append(kind)
            raise RuntimeError("fault injection: the offline backend fails once")
        return answer(self, kind, payload)

    monkeypatch.setattr(OfflineBackend, "answer", flaky)
    return failed


def test_a_failed_offline_chain_meta_is_asked_again_after_its_timeout(
    open_mem, monkeypatch
) -> None:
    # Fault injection: the offline backend fails the first chain-meta job. No answer
    # comes, so STM's meta timeout (the LLM timeout and retries, plus 5 s) asks again and
    # the page gets its meta; nothing is lost or applied twice.
    failed = _fail_the_first_page_meta(monkeypatch)
    mem = open_mem(MemoryConfig(**{**SMALL, "llm_timeout_seconds": 0.1, "llm_max_retries": 0}))
    assert mem.add_turn("solo", "I keep bees on the roof.", "How many hives?") == "p1"
    assert failed == ["page_meta"]
    assert not mem.user_state("solo").stm[0].chain_id  # no answer yet: it waits
    mem.flush()
    (page,) = mem.user_state("solo").stm
    assert page.chain_id == "p1" and "bees" in page.meta_chain
    assert mem.stored_page_ids("solo") == ["p1"]


def test_an_offline_catch_up_answers_a_few_meta_jobs_a_message(open_mem, monkeypatch) -> None:
    # Many pages wait for their chain meta (the first job failed and its timeout has not
    # fired yet; one page a job). When the timeout asks again, the offline backend answers
    # the waiting jobs in the STM actor's thread, at most _INLINE_JOBS of them in one
    # message: the rest follow in later messages, so the user's asks get in between.
    from memoryos_actors.actors import stm as stm_module
    from memoryos_actors.actors.base import GatewayClient

    jobs_in_message = [0]
    most: list[int] = []
    answer_here = GatewayClient.answer_here
    on_receive = stm_module.STMActor.on_receive

    def counted_answer(self: GatewayClient, job: Any, slot: str) -> Any:
        jobs_in_message[0] += 1
        return answer_here(self, job, slot)

    def counted_receive(self: Any, message: object) -> object:
        jobs_in_message[0] = 0
        try:
            return on_receive(self, message)
        finally:
            most.append(jobs_in_message[0])

    failed = _fail_the_first_page_meta(monkeypatch)
    monkeypatch.setattr(GatewayClient, "answer_here", counted_answer)
    monkeypatch.setattr(stm_module.STMActor, "on_receive", counted_receive)
    cfg = {
        **SMALL,
        "llm_timeout_seconds": 0.1,
        "llm_max_retries": 0,
        "meta_batch_max_pages": 1,
        "meta_batch_catchup_pages": 1,
    }
    mem = open_mem(MemoryConfig(**cfg))
    for i in range(1, 11):
        mem.add_turn("solo", *turn_text("solo", i))
    assert failed == ["page_meta"]
    assert max(most) == 1  # one job asked (and failed); the others wait for its timeout
    mem.flush()
    assert max(most) == stm_module._INLINE_JOBS  # noqa: SLF001 - the bound under test
    assert sum(most) == 11  # the failed job, then each of the 10 pages once
    state = mem.user_state("solo")
    assert all(page.chain_id for page in state.stm)
    assert sorted(mem.stored_page_ids("solo"), key=lambda p: int(p[1:])) == [
        f"p{i}" for i in range(1, 11)
    ]


def test_retrieve_returns_stm_pages_and_at_most_k_mtm_pages_with_provenance(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 50):
        mem.add_turn("r", *turn_text("r", i))
    mem.flush()
    ctx = mem.retrieve("r", "when does the orchestra rehearse the symphony?")
    assert len(ctx.stm) == 7
    assert [item.item_id for item in ctx.stm] == [f"p{i}" for i in range(43, 50)]
    assert 0 < len(ctx.mtm) <= mem.config.top_k_pages
    for item in ctx.mtm:
        assert item.tier == "mtm" and item.kind == "page"
        assert item.segment_id and item.why
    assert ctx.mtm[0].item_id == "p15"  # "Our orchestra rehearses the Dvorak symphony..."
    assert "Dvorak" in ctx.render()


def test_two_users_never_see_each_others_turns(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 40):
        mem.add_turn("ann", f"ann secret {i}: my locker code is {1000 + i}", "noted ann")
        mem.add_turn("ben", f"ben note {i}: my locker code is {5000 + i}", "noted ben")
    mem.flush()
    for user, other in (("ann", "ben"), ("ben", "ann")):
        ctx = mem.retrieve(user, "what is my locker code?")
        text = ctx.render()
        assert other not in text
        assert all(pid.startswith("p") for pid in ctx.page_ids())
        assert user in text


def test_same_turns_same_clock_and_seed_give_the_same_segments(open_mem) -> None:
    states = []
    for sub in ("a", "b"):
        mem = open_mem(sub=sub, clock=ManualClock(1_700_000_000.0))
        for i in range(1, 120):
            mem.add_turn("d", *turn_text("d", i), timestamp=1_700_000_000.0 + i * 30)
        mem.flush()
        segs = mem.user_state("d").segments
        states.append(sorted((s.segment_id, [p.page_id for p in s.pages]) for s in segs))
    assert states[0] == states[1]


def test_turns_survive_close_and_reopen(tmp_path: Path) -> None:
    cfg = MemoryConfig(**{**SMALL, "fsync": "always"})
    with MemoryOS.open(tmp_path, cfg) as mem:
        for i in range(1, 60):
            mem.add_turn("p", *turn_text("p", i))
        mem.set_user_profile("p", UserProfile(name="Pat"))
    with MemoryOS.open(tmp_path, cfg) as mem:
        assert mem.users() == ["p"]
        assert set(all_page_ids(mem, "p")) == {f"p{i}" for i in range(1, 60)}
        assert mem.add_turn("p", "after reopen", "ok") == "p60"
        assert mem.retrieve("p", "who am I?").lpm_profile.name == "Pat"


def test_second_open_of_the_same_data_dir_is_refused(open_mem, tmp_path: Path) -> None:
    open_mem(sub="locked")
    with pytest.raises(DataDirLocked):
        MemoryOS.open(tmp_path / "locked", MemoryConfig(**SMALL))


def test_killed_tier_actors_lose_no_acknowledged_turn(open_mem) -> None:
    mem = open_mem()
    acked: list[str] = []
    for i in range(1, 301):
        acked.append(mem.add_turn("k", *turn_text("k", i)))
        if i % 40 == 0:
            name = actor_names("k")[1 if i % 80 else 2]
            ref = mem.registry.lookup(name)
            if ref is not None:
                supervisor.kill(ref, "test: injected crash")
    mem.flush()
    ids = all_page_ids(mem, "k")
    assert Counter(ids).most_common(1)[0][1] == 1
    assert set(ids) == set(acked)


def test_kill_actor_crashes_a_tier_that_restarts_with_every_page(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 41):
        mem.add_turn("v", *turn_text("v", i))
    mem.flush()
    before = sorted(mem.stored_page_ids("v"))
    assert mem.kill_actor("v", "mtm", "test: drill") is True
    mem.flush()
    assert sorted(mem.stored_page_ids("v")) == before
    tree = mem.tree()
    # rest_for_one: the LPM actor, started after MTM, restarts with it; STM does not.
    for tier, restarts in (("stm", 0), ("mtm", 1), ("lpm", 1)):
        assert f"{tier} [worker] running restarts={restarts} name=user:v/{tier}" in tree
    with pytest.raises(InvalidInput, match="tier"):
        mem.kill_actor("v", "gateway")


@pytest.mark.parametrize(
    ("settings", "promoted_by_retrievals"),
    [
        ({}, False),
        ({"promote_on_retrieval": True}, True),
        ({"retrieval_mode": "paper", "paper_exact": True}, True),
    ],
)
def test_promotion_after_retrievals_follows_promote_on_retrieval(
    open_mem, settings: dict, promoted_by_retrievals: bool
) -> None:
    # One topic: its pages gather in few segments whose heat (pages + recency) stays below
    # τ = 30 until retrievals add N_visit. No heat tick runs (SMALL: one per hour).
    cfg = MemoryConfig(
        **{**SMALL, "segment_max_pages": 64, "promotion_threshold": 30.0, **settings}
    )
    mem = open_mem(cfg)
    for i in range(20):
        mem.add_turn("h", f"I love hiking mountain trails, day {i}", "Hiking is great.")
    mem.flush()
    assert mem.user_state("h").persona_updates == 0
    for _ in range(40):
        mem.retrieve("h", "hiking mountain trails")
    mem.flush()
    assert (mem.user_state("h").persona_updates > 0) is promoted_by_retrievals


def test_stats_count_turns_evictions_promotions_and_latency(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 301):
        mem.add_turn("m", *turn_text("m", i))
    for _ in range(3):
        mem.retrieve("m", "orchestra symphony")
    mem.flush()
    st = mem.stats()
    assert st["turns"] == 300 and st["retrievals"] == 3
    assert st["evicted_segments"] + st["evicted_pages"] > 0  # a 12-segment MTM overflowed
    assert st["add_turn_ms_p50"] > 0 and st["retrieve_ms_p99"] >= st["retrieve_ms_p50"] > 0
    assert st["gateway_backlog"] == 0 and st["placement_backlog"] == 0
    assert st["gateway"]["calls"] > 0


def test_profiles_reach_retrieval(open_mem) -> None:
    mem = open_mem()
    mem.set_user_profile("q", UserProfile(name="Quinn", birth_year=1990))
    mem.set_agent_profile("q", AgentProfile(role="coach", character="direct"))
    ctx = mem.retrieve("q", "hello")
    assert ctx.lpm_profile.name == "Quinn" and ctx.lpm_profile.birth_year == 1990
    assert ctx.agent_profile == AgentProfile(role="coach", character="direct")
    rendered = ctx.render()
    assert "Quinn" in rendered
    assert "Role: coach" in rendered and "Character: direct" in rendered
    # The persona set for one assistant is not another assistant's.
    other = mem.retrieve("q", "hello", assistant_id="tutor")
    assert other.agent_profile.is_empty() and "Role: coach" not in other.render()


def test_hostile_input_gets_typed_errors_and_the_system_keeps_serving(open_mem) -> None:
    mem = open_mem()
    bad = [
        ("", "q", "r"),
        ("u", 5, "r"),
        ("u", "q\x00", "r"),
        ("u", "\ud800", "r"),
        ("u", "x" * (SMALL.get("max_text_bytes", 65536) + 1), "r"),
        ("u", "", ""),
        (None, "q", "r"),
        (" u", "q", "r"),
    ]
    for user, q, r in bad:
        with pytest.raises(InvalidInput):
            mem.add_turn(user, q, r)  # type: ignore[arg-type]
    for ts in (float("nan"), float("inf"), -1.0, 1e20, "yesterday"):
        with pytest.raises(InvalidInput):
            mem.add_turn("u", "q", "r", timestamp=ts)  # type: ignore[arg-type]
    assert mem.add_turn("u", "still fine", "yes") == "p1"


def test_a_limit_that_is_no_setting_is_not_blamed_on_max_text_bytes(open_mem) -> None:
    # Ids and turn keys have fixed limits in bytes; only texts have max_text_bytes.
    mem = open_mem()
    cases = [
        (("\U0001f600" * 257, "q", "r"), {}, "user_id is 1028 UTF-8 bytes; the limit is 1024"),
        (("u", "q", "r"), {"assistant_id": "a" * 1025}, "assistant_id is 1025 UTF-8 bytes"),
        (("u", "q", "r"), {"turn_key": "k" * 201}, "turn_key is 201 UTF-8 bytes"),
    ]
    for args, kw, said in cases:
        with pytest.raises(InvalidInput, match=said) as err:
            mem.add_turn(*args, **kw)
        assert "max_text_bytes" not in str(err.value)
    with pytest.raises(InvalidInput, match=r"query is 65537 UTF-8 bytes.*\(max_text_bytes\)"):
        mem.add_turn("u", "x" * 65537, "r")


def test_export_import_and_forget_round_trip(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    for i in range(1, 40):
        mem.add_turn("e", *turn_text("e", i))
        mem.add_turn("keep", *turn_text("keep", i))
    mem.flush()
    before = sorted(all_page_ids(mem, "e"))
    out = mem.export_user("e", tmp_path / "e.json")
    report = mem.forget_user("e")
    assert report.removed_files
    assert "e" not in mem.users()
    assert "keep" in mem.users()
    assert mem.import_user(out, user_id="e2") == "e2"
    assert sorted(all_page_ids(mem, "e2")) == before
    assert sorted(all_page_ids(mem, "keep")) == sorted(f"p{i}" for i in range(1, 40))


def test_closed_system_refuses_calls(tmp_path: Path) -> None:
    mem = MemoryOS.open(tmp_path, MemoryConfig(**SMALL))
    mem.close()
    with pytest.raises(SystemClosed):
        mem.add_turn("u", "q", "r")


def test_more_users_than_live_groups_from_eight_threads_each_keep_their_own_history(
    open_mem,
) -> None:
    # Twice as many users as live groups, so passivation and reactivation happen under
    # load (each thread cycles through its three users, ten turns each). Eight threads,
    # not sixteen: the same race of writers against passivation at half the turns (#27).
    mem = open_mem(MemoryConfig(**{**SMALL, "max_active_users": 12}))
    users = [f"user-{n}" for n in range(24)]
    errors: list[BaseException] = []

    def work(chunk: list[str]) -> None:
        try:
            for i in range(1, 11):
                for u in chunk:
                    mem.add_turn(u, *turn_text(u, i))
        except BaseException as exc:  # noqa: BLE001 # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(users[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    mem.flush()
    assert sorted(mem.users()) == sorted(users)
    assert mem.stats()["passivations"] > 0
    for u in users[::4]:
        ids = all_page_ids(mem, u)
        assert sorted(ids) == sorted(f"p{i}" for i in range(1, 11))
        ctx = mem.retrieve(u, "mountain boots")
        assert all(u in item.text for item in (*ctx.stm, *ctx.mtm))


def test_async_api_serves_concurrent_users_without_blocking_the_loop(tmp_path: Path) -> None:
    # A heartbeat task yields at every loop iteration. A facade call that blocked the loop
    # would run start to end without the heartbeat ticking; a call handed to a worker
    # thread suspends on its future, and the loop runs the heartbeat meanwhile. So every
    # call must see at least one tick between its start and its end (no timing involved:
    # the lag itself is measured by bench/async_lag.py).
    ticks = 0

    async def run() -> tuple[list[str], list[int]]:
        nonlocal ticks
        mem = await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL))
        stop = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        async def counted(coro) -> tuple[object, int]:
            before = ticks
            result = await coro
            return result, ticks - before

        hb = asyncio.create_task(heartbeat())
        try:
            await asyncio.sleep(0)  # let the heartbeat start
            done = await asyncio.gather(
                *(counted(mem.add_turn(f"a{n}", f"hello from {n}", "hi")) for n in range(100)),
                counted(mem.retrieve("a7", "hello")),
                counted(mem.user_state("a7")),
            )
            ctx = await mem.retrieve("a7", "hello")
            assert "hello from 7" in ctx.render()
        finally:
            stop.set()
            await hb
            await mem.close()
        return [r for r, _ in done[:100]], [n for _, n in done]

    results, ticks_during = asyncio.run(run())
    assert results == ["p1"] * 100
    assert min(ticks_during) >= 1, "a facade call ran without letting the event loop run"


def test_a_repeated_turn_key_is_answered_not_stored_twice_even_after_a_restart(open_mem) -> None:
    from memoryos_actors.messages import AddTurn

    mem = open_mem()
    stm = actor_names("idem")[0]
    mem.add_turn("idem", "warm up", "ok")  # activates the user
    msg = AddTurn("idem", "default", "hello once", "hi", 1_700_000_100.0, turn_key="key-1")
    first = mem._core.ask(stm, msg)
    assert mem._core.ask(stm, msg) == first
    supervisor.kill(mem.registry.require(stm), "test: crash after the write")
    assert mem._core.ask(stm, msg) == first  # the restarted STM learnt the key from the WAL
    mem.flush()
    assert sorted(mem.stored_page_ids("idem")) == ["p1", "p2"]


def test_agent_persona_is_per_user_unless_configured_as_shared(open_mem) -> None:
    from memoryos_actors.actors.protocol import CompletionDone

    own = open_mem(sub="own")
    own.set_agent_profile("ann", AgentProfile(role="coach", character="strict"))
    assert own.retrieve("ann", "hello").agent_profile.role == "coach"
    own.add_turn("ben", "hi", "hello")
    assert own.retrieve("ben", "hello").agent_profile.role == ""

    shared = open_mem(MemoryConfig(**{**SMALL, "shared_agent_persona": True}), sub="shared")
    shared.set_agent_profile("ann", AgentProfile(role="coach", character="strict running coach"))
    # A read: ben has no data, and gets none but the assistant's shared persona, which is
    # not ben's; nothing is written for ben.
    first = shared.retrieve("ben", "hello")
    assert first.page_ids() == () and first.kb == () and first.traits == ()
    assert first.agent_profile.role == "coach"
    assert "ben" not in shared.users()
    # ben's first chat is answered with the shared persona (the offline backend quotes the
    # one line of its context long enough to quote), and the turn creates ben.
    assert "strict running coach" in shared.chat("ben", "who is my running coach?")
    assert "ben" in shared.users()
    assert shared.retrieve("ben", "hello").agent_profile.role == "coach"
    # Agent traits learnt from one user's promoted segment reach every user of the assistant.
    shared.add_turn("ann", "hi", "hello")  # activates ann's group
    lpm = shared.registry.require(actor_names("ann")[2])
    lpm.tell(
        CompletionDone(
            "persona_update",
            "s1|default",
            {
                "traits": [],
                "facts": ["User owns a red bicycle."],
                "agent_traits": ["The assistant speaks in short sentences."],
            },
            degraded=False,
            epoch=shared.user_epoch("ann"),
        )
    )
    shared.flush()
    ben = shared.retrieve("ben", "short sentences")
    assert [t.text for t in ben.agent_traits] == ["The assistant speaks in short sentences."]
    assert ben.kb == ()  # the user fact stays with ann
    assert [k.text for k in shared.retrieve("ann", "bicycle").kb] == ["User owns a red bicycle."]
    assert "@assistant:default" not in shared.users()
    with pytest.raises(InvalidInput, match="reserved"):
        shared.add_turn("@assistant:default", "q", "r")


def test_export_to_a_name_too_long_for_the_file_system_is_a_storage_error(
    open_mem,
    tmp_path: Path,
) -> None:
    # Found by the hostile-input property test: the failed write's clean-up raised a bare
    # OSError (the temp file's name was too long as well) in place of StorageError.
    mem = open_mem()
    mem.add_turn("e", "my cat is called Miso", "noted")
    with pytest.raises(StorageError, match="writing export failed"):
        mem.export_user("e", tmp_path / ("x" * 252))
    out = mem.export_user("e", tmp_path / "e.msgpack")
    assert out.exists()


def test_a_persona_update_while_the_shared_persona_stops_is_kept_and_the_lpm_lives(
    open_mem,
) -> None:
    # A shared persona's LPM that stops between the registry lookup and the send (it is
    # passivating, or restarting) must not crash the sender: the update is applied (its
    # facts kept) as when the shared persona is not running at all (#41 item 14).
    import pykka

    from memoryos_actors.actors.protocol import CompletionDone

    mem = open_mem(MemoryConfig(**{**SMALL, "shared_agent_persona": True}))
    mem.add_turn("ann", "hi", "hello")
    mem.flush()
    shared_name = actor_names("@assistant:default")[2]
    live = mem.registry.require(shared_name)

    class Gone(pykka.ThreadingActor):
        pass

    dead = Gone.start()
    dead.stop()
    # What the LPM's lookup finds when the shared persona stops right after it.
    assert mem.registry.unregister(shared_name, live)
    mem.registry.register(shared_name, dead)
    lpm = mem.registry.require(actor_names("ann")[2])
    lpm.tell(
        CompletionDone(
            "persona_update",
            "s1|default",
            {
                "traits": [],
                "facts": ["User owns a red bicycle."],
                "agent_traits": ["The assistant speaks in short sentences."],
            },
            degraded=False,
            epoch=mem.user_epoch("ann"),
        )
    )
    mem.flush(timeout=30, user_id="ann")
    assert mem.registry.require(actor_names("ann")[2]) is lpm, "ann's LPM was not restarted"
    mem.registry.unregister(shared_name, dead)
    mem.registry.register(shared_name, live)
    assert [k.text for k in mem.retrieve("ann", "bicycle").kb] == ["User owns a red bicycle."]
