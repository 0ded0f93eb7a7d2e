"""The LangGraph store (extra ``langgraph``), against the real ``langgraph``: its ops through
``batch``/``abatch`` and ``BaseStore``'s documented methods, and a ``StateGraph`` compiled
with ``store=`` whose node reads and writes memories, run with a fake chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from sysutil import SMALL

from memoryos_actors import AsyncMemoryOS, ManualClock, MemoryConfig, MemoryOS
from memoryos_actors.errors import UnknownMemory
from memoryos_actors.integrations.langgraph import (
    METADATA_KEY,
    VALUE_MARK,
    DeleteNotVerified,
    MemorySearchItem,
    MemoryStore,
    user_at,
)

ALICE = ("alice", "memories")


def _facts(mem: MemoryOS, user: str) -> list[Any]:
    return list(mem.memories(user, kinds=["fact"]))


def test_every_op_kind_runs_in_one_batch_in_order(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    assert isinstance(store, BaseStore)
    results = store.batch(
        [
            GetOp(ALICE, "food"),
            PutOp(ALICE, "food", {"text": "Alice likes sushi", "stars": 4}),
            PutOp(("alice", "prefs"), "lang", {"text": "Alice prefers Portuguese"}),
            GetOp(ALICE, "food"),
            SearchOp(("alice",), query="sushi"),
            ListNamespacesOp(),
            PutOp(ALICE, "food", None),
            GetOp(ALICE, "food"),
        ]
    )
    assert results[0] is None  # each op sees the ones before it
    assert results[1] is None and results[2] is None
    got = results[3]
    assert isinstance(got, Item) and got.value == {"text": "Alice likes sushi", "stars": 4}
    assert (got.namespace, got.key) == (ALICE, "food")
    found = results[4]
    assert isinstance(found, list) and all(isinstance(i, Item) for i in found)
    assert [(i.namespace, i.key) for i in found if isinstance(i, Item)] == [
        (ALICE, "food"),
        (("alice", "prefs"), "lang"),
    ]
    assert results[5] == [ALICE, ("alice", "prefs")]
    assert results[6] is None and results[7] is None
    # Each item is a remembered memory of user "alice", carrying its namespace and key.
    [lang] = _facts(mem, "alice")
    assert lang.origin == "remembered"
    assert lang.metadata[METADATA_KEY]["namespace"] == ["alice", "prefs"]
    assert lang.metadata[METADATA_KEY]["key"] == "lang"
    assert lang.text.splitlines()[0] == "Alice prefers Portuguese"
    assert lang.text.splitlines()[-1].startswith(VALUE_MARK)


def test_a_second_put_of_a_key_is_a_correction_with_history(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    store.put(ALICE, "food", {"text": "Alice likes sushi"})
    first = store.get(ALICE, "food")
    store.put(ALICE, "food", {"text": "Alice likes ramen now"})
    second = store.get(ALICE, "food")
    assert first is not None and second is not None
    assert second.value == {"text": "Alice likes ramen now"}
    assert second.created_at == first.created_at  # kept from the first put
    assert second.updated_at >= first.updated_at and first.updated_at == first.created_at
    [fact] = _facts(mem, "alice")  # one memory, corrected, not a second one
    assert fact.edited
    history = store.history(ALICE, "food")
    assert history == mem.memory_history("alice", fact.memory_id)
    assert [e.action for e in history] == ["created", "corrected"]
    assert "sushi" in str(history[1].old) and "ramen" in str(history[1].new)
    # retrieve (and so every chat of the user) now finds the new value, not the old one
    texts = [k.text for k in mem.retrieve("alice", "what food does alice like").kb]
    assert any("ramen" in t for t in texts) and not any("sushi" in t for t in texts)
    assert store.history(ALICE, "nothing") == []


def test_a_put_of_none_is_a_verified_delete(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    store.put(ALICE, "food", {"text": "Alice likes sushi"})
    [fact] = _facts(mem, "alice")
    store.delete(ALICE, "food")
    assert store.get(ALICE, "food") is None
    with pytest.raises(UnknownMemory):
        mem.get_memory("alice", fact.memory_id)
    assert [e.action for e in mem.memory_history("alice", fact.memory_id)] == ["deleted"]
    assert store.search(("alice",), query="sushi") == []
    store.delete(ALICE, "food")  # a key the namespace does not hold: nothing to do

    class DeleteDoesNothing:
        """A memory whose delete_memory answers but deletes nothing."""

        def __init__(self, inner: MemoryOS) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            if name == "delete_memory":
                return lambda user_id, memory_id: None
            return getattr(self._inner, name)

    store.put(ALICE, "food", {"text": "Alice likes sushi"})
    broken = MemoryStore(DeleteDoesNothing(mem))  # type: ignore[arg-type]
    with pytest.raises(DeleteNotVerified):
        broken.delete(ALICE, "food")


class Racing:
    """A memory where another writer deletes the memory an edit is about just before the
    edit arrives (correct_memory and delete_memory then find nothing)."""

    def __init__(self, inner: MemoryOS) -> None:
        self._inner = inner

    def correct_memory(self, user_id: str, memory_id: str, value: str) -> Any:
        self._inner.delete_memory(user_id, memory_id)
        return self._inner.correct_memory(user_id, memory_id, value)

    def delete_memory(self, user_id: str, memory_id: str) -> Any:
        self._inner.delete_memory(user_id, memory_id)
        return self._inner.delete_memory(user_id, memory_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_item_another_writer_deleted_meanwhile_is_put_anew_or_counted_gone(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    racing = MemoryStore(Racing(mem))  # type: ignore[arg-type]
    store.put(ALICE, "food", {"text": "Alice likes sushi"})
    racing.put(ALICE, "food", {"text": "Alice likes ramen"})
    assert store.get(ALICE, "food").value == {"text": "Alice likes ramen"}  # type: ignore[union-attr]
    [fact] = _facts(mem, "alice")
    assert [e.action for e in mem.memory_history("alice", fact.memory_id)] == ["created"]
    racing.delete(ALICE, "food")
    assert store.get(ALICE, "food") is None


def test_a_memory_corrected_through_the_api_reads_back_as_its_text(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    store.put(ALICE, "food", {"text": "Alice likes sushi"})
    [fact] = _facts(mem, "alice")
    mem.correct_memory("alice", fact.memory_id, "Alice is vegetarian")  # say, on the memory page
    item = store.get(ALICE, "food")
    assert item is not None and item.value == {"text": "Alice is vegetarian"}
    assert item.updated_at == item.created_at


def test_one_namespace_never_sees_another_s_items(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    store.put(ALICE, "cat", {"text": "My cat is called Tom"})
    store.put(("alice", "work"), "job", {"text": "I am a nurse"})
    store.put(("bob", "memories"), "cat", {"text": "My cat is called Felix"})
    # Another user (bob) and another namespace of the same user (alice/work).
    assert store.get(("bob", "memories"), "cat").value["text"].endswith("Felix")  # type: ignore[union-attr]
    assert store.get(("alice", "work"), "cat") is None
    for query in (None, "what is my cat called"):
        bob = store.search(("bob",), query=query)
        assert [i.value["text"] for i in bob] == ["My cat is called Felix"]
        work = store.search(("alice", "work"), query=query)
        assert [i.key for i in work] == ["job"]
        everything = store.search((), query=query)
        assert {i.key for i in everything} == {"cat", "job"} and len(everything) == 3
    assert store.list_namespaces(prefix=("bob",)) == [("bob", "memories")]
    assert {f.metadata[METADATA_KEY]["key"] for f in _facts(mem, "bob")} == {"cat"}
    # Two tenants over one memory: each store maps namespaces to its own users.
    acme = MemoryStore(mem, user_of=user_at(0, prefix="acme:"))
    globex = MemoryStore(mem, user_of=user_at(0, prefix="globex:"))
    acme.put(ALICE, "cat", {"text": "Acme's Alice has a cat called Mittens"})
    assert globex.get(ALICE, "cat") is None and globex.search(()) == []
    assert globex.list_namespaces() == []
    assert [i.value["text"] for i in acme.search((), query="cat")] == [
        "Acme's Alice has a cat called Mittens"
    ]
    assert store.get(ALICE, "cat").value["text"] == "My cat is called Tom"  # type: ignore[union-attr]
    assert "acme:alice" in mem.users()


def test_a_query_ranks_by_retrieve_with_its_why_then_filter_limit_and_offset(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    values = {
        "k1": {"text": "The granite ridge above the glacier lake", "stars": 5, "tag": "hike"},
        "k2": {"text": "Sourdough bread needs a long cold proof", "stars": 3, "tag": "food"},
        "k3": {"text": "Ramen broth simmers for twelve hours", "stars": 4, "tag": "food"},
        "k4": {"text": "A cello sonata in the evening", "stars": 2, "tag": "music"},
    }
    for key, value in values.items():
        store.put(ALICE, key, value)
    found = store.search(ALICE, query="ramen broth simmers")
    assert found[0].key == "k3"
    assert all(isinstance(i, MemorySearchItem) for i in found)
    top = found[0]
    assert isinstance(top, MemorySearchItem)
    assert top.score is not None and top.why.startswith("fact cos=")
    assert top.memory_id.startswith("fact:")
    scores = [i.score for i in found if i.score is not None]
    assert scores == sorted(scores, reverse=True) and len(found) == 4
    assert top.dict()["why"] == top.why
    # No query: every item under the prefix, oldest first, unscored.
    assert [i.key for i in store.search(ALICE)] == ["k1", "k2", "k3", "k4"]
    assert all(i.score is None for i in store.search(ALICE))
    # Filters on the value's fields: equality, operators, several at once.
    assert [i.key for i in store.search(ALICE, filter={"tag": "food"})] == ["k2", "k3"]
    assert [i.key for i in store.search(ALICE, filter={"stars": {"$gte": 4}})] == ["k1", "k3"]
    assert [i.key for i in store.search(ALICE, filter={"stars": {"$lt": 3}})] == ["k4"]
    assert [i.key for i in store.search(ALICE, filter={"tag": {"$ne": "food"}})] == ["k1", "k4"]
    both = store.search(ALICE, query="bread", filter={"tag": "food", "stars": {"$gt": 2}})
    assert [i.key for i in both][0] == "k2" and {i.key for i in both} == {"k2", "k3"}
    # limit and offset page the same order.
    assert [i.key for i in store.search(ALICE, limit=2)] == ["k1", "k2"]
    assert [i.key for i in store.search(ALICE, limit=2, offset=2)] == ["k3", "k4"]
    ranked = [i.key for i in store.search(ALICE, query="ramen broth")]
    paged = [i.key for i in store.search(ALICE, query="ramen broth", limit=2, offset=1)]
    assert paged == ranked[1:3]


def test_list_namespaces_matches_prefix_suffix_wildcards_depth_and_pages(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem)
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("x", "b", "f"),
    ]:
        store.put(namespace, "k", {"text": "/".join(namespace)})
    # The example of BaseStore.list_namespaces' documentation.
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("x", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("*", "b"), suffix=("f",)) == [
        ("a", "b", "f"),
        ("x", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("d", "*")) == [
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
    ]
    assert store.list_namespaces(max_depth=1) == [("a",), ("x",)]
    every = store.list_namespaces()
    assert len(every) == 6 and every == sorted(every)
    assert store.list_namespaces(limit=2, offset=1) == every[1:3]
    conditions = (MatchCondition("prefix", ("a", "c")),)
    assert store.batch([ListNamespacesOp(conditions)]) == [[("a", "c", "f")]]


def test_namespaces_map_onto_users_as_configured(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem()
    # LangGraph's documentation often puts the user second: ("memories", user_id).
    store = MemoryStore(mem, user_of=user_at(1))
    store.put(("memories", "alice"), "k", {"text": "Alice's note"})
    store.put(("memories", "bob"), "k", {"text": "Bob's note"})
    assert sorted(mem.users()) == ["alice", "bob"]
    assert len(store.search(("memories",))) == 2  # a prefix without the user: every user
    assert [i.value["text"] for i in store.search(("memories", "bob"))] == ["Bob's note"]
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories",), "k", {"text": "whose?"})  # names no user
    with pytest.raises(InvalidNamespaceError):
        MemoryStore(mem).put((), "k", {"text": "x"})


def test_what_a_query_is_matched_against_follows_index_and_fields(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    store = MemoryStore(mem, fields=["title"])
    value = {"title": "Glacier hike", "body": "granite ridge", "tags": ["lake", "cold"]}
    store.put(ALICE, "default", value)  # the store's fields
    store.put(ALICE, "all", value, index=["body", "tags[*]"])
    store.put(ALICE, "none", value, index=False)
    first_lines = {
        f.metadata[METADATA_KEY]["key"]: f.text.splitlines()[:-1] for f in _facts(mem, "alice")
    }
    assert first_lines == {
        "default": ["Glacier hike"],
        "all": ["granite ridge", "lake", "cold"],
        "none": [],
    }
    assert all(store.get(ALICE, k).value == value for k in first_lines)  # type: ignore[union-attr]
    everything = MemoryStore(mem)  # default: every string in the value
    everything.put(("bob",), "k", value)
    [bob] = _facts(mem, "bob")
    assert bob.text.splitlines()[:-1] == ["Glacier hike", "granite ridge", "lake", "cold"]


def test_items_that_left_for_the_archive_are_still_read_corrected_and_found(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    store = MemoryStore(mem)
    for i, text in enumerate(["apples are red", "bananas are yellow", "cherries are dark"]):
        store.put(ALICE, f"k{i}", {"text": text})
    mem.flush()
    assert [f.tier for f in _facts(mem, "alice")][0] == "archive"
    assert store.get(ALICE, "k0").value == {"text": "apples are red"}  # type: ignore[union-attr]
    store.put(ALICE, "k0", {"text": "apples are green"})
    assert store.get(ALICE, "k0").value == {"text": "apples are green"}  # type: ignore[union-attr]
    top = store.search(ALICE, query="green apples")[0]
    assert top.key == "k0" and isinstance(top, MemorySearchItem) and "archive" in top.why


def test_items_persist_across_a_reopen_of_the_data_directory(tmp_path: Path) -> None:
    config = MemoryConfig(**SMALL)
    with MemoryOS.open(tmp_path, config, clock=ManualClock(1.7e9)) as mem:
        store = MemoryStore(mem)
        store.put(ALICE, "food", {"text": "Alice likes sushi"})
        store.put(ALICE, "food", {"text": "Alice likes ramen"})
        store.put(("alice", "work"), "job", {"text": "Alice is a nurse", "since": 2019})
        before = store.search(("alice",))
    with MemoryOS.open(tmp_path, config, clock=ManualClock(1.8e9)) as mem:
        store = MemoryStore(mem)
        after = store.search(("alice",))
        assert [i.dict() for i in after] == [i.dict() for i in before]
        assert store.get(ALICE, "food").value == {"text": "Alice likes ramen"}  # type: ignore[union-attr]
        assert [e.action for e in store.history(ALICE, "food")] == ["created", "corrected"]
        assert store.list_namespaces() == [ALICE, ("alice", "work")]
        assert store.search(("alice",), query="nurse")[0].key == "job"


def test_items_travel_in_a_user_export(tmp_path: Path) -> None:
    config = MemoryConfig(**SMALL)
    with MemoryOS.open(tmp_path / "a", config, clock=ManualClock(1.7e9)) as mem:
        store = MemoryStore(mem)
        store.put(ALICE, "food", {"text": "Alice likes sushi"})
        store.put(ALICE, "food", {"text": "Alice likes ramen"})
        before = store.get(ALICE, "food")
        exported = mem.export_user("alice", tmp_path / "alice.export")
    with MemoryOS.open(tmp_path / "b", config, clock=ManualClock(1.8e9)) as mem:
        assert mem.import_user(exported) == "alice"
        assert MemoryStore(mem).get(ALICE, "food") == before


def test_abatch_over_either_facade(tmp_path: Path) -> None:
    config = MemoryConfig(**SMALL)

    async def scenario(store: MemoryStore) -> list[Any]:
        await store.aput(ALICE, "food", {"text": "Alice likes sushi"})
        await store.aput(ALICE, "food", {"text": "Alice likes ramen"})
        await store.aput(("alice", "work"), "job", {"text": "Alice is a nurse"})
        got = await store.aget(ALICE, "food")
        found = await store.asearch(("alice",), query="nurse")
        spaces = await store.alist_namespaces(prefix=("alice",))
        history = await store.ahistory(ALICE, "food")
        await store.adelete(ALICE, "food")
        gone = await store.aget(ALICE, "food")
        return [got.value if got else None, found[0].key, spaces, len(history), gone]

    expected = [{"text": "Alice likes ramen"}, "job", [ALICE, ("alice", "work")], 2, None]
    with MemoryOS.open(tmp_path / "sync", config, clock=ManualClock(1.7e9)) as mem:
        assert asyncio.run(scenario(MemoryStore(mem))) == expected  # worker threads

    async def over_async() -> list[Any]:
        amem = await AsyncMemoryOS.open(tmp_path / "async", config, clock=ManualClock(1.7e9))
        try:
            got = await scenario(MemoryStore(amem))
            # The synchronous batch over the asyncio facade, from a thread without a loop.
            store = MemoryStore(amem)
            await asyncio.to_thread(store.put, ALICE, "k", {"text": "from a thread"})
            item = await asyncio.to_thread(store.get, ALICE, "k")
            return [*got, item.value if item else None]
        finally:
            await amem.close()

    assert asyncio.run(over_async()) == [*expected, {"text": "from a thread"}]

    async def sync_call_in_a_coroutine() -> None:
        amem = await AsyncMemoryOS.open(tmp_path / "async", config, clock=ManualClock(1.7e9))
        try:
            with pytest.raises(RuntimeError, match="await its asynchronous methods"):
                MemoryStore(amem).get(ALICE, "k")
        finally:
            await amem.close()

    asyncio.run(sync_call_in_a_coroutine())


# --------------------------------------------------------------------------- a graph


@dataclass
class Context:
    user_id: str


class State(TypedDict):
    messages: list[AnyMessage]


class Prompts(BaseCallbackHandler):
    """Keeps the messages each chat model call was given."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any
    ) -> None:
        self.seen.extend(messages)


def _graph(model: GenericFakeChatModel, store: BaseStore, *, asynchronous: bool = False) -> Any:
    """One node: it remembers what the user asks it to (a store put), searches the user's
    memories for the message (a store search) and hands them to the model; a coroutine
    (``aput``, ``asearch``) with ``asynchronous``."""

    def prompt(found: list[Any]) -> SystemMessage:
        notes = "\n".join(f"- {i.value['text']}" for i in found)
        return SystemMessage(f"What you remember about the user:\n{notes}")

    def chat(state: State, runtime: Runtime[Context]) -> dict[str, list[AnyMessage]]:
        store = runtime.store
        assert store is not None
        namespace = (runtime.context.user_id, "memories")
        text = str(state["messages"][-1].content)
        if text.lower().startswith("remember:"):
            key = f"m{len(store.search(namespace, limit=1000))}"
            store.put(namespace, key, {"text": text.split(":", 1)[1].strip()})
        found = store.search(namespace, query=text, limit=3)
        reply = model.invoke([prompt(found), *state["messages"]])
        return {"messages": [*state["messages"], reply]}

    async def achat(state: State, runtime: Runtime[Context]) -> dict[str, list[AnyMessage]]:
        store = runtime.store
        assert store is not None
        namespace = (runtime.context.user_id, "memories")
        text = str(state["messages"][-1].content)
        if text.lower().startswith("remember:"):
            key = f"m{len(await store.asearch(namespace, limit=1000))}"
            await store.aput(namespace, key, {"text": text.split(":", 1)[1].strip()})
        found = await store.asearch(namespace, query=text, limit=3)
        reply = await model.ainvoke([prompt(found), *state["messages"]])
        return {"messages": [*state["messages"], reply]}

    builder = StateGraph(State, context_schema=Context)
    builder.add_node("chat", achat if asynchronous else chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    return builder.compile(store=store)


def test_a_state_graph_node_reads_and_writes_memories_through_the_store(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    prompts = Prompts()
    replies = iter(
        [AIMessage("Noted."), AIMessage("Your cat is called Tom."), AIMessage("No idea.")]
    )
    model = GenericFakeChatModel(messages=replies, callbacks=[prompts])
    graph = _graph(model, MemoryStore(mem))

    def ask(user: str, text: str) -> str:
        out = graph.invoke({"messages": [HumanMessage(text)]}, context=Context(user))
        return str(out["messages"][-1].content)

    assert ask("alice", "Remember: my cat is called Tom") == "Noted."
    assert ask("alice", "What is my cat called?") == "Your cat is called Tom."
    assert ask("bob", "What is my cat called?") == "No idea."
    # The model was handed alice's memory in her second run, and nothing of it in bob's.
    assert "- my cat is called Tom" in str(prompts.seen[1][0].content)
    assert "Tom" not in str(prompts.seen[2][0].content)
    # What the node stored is a memory of alice like any other.
    [fact] = _facts(mem, "alice")
    assert fact.origin == "remembered" and fact.text.startswith("my cat is called Tom\n")
    assert "bob" not in mem.users()  # a read for a user with no data writes nothing


def test_a_state_graph_runs_asynchronously_over_the_asyncio_facade(tmp_path: Path) -> None:
    prompts = Prompts()
    replies = iter([AIMessage("Noted."), AIMessage("In Porto.")])
    model = GenericFakeChatModel(messages=replies, callbacks=[prompts])

    async def scenario() -> list[str]:
        amem = await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL), clock=ManualClock(1.7e9))
        try:
            graph = _graph(model, MemoryStore(amem), asynchronous=True)
            out = []
            for text in ("Remember: I live in Porto", "Where do I live?"):
                state = await graph.ainvoke(
                    {"messages": [HumanMessage(text)]}, context=Context("alice")
                )
                out.append(str(state["messages"][-1].content))
            return out
        finally:
            await amem.close()

    assert asyncio.run(scenario()) == ["Noted.", "In Porto."]
    assert "- I live in Porto" in str(prompts.seen[1][0].content)
