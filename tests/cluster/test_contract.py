"""The facade's contract, run against every backend (as pykka runs its suite per runtime).

The same calls must give the same results, return types and typed errors whether the
memory system runs in this process, as shards in this process, or as Ray shard processes.

Tests taking ``mem`` share one system over Ray (see ``tests/cluster/conftest.py``): each
uses user ids no other test uses and asserts nothing about users other than its own.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from backends import make_cluster, own_shards
from sysutil import SMALL, turn_text

from memoryos_actors import (
    AgentProfile,
    AsyncMemoryOS,
    DataDirLocked,
    ForgetReport,
    InvalidInput,
    ManualClock,
    Memory,
    MemoryConfig,
    MemoryContext,
    MemoryEvent,
    MemoryOS,
    SystemClosed,
    UnknownMemory,
    UnknownUser,
    UserProfile,
)
from memoryos_actors.cluster import shard_of


def _users_on_two_shards(stem: str = "") -> tuple[str, str]:
    """Two user ids, starting with ``stem``, that a 2-shard cluster places on different
    shards."""
    first = f"{stem}ann"
    other = next(
        f"{stem}ben{i}" for i in range(100) if shard_of(f"{stem}ben{i}", 2) != shard_of(first, 2)
    )
    return first, other


def test_add_turn_returns_sequential_page_ids(mem) -> None:
    assert [mem.add_turn("seq", *turn_text("seq", i)) for i in range(1, 6)] == [
        "p1",
        "p2",
        "p3",
        "p4",
        "p5",
    ]


def test_turns_are_kept_exactly_once_across_tiers_and_archive(mem) -> None:
    for i in range(1, 201):
        mem.add_turn("solo", *turn_text("solo", i))
    mem.flush()
    ids = mem.stored_page_ids("solo")
    assert [pid for pid, n in Counter(ids).items() if n > 1] == []
    assert set(ids) == {f"p{i}" for i in range(1, 201)}
    state = mem.user_state("solo")
    assert state.turns == 200 and len(state.stm) == 7
    assert len(state.segments) <= SMALL["mtm_capacity"]
    assert mem.archive("solo"), "a 12-segment MTM must have evicted something by now"


def test_retrieve_returns_a_memory_context_with_provenance(mem) -> None:
    for i in range(1, 50):
        mem.add_turn("r", *turn_text("r", i))
    mem.flush()
    ctx = mem.retrieve("r", "when does the orchestra rehearse the symphony?")
    assert isinstance(ctx, MemoryContext)
    assert [item.item_id for item in ctx.stm] == [f"p{i}" for i in range(43, 50)]
    assert ctx.mtm and ctx.mtm[0].item_id == "p15"
    assert all(item.tier == "mtm" and item.why for item in ctx.mtm)


def test_users_on_different_shards_never_see_each_others_turns(mem) -> None:
    # On the module's shared system over Ray (a fresh one costs two shard processes):
    # users of this test's own, so other tests' users are beside them, as in any system.
    ann, ben = _users_on_two_shards("iso-")
    for i in range(1, 30):
        mem.add_turn(ann, f"{ann} secret {i}: my locker code is {1000 + i}", "noted")
        mem.add_turn(ben, f"{ben} note {i}: my locker code is {5000 + i}", "noted")
    mem.flush()
    for user, other in ((ann, ben), (ben, ann)):
        text = mem.retrieve(user, "what is my locker code?").render()
        assert user in text and other not in text
    assert {ann, ben} <= set(mem.users())


def test_flush_of_one_user_places_its_pages(mem) -> None:
    first, other = _users_on_two_shards("flush-")
    for i in range(1, 41):
        mem.add_turn(first, *turn_text(first, i))
        mem.add_turn(other, *turn_text(other, i))
    mem.flush(user_id=first)
    state = mem.user_state(first)
    placed = {p.page_id for seg in state.segments for p in seg.pages}
    for rec in mem.archive(first):  # placed, then evicted
        pages = rec["segment"]["pages"] if rec["t"] == "segment" else [rec["page"]]
        placed.update(p["page_id"] for p in pages)
    assert {f"p{i}" for i in range(1, 34)} <= placed  # every page that left STM
    assert all(p.chain_id for p in state.stm)
    mem.flush(user_id="nobody-here")  # nothing live: returns at once
    with pytest.raises(InvalidInput):
        mem.flush(user_id="")


def test_hostile_input_gets_the_same_typed_errors(mem) -> None:
    for user, q, r in [
        ("", "q", "r"),
        ("h", 5, "r"),
        ("h", "q\x00", "r"),
        ("h", "\ud800", "r"),
        ("h", "", ""),
        (None, "q", "r"),
        (" h", "q", "r"),
    ]:
        with pytest.raises(InvalidInput):
            mem.add_turn(user, q, r)
    for ts in (float("nan"), -1.0, "yesterday"):
        with pytest.raises(InvalidInput):
            mem.add_turn("h", "q", "r", timestamp=ts)
    for key in ("", 7, "k" * 300):
        with pytest.raises(InvalidInput):
            mem.add_turn("h", "q", "r", turn_key=key)
    with pytest.raises(InvalidInput):
        mem.set_user_profile("h", "not a profile")
    with pytest.raises(UnknownUser):
        mem.user_state("nobody")
    assert mem.add_turn("h", "still fine", "yes") == "p1"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_reads_of_a_user_with_no_data_answer_unknown_user_and_write_nothing(
    open_mem, tmp_path: Path
) -> None:
    cfg = MemoryConfig(**{**SMALL, "fsync": "always"})
    mem = open_mem(cfg, sub="reads")
    mem.add_turn("ann", "I keep bees on the roof.", "How many hives?")
    mem.flush()
    data = tmp_path / "reads"
    before = {f for f in _files(data) if "nobody" in f}
    # retrieve answers an empty context (an agent's first message), writing nothing too.
    empty = mem.retrieve("nobody", "bees")
    assert empty.page_ids() == () and empty.kb == () and empty.render().count("bees") == 0
    assert mem.users() == ["ann"]
    reads = {
        "memories": lambda: mem.memories("nobody"),
        "get_memory": lambda: mem.get_memory("nobody", "page:p1"),
        "memory_history": lambda: mem.memory_history("nobody", "page:p1"),
        "user_state": lambda: mem.user_state("nobody"),
        "archive": lambda: mem.archive("nobody"),
        "stored_page_ids": lambda: mem.stored_page_ids("nobody"),
        "stats": lambda: mem.stats("nobody"),
        "export_user": lambda: mem.export_user("nobody", tmp_path / "nobody.json"),
        "delete_memory": lambda: mem.delete_memory("nobody", "page:p1"),
        "correct_memory": lambda: mem.correct_memory("nobody", "trait:openness", "high"),
    }
    for name, call in reads.items():
        with pytest.raises(UnknownUser):
            call()
            pytest.fail(f"{name} of a user with no data answered")
    assert mem.passivate("nobody") is False
    assert before == set() and not any("nobody" in f for f in _files(tmp_path))
    assert mem.users() == ["ann"]
    # A chat is a write: a new user is answered from an empty memory, and then exists.
    assert mem.chat("newbie", "Hello there, do you know me?")
    assert mem.users() == ["ann", "newbie"]
    mem.close()
    mem = open_mem(cfg, sub="reads")
    assert mem.users() == ["ann", "newbie"]
    assert mem.user_state("newbie").turns == 1


def test_no_memory_is_written_under_an_id_with_a_slash_or_control_character(mem) -> None:
    """One rule for ids (#46): an id a URL path cannot carry takes no new memory, on every
    backend, by every write; the message gives the way out for a user stored before."""
    for uid in ("a/b", "tab\there", "new\nline", "del\x7f"):
        with pytest.raises(InvalidInput, match="URL path") as refused:
            mem.add_turn(uid, "q", "r")
        assert "memoryos import FILE --as NEW_ID" in str(refused.value)
        with pytest.raises(InvalidInput, match="URL path"):
            mem.remember(uid, "a note")
        with pytest.raises(InvalidInput, match="URL path"):
            mem.set_user_profile(uid, UserProfile(name="Slash"))
        with pytest.raises(InvalidInput, match="URL path"):
            mem.set_agent_profile(uid, AgentProfile(role="helper"))
        with pytest.raises(InvalidInput, match="URL path"):
            mem.chat(uid, "hello")
    for assistant in ("bot/1", "bot\n"):
        with pytest.raises(InvalidInput, match="assistant_id .* URL path"):
            mem.add_turn("slash-free", "q", "r", assistant_id=assistant)
        with pytest.raises(InvalidInput, match="assistant_id .* URL path"):
            mem.chat("slash-free", "hello", assistant_id=assistant)
    assert not {"a/b", "slash-free"} & set(mem.users())
    # Everything else stays allowed: ':' (a tenant's prefix), spaces inside, any script.
    for uid in ("acme:ann", "zoë x", "名前", "a\\b"):
        assert mem.add_turn(uid, "q", "r") == "p1"


def test_dot_and_dot_dot_are_not_user_ids(mem) -> None:
    for uid in (".", ".."):
        with pytest.raises(InvalidInput, match="URL"):
            mem.add_turn(uid, "q", "r")
        with pytest.raises(InvalidInput):
            mem.set_user_profile(uid, UserProfile(name="Dot"))
        with pytest.raises(InvalidInput):
            mem.retrieve(uid, "q")
        with pytest.raises(InvalidInput):
            mem.forget_user(uid)
    assert mem.add_turn("...", "three dots are a name", "ok") == "p1"
    assert mem.add_turn("a.b", "so is this", "ok") == "p1"
    users = mem.users()
    assert {"...", "a.b"} <= set(users) and "." not in users and ".." not in users


def test_a_repeated_turn_key_is_answered_not_stored_twice(mem) -> None:
    first = mem.add_turn("idem", "hello once", "hi", turn_key="key-1")
    assert mem.add_turn("idem", "hello once", "hi", turn_key="key-1") == first
    assert mem.add_turn("idem", "another", "ok") == "p2"
    mem.flush()
    assert sorted(mem.stored_page_ids("idem")) == ["p1", "p2"]


def test_profiles_reach_retrieval(mem) -> None:
    mem.set_user_profile("q", UserProfile(name="Quinn", birth_year=1990))
    mem.set_agent_profile("q", AgentProfile(role="coach", character="direct"))
    ctx = mem.retrieve("q", "hello")
    assert ctx.lpm_profile.name == "Quinn" and ctx.agent_profile.role == "coach"


def test_a_remembered_note_is_retrieved_read_and_deleted_the_same(mem) -> None:
    mid = mem.remember("rem", "Rem's locker code is 4417.", metadata={"from": "form"})
    assert "Rem's locker code is 4417." in [i.text for i in mem.retrieve("rem", "locker code?").kb]
    note = mem.get_memory("rem", mid)
    assert (note.origin, note.metadata) == ("remembered", {"from": "form"})
    with pytest.raises(InvalidInput):
        mem.remember("rem", "x", metadata={"bad": float("nan")})
    mem.delete_memory("rem", mid)
    assert mid not in [m.memory_id for m in mem.memories("rem")]


def test_chat_answers_and_stores_the_turn(mem) -> None:
    mem.add_turn("c", "My dog is called Rufus.", "Nice name!")
    reply = mem.chat("c", "What is my dog called?")
    assert isinstance(reply, str) and reply
    mem.flush()
    assert mem.user_state("c").turns == 2


def test_chat_stream_gives_the_reply_in_pieces_and_stores_the_turn_once_at_the_end(mem) -> None:
    mem.add_turn("cs", "My dog is called Rufus.", "Nice name!")
    chats = mem.stats()["chats"]
    stream = mem.chat_stream("cs", "What is my dog called?")
    pieces = list(stream)
    assert len(pieces) > 1 and "Rufus" in "".join(pieces)
    assert stream.reply is not None and stream.reply.text == "".join(pieces)
    abandoned = mem.chat_stream("cs", "And my cat?")
    next(abandoned)
    abandoned.close()  # nothing stored for it
    with pytest.raises(InvalidInput):
        mem.chat_stream("cs", "")  # a bad argument raises at the call, on every backend
    mem.flush()
    assert mem.user_state("cs").turns == 2
    assert mem.stats()["chats"] == chats + 1


def test_stats_count_turns_and_latency(open_mem) -> None:
    mem = open_mem()
    for i in range(1, 41):
        mem.add_turn("m", *turn_text("m", i))
    mem.retrieve("m", "orchestra")
    mem.flush()
    st = mem.stats()
    assert st["turns"] == 40 and st["retrievals"] == 1
    assert st["add_turn_ms_p99"] >= st["add_turn_ms_p50"] > 0
    assert mem.stats("m")["turns"] == 40


def test_export_import_and_forget_work_across_shards(mem, tmp_path: Path) -> None:
    ann, ben = _users_on_two_shards("forget-")
    for i in range(1, 30):
        mem.add_turn(ann, *turn_text(ann, i))
        mem.add_turn(ben, *turn_text(ben, i))
    mem.flush()
    before = sorted(mem.stored_page_ids(ann))
    out = mem.export_user(ann, tmp_path / "ann.json")
    assert out.is_file()
    report = mem.forget_user(ann)
    assert isinstance(report, ForgetReport) and report.removed_files
    assert ann not in mem.users() and ben in mem.users()
    # Imported under a new id, which may live on the other shard.
    assert mem.import_user(out, user_id=ben + "-copy") == ben + "-copy"
    assert sorted(mem.stored_page_ids(ben + "-copy")) == before
    assert sorted(mem.stored_page_ids(ben)) == sorted(f"p{i}" for i in range(1, 30))
    with pytest.raises(InvalidInput):
        mem.import_user(out, user_id=ben)  # already has data


def test_single_memories_are_listed_deleted_corrected_and_exported_the_same(
    mem, tmp_path: Path
) -> None:
    ann, ben = _users_on_two_shards("single-")
    for user in (ann, ben):
        mem.add_turn(user, f"{user} says: my locker code is 4711", "noted")
        mem.add_turn(user, f"{user} likes green tea", "ok")
    pages = mem.memories(ann, kinds=["page"])
    assert all(isinstance(m, Memory) for m in pages)
    assert [m.memory_id for m in pages] == ["page:p1", "page:p2"]
    first = mem.memories(ann, kinds=["page"], limit=1)
    assert [m.memory_id for m in first] == ["page:p1"] and first.next_cursor
    rest = mem.memories(ann, kinds=["page"], limit=1, cursor=first.next_cursor)
    assert [m.memory_id for m in rest] == ["page:p2"] and rest.next_cursor is None
    with pytest.raises(InvalidInput):
        mem.memories(ann, cursor="nonsense")
    event = mem.delete_memory(ann, "page:p1")
    assert isinstance(event, MemoryEvent) and event.action == "deleted"
    with pytest.raises(UnknownMemory):
        mem.get_memory(ann, "page:p1")
    assert "4711" not in mem.retrieve(ann, "what is my locker code?").render()
    assert "4711" in mem.retrieve(ben, "what is my locker code?").render()
    mem.correct_memory(ann, "trait:sense_of_humor", "high")
    assert [e.action for e in mem.memory_history(ann, "trait:sense_of_humor")] == ["corrected"]
    out = mem.export_user(ann, tmp_path / "ann-edited.json")
    assert "4711" not in out.read_text()
    assert mem.import_user(out, user_id=ann + "-copy") == ann + "-copy"
    copy = {m.memory_id: m for m in mem.memories(ann + "-copy")}
    assert "page:p1" not in copy and copy["trait:sense_of_humor"].text == "high"
    assert [e.action for e in mem.memory_history(ann + "-copy", "page:p1")] == ["deleted"]


def test_passivated_users_come_back_with_their_turns(mem) -> None:
    for i in range(1, 20):
        mem.add_turn("pv", *turn_text("pv", i))
    mem.flush()
    assert "pv" in mem.active_users()
    assert mem.passivate("pv") is True
    assert "pv" not in mem.active_users()
    assert mem.user_state("pv").turns == 19


def test_turns_survive_close_and_reopen(open_mem) -> None:
    cfg = MemoryConfig(**{**SMALL, "fsync": "always"})
    mem = open_mem(cfg, sub="reopen")
    for i in range(1, 30):
        mem.add_turn("p", *turn_text("p", i))
    mem.close()
    mem = open_mem(cfg, sub="reopen")
    assert set(mem.stored_page_ids("p")) == {f"p{i}" for i in range(1, 30)}
    assert mem.add_turn("p", "after reopen", "ok") == "p30"


def test_second_open_of_the_same_data_dir_is_refused(
    open_mem, backend, request, tmp_path: Path
) -> None:
    open_mem(sub="locked")
    with pytest.raises(DataDirLocked):
        MemoryOS.open(
            tmp_path / "locked",
            MemoryConfig(**SMALL),
            cluster=make_cluster(backend, request, own_shards(backend)),  # as open_mem did
        )


def test_closed_system_refuses_calls(open_mem) -> None:
    mem = open_mem()
    mem.add_turn("u", "q", "r")
    mem.close()
    with pytest.raises(SystemClosed):
        mem.add_turn("u", "q", "r")
    mem.close()  # idempotent


def test_async_facade_serves_every_backend(backend, request, tmp_path: Path) -> None:
    # One Ray shard, as open_mem opens (its docstring says why); two local shards.
    async def run() -> list[str]:
        mem = await AsyncMemoryOS.open(
            tmp_path,
            MemoryConfig(**SMALL),
            clock=ManualClock(1_700_000_000.0),
            cluster=make_cluster(backend, request, own_shards(backend)),
        )
        try:
            ids = await asyncio.gather(
                *(mem.add_turn(f"a{n}", f"hello from {n}", "hi") for n in range(20))
            )
            again = await mem.add_turn("a3", "hello from 3", "hi", turn_key="k3")
            assert again == "p2"
            assert "hello from 7" in (await mem.retrieve("a7", "hello")).render()
            nobody = await mem.retrieve("nobody", "hello")  # empty, and nobody is not created
            assert nobody.page_ids() == () and nobody.kb == ()
            await mem.flush(timeout=60.0, user_id="a7")
            assert len(await mem.users()) == 20
            return list(ids)
        finally:
            await mem.close()

    assert asyncio.run(run()) == ["p1"] * 20


def test_the_sharded_facade_has_every_public_method_of_memoryos_with_its_signature() -> None:
    import inspect

    from memoryos_actors.cluster import ClusterMemoryOS

    def params(fn) -> list[tuple[str, object, object]]:
        sig = inspect.signature(fn)
        return [(p.name, p.kind, p.default) for p in sig.parameters.values()]

    public = sorted(n for n in dir(MemoryOS) if not n.startswith("_") and n != "open")
    missing = [n for n in public if not hasattr(ClusterMemoryOS, n)]
    assert missing == []
    differ = [
        n for n in public if params(getattr(MemoryOS, n)) != params(getattr(ClusterMemoryOS, n))
    ]
    assert differ == []
