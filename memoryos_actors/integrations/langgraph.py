"""A LangGraph store backed by the memory (extra ``langgraph``).

::

    from langgraph.graph import StateGraph
    from memoryos_actors import MemoryOS
    from memoryos_actors.integrations.langgraph import MemoryStore

    mem = MemoryOS.open("./memdata")
    store = MemoryStore(mem)
    store.put(("alice", "memories"), "food", {"text": "Alice likes sushi"})
    store.search(("alice",), query="what does alice eat?")
    graph = StateGraph(State).add_node(...).compile(store=store)

How items are kept. A namespace belongs to one user of the memory: by default its first
label names the user (``("alice", "memories")`` is user ``alice``); ``user_of`` changes
that (:func:`user_at`: another label, a tenant's prefix, or a function of your own). An
item is a free-text memory of that user (``remember``), a fact marked as remembered, with
the item's namespace, key and ``created_at`` in its metadata (under ``"langgraph"``). Its
text is the readable text of the value (the strings in it, or the fields ``index`` names,
a line each; these are what a query is matched against) and one last line,
:data:`VALUE_MARK` and the value with its ``updated_at`` as JSON. So:

* A ``put`` of a new key remembers; a ``put`` of a key the namespace holds corrects that
  memory (``correct_memory``): ``created_at`` stays, and the memory's history keeps each
  earlier value (:meth:`MemoryStore.history`). A ``put`` of None deletes it
  (``delete_memory``) and checks that it is gone (:class:`DeleteNotVerified` if not).
* A ``search`` with a ``query`` ranks the items as ``retrieve`` ranks the user's facts: the
  ones it returns come first, best first, with its cosine as ``score`` and its ``why``
  (:class:`MemorySearchItem`); the others under the prefix follow, unscored, as
  LangGraph's own stores add items they have no vector for. Without a query: oldest
  first. ``filter`` compares the value's fields (``$eq``, ``$ne``, ``$gt``, ``$gte``,
  ``$lt``, ``$lte``, nested objects), then ``offset`` and ``limit`` apply.
* Items are memories like any other: retrieved for the user's chats, listed, exported
  and imported; they leave the knowledge base for the archive after ``kb_capacity`` newer
  facts and are still found there.
* One namespace never sees another's items: every operation reads only the users its
  namespace (or prefix) maps to and keeps only the items under it. A prefix that names no
  user (``()``, a wildcard where the user is) reads every user (``users``).

Operations run in the order given, each seeing the ones before it. The cost: reading or
writing an item lists the user's facts (``memories(kinds=["fact"])``, which reads the
whole user) once per ``batch``; ``bench/adapters_bench.py`` measures it. One ``batch``
of this object runs at a time (per event loop for ``abatch``); two processes writing one
new key at once may make two memories, of which the newer is read.

Importing this module imports ``langgraph`` (the store subclasses its ``BaseStore``);
``import memoryos_actors`` does not.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import weakref
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
)

from ..errors import MemoryOSError, UnknownMemory, UnknownUser
from ._bridge import call

if TYPE_CHECKING:
    from ..api import AsyncMemoryAPI, MemoryAPI
    from ..memories import Memory, MemoryEvent

__all__ = [
    "METADATA_KEY",
    "VALUE_MARK",
    "DeleteNotVerified",
    "MemorySearchItem",
    "MemoryStore",
    "user_at",
]

#: The line of an item's memory text that carries its value as JSON (the last such line;
#: JSON keeps it on one line).
VALUE_MARK = "[langgraph-item v1] "
#: The key of an item's memory metadata that holds its namespace, key and ``created_at``.
METADATA_KEY = "langgraph"

_T = TypeVar("_T")
Namespace = tuple[str, ...]
#: A namespace (or a prefix of one) -> the user that holds it, or None for a prefix that
#: does not name one user.
UserOf = Callable[[Namespace], str | None]


def user_at(label: int = 0, prefix: str = "") -> UserOf:
    """The mapping where label ``label`` of a namespace names the user, after ``prefix``
    (a tenant's, e.g. ``"acme:"``): ``user_at(1)`` maps ``("memories", "alice")`` to
    ``alice``. A namespace prefix too short to hold that label, or with the wildcard
    ``"*"`` there, names no user."""

    def user_of(namespace: Namespace) -> str | None:
        if len(namespace) <= label or namespace[label] == "*":
            return None
        return prefix + namespace[label]

    return user_of


class DeleteNotVerified(MemoryOSError):
    """A deleted item's memory could still be read after ``delete_memory`` returned."""


class MemorySearchItem(SearchItem):
    """A search result with where it came from: the memory's id (for ``memory_history``,
    ``get_memory``) and, when a query ranked it, ``retrieve``'s ``why``."""

    __slots__ = ("memory_id", "why")

    def __init__(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        created_at: datetime,
        updated_at: datetime,
        score: float | None = None,
        *,
        memory_id: str = "",
        why: str = "",
    ) -> None:
        super().__init__(namespace, key, value, created_at, updated_at, score)
        self.memory_id = memory_id
        self.why = why

    def dict(self) -> dict[str, Any]:
        return {**super().dict(), "memory_id": self.memory_id, "why": self.why}


@dataclass(frozen=True, slots=True)
class _Stored:
    """One item as its memory holds it; the value is read from the text when asked for
    (a listing holds many items, an operation usually wants few)."""

    memory_id: str
    namespace: Namespace
    key: str
    created_at: str
    text: str

    def item(self) -> Item:
        created_at = datetime.fromisoformat(self.created_at)
        value, updated_at = _value_of(self.text, created_at)
        return Item(
            value=value,
            key=self.key,
            namespace=self.namespace,
            created_at=created_at,
            updated_at=updated_at,
        )

    def found(self, score: float | None, why: str) -> MemorySearchItem:
        """The item as a search result."""
        created_at = datetime.fromisoformat(self.created_at)
        value, updated_at = _value_of(self.text, created_at)
        return MemorySearchItem(
            self.namespace,
            self.key,
            value,
            created_at,
            updated_at,
            score,
            memory_id=self.memory_id,
            why=why,
        )


def _stored(memory: Memory) -> _Stored | None:
    """The item ``memory`` holds, or None (a memory this store did not make)."""
    meta = (memory.metadata or {}).get(METADATA_KEY)
    if not isinstance(meta, dict):
        return None
    namespace, key, created = meta.get("namespace"), meta.get("key"), meta.get("created_at")
    if not (
        isinstance(namespace, list)
        and all(isinstance(label, str) for label in namespace)
        and isinstance(key, str)
        and isinstance(created, str)
    ):
        return None
    return _Stored(memory.memory_id, tuple(namespace), key, created, memory.text)


def _value_of(text: str, created_at: datetime) -> tuple[dict[str, Any], datetime]:
    """The value and ``updated_at`` in a memory's text. A text without them (corrected
    by hand through the API, say) is the value ``{"text": text}``, updated when created."""
    at = text.rfind(VALUE_MARK)
    if at == 0 or (at > 0 and text[at - 1] == "\n"):
        try:
            held = json.loads(text[at + len(VALUE_MARK) :])
        except ValueError:
            held = None
        if isinstance(held, dict) and isinstance(held.get("value"), dict):
            try:
                updated_at = datetime.fromisoformat(str(held.get("updated_at")))
            except ValueError:
                updated_at = created_at
            return held["value"], updated_at
    return {"text": text}, created_at


def _strings(value: Any) -> list[str]:
    """Every string in ``value``, depth first."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _text(value: Mapping[str, Any], fields: list[str] | None, updated_at: datetime) -> str:
    """An item's memory text: the readable lines of ``value`` (every string in it, or
    the text at each of ``fields``), then the value line."""
    if fields is None:
        lines = _strings(value)
    else:
        lines = [t for path in fields for t in get_text_at_path(value, path) if t.strip()]
    held = {"updated_at": updated_at.isoformat(), "value": dict(value)}
    payload = json.dumps(held, ensure_ascii=False, separators=(",", ":"))
    return "\n".join([*lines, VALUE_MARK + payload])


def _compare(found: Any, wanted: Any) -> bool:
    """Whether a value's field ``found`` matches a filter's ``wanted`` (JSONB-like, as
    LangGraph's stores compare)."""
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(found, op, operand) for op, operand in wanted.items())
        return isinstance(found, Mapping) and all(
            _compare(found.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(found, list | tuple)
            and len(found) == len(wanted)
            and all(_compare(f, w) for f, w in zip(found, wanted, strict=True))
        )
    return bool(found == wanted)


def _operator(found: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(found == operand)
    if op == "$ne":
        return bool(found != operand)
    ordered = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if op not in ordered:
        raise ValueError(f"unsupported filter operator {op!r}")
    try:
        return ordered[op](float(found), float(operand))
    except (TypeError, ValueError):
        return False  # a missing or non-numeric field is not in the range


def _matches(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    return all(_compare(value.get(k), v) for k, v in (conditions or {}).items())


def _does_match(condition: MatchCondition, namespace: Namespace) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


def _leading(conditions: Iterable[MatchCondition]) -> Namespace:
    """The labels every namespace matching ``conditions`` starts with (before a wildcard)."""
    for condition in conditions:
        if condition.match_type == "prefix":
            labels: list[str] = []
            for label in condition.path:
                if label == "*":
                    break
                labels.append(label)
            return tuple(labels)
    return ()


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Call:
    """One call a plan asks of the memory: ``mem.<method>(*args, **kwargs)``."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None


#: A plan sends the calls it needs and gets each one's answer back (an expected error of
#: the memory is thrown into it); it returns its result. One plan serves ``batch`` (which
#: calls a synchronous memory) and ``abatch`` (which awaits either facade).
_Plan = Generator[_Call, Any, Any]
#: The items of the users a batch has read: user -> (namespace, key) -> item.
_Listings = dict[str, dict[tuple[Namespace, str], _Stored]]


class MemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are memories of the users their namespaces
    map to (see the module's documentation).

    Args:
        mem: a running memory system: a :class:`~memoryos_actors.api.MemoryAPI` (``batch``
            calls it directly, ``abatch`` in worker threads) or an
            :class:`~memoryos_actors.api.AsyncMemoryAPI` (``abatch`` awaits it; ``batch``
            runs it in an event loop of its own, so not from a coroutine).
        user_of: namespace -> user id (default: the first label; see :func:`user_at`).
            For a namespace prefix it returns the user only when every namespace under the
            prefix maps to that user, else None.
        fields: what of a value a query is matched against when a ``put`` does not say
            (``index``): None for every string in the value, or LangGraph field paths
            (``"text"``, ``"notes[*].body"``).
        assistant_id: the assistant ``retrieve`` ranks for.
    """

    def __init__(
        self,
        mem: MemoryAPI | AsyncMemoryAPI,
        *,
        user_of: UserOf | None = None,
        fields: list[str] | None = None,
        assistant_id: str = "default",
    ) -> None:
        self._mem = mem
        self._user_of = user_of if user_of is not None else user_at(0)
        self._fields = None if fields in (None, ["$"]) else list(fields or [])
        self._assistant_id = assistant_id
        self._is_async = inspect.iscoroutinefunction(getattr(mem, "retrieve", None))
        self._lock = threading.Lock()
        self._alocks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    # ------------------------------------------------------------------ drivers

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; a result per op (see ``BaseStore.batch``)."""
        if self._is_async:
            return self._run(self.abatch(ops))
        with self._lock:
            result: list[Result] = self._drive(self._ops(list(ops)))
            return result

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order without blocking the event loop; a result per op."""
        loop = asyncio.get_running_loop()
        lock = self._alocks.setdefault(loop, asyncio.Lock())
        async with lock:
            result: list[Result] = await self._adrive(self._ops(list(ops)))
            return result

    def history(self, namespace: Namespace, key: str) -> list[MemoryEvent]:
        """The history of the item's memory (``memory_history``), oldest first: its
        creation and each correction (a ``put`` over it), with the values before and
        after; ``[]`` if the namespace holds no such key."""
        if self._is_async:
            return self._run(self.ahistory(namespace, key))
        with self._lock:
            events: list[MemoryEvent] = self._drive(self._history(namespace, key))
            return events

    async def ahistory(self, namespace: Namespace, key: str) -> list[MemoryEvent]:
        """:meth:`history`, without blocking the event loop."""
        events: list[MemoryEvent] = await self._adrive(self._history(namespace, key))
        return events

    @staticmethod
    def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
        """``coroutine`` run to its end in an event loop of its own (a synchronous call of
        a store over the asyncio facade), which a thread running a loop cannot do."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine)
        coroutine.close()
        raise RuntimeError(
            "a MemoryStore over an AsyncMemoryAPI is called synchronously from a coroutine: "
            "await its asynchronous methods (aget, aput, asearch, abatch) instead"
        )

    def _drive(self, plan: _Plan) -> Any:
        try:
            request = next(plan)
            while True:
                try:
                    answer = getattr(self._mem, request.method)(
                        *request.args, **(request.kwargs or {})
                    )
                except MemoryOSError as exc:
                    request = plan.throw(exc)
                else:
                    request = plan.send(answer)
        except StopIteration as done:
            return done.value
        finally:
            plan.close()

    async def _adrive(self, plan: _Plan) -> Any:
        try:
            request = next(plan)
            while True:
                try:
                    answer = await call(
                        self._mem, request.method, *request.args, **(request.kwargs or {})
                    )
                except MemoryOSError as exc:
                    request = plan.throw(exc)
                else:
                    request = plan.send(answer)
        except StopIteration as done:
            return done.value
        finally:
            plan.close()

    # ------------------------------------------------------------------ plans

    def _ops(self, ops: list[Op]) -> _Plan:
        listings: _Listings = {}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(op, listings)))
            elif isinstance(op, PutOp):
                yield from self._put(op, listings)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op, listings)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op, listings)))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    def _user(self, namespace: Namespace) -> str:
        if not namespace or not all(isinstance(x, str) and x for x in namespace):
            raise InvalidNamespaceError(f"namespace {namespace!r}: labels must be non-empty")
        user = self._user_of(tuple(namespace))
        if user is None:
            raise InvalidNamespaceError(f"namespace {namespace!r} maps to no user")
        return user

    def _listing(self, user: str, listings: _Listings) -> _Plan:
        """The items ``user`` holds (read once per batch)."""
        if user in listings:
            return listings[user]
        try:
            memories = yield _Call("memories", (user,), {"kinds": ["fact"]})
        except UnknownUser:  # nothing stored for the user yet
            memories = []
        items: dict[tuple[Namespace, str], _Stored] = {}
        for memory in memories:  # oldest first: a newer memory of one key wins
            stored = _stored(memory)
            # An item whose namespace this store maps to another user is not this user's
            # under this store's mapping (another tenant's prefix, say): never shown.
            if stored is not None and self._user_of(stored.namespace) == user:
                items[(stored.namespace, stored.key)] = stored
        listings[user] = items
        return items

    def _users(self, prefix: Namespace) -> _Plan:
        """The users the namespaces under ``prefix`` may belong to."""
        user = self._user_of(prefix) if prefix else None
        if user is not None:
            return [user]
        every: list[str] = yield _Call("users")
        return sorted(every)

    def _get(self, op: GetOp, listings: _Listings) -> _Plan:
        namespace = tuple(op.namespace)
        items = yield from self._listing(self._user(namespace), listings)
        stored = items.get((namespace, str(op.key)))
        return stored.item() if stored is not None else None

    def _put(self, op: PutOp, listings: _Listings) -> _Plan:
        namespace, key = tuple(op.namespace), str(op.key)
        user = self._user(namespace)
        items = yield from self._listing(user, listings)
        held = items.get((namespace, key))
        if op.value is None:
            if held is not None:
                yield from self._delete(user, held.memory_id)
                del items[(namespace, key)]
            return None
        now = _now()
        fields = self._fields if op.index is None else ([] if op.index is False else op.index)
        text = _text(op.value, fields, now)
        if held is not None:
            try:
                yield _Call("correct_memory", (user, held.memory_id, text))
            except UnknownMemory:
                pass  # deleted since the listing (by another writer): a new item
            else:
                items[(namespace, key)] = replace(held, text=text)
                return None
        created = now.isoformat()
        meta = {"namespace": list(namespace), "key": key, "created_at": created}
        memory_id = yield _Call("remember", (user, text), {"metadata": {METADATA_KEY: meta}})
        items[(namespace, key)] = _Stored(memory_id, namespace, key, created, text)
        return None

    def _delete(self, user: str, memory_id: str) -> _Plan:
        """``delete_memory``, then check the memory is gone."""
        try:
            yield _Call("delete_memory", (user, memory_id))
        except UnknownMemory:
            pass  # deleted since the listing (by another writer): checked below all the same
        try:
            yield _Call("get_memory", (user, memory_id))
        except UnknownMemory:
            return None
        raise DeleteNotVerified(f"memory {memory_id} of user {user!r} is still there")

    def _search(self, op: SearchOp, listings: _Listings) -> _Plan:
        prefix = tuple(op.namespace_prefix)
        found: dict[str, list[_Stored]] = {}
        for user in (yield from self._users(prefix)):
            items = yield from self._listing(user, listings)
            under = [
                s
                for s in items.values()
                if s.namespace[: len(prefix)] == prefix
                and (not op.filter or _matches(s.item().value, op.filter))
            ]
            if under:
                found[user] = under
        ranked: list[tuple[float, _Stored, str]] = []
        rest: list[_Stored] = []
        for user, under in found.items():
            hits: dict[str, tuple[float, str]] = {}
            if op.query:
                context = yield _Call(
                    "retrieve", (user, op.query), {"assistant_id": self._assistant_id}
                )
                # A fact's memory id is "fact:" and its knowledge-base entry id.
                for hit in context.kb:
                    hits.setdefault(f"fact:{hit.item_id}", (hit.score, hit.why))
            for stored in under:
                if stored.memory_id in hits:
                    score, why = hits[stored.memory_id]
                    ranked.append((score, stored, why))
                else:
                    rest.append(stored)
        ranked.sort(key=lambda hit: -hit[0])  # stable: ties keep the listing's order
        order: list[tuple[float | None, _Stored, str]] = [
            *ranked,
            *((None, stored, "") for stored in rest),
        ]
        return [
            stored.found(score, why)
            for score, stored, why in order[op.offset : op.offset + op.limit]
        ]

    def _list_namespaces(self, op: ListNamespacesOp, listings: _Listings) -> _Plan:
        conditions = tuple(op.match_conditions or ())
        namespaces: set[Namespace] = set()
        for user in (yield from self._users(_leading(conditions))):
            items = yield from self._listing(user, listings)
            namespaces.update(namespace for namespace, _key in items)
        kept = {ns for ns in namespaces if all(_does_match(c, ns) for c in conditions)}
        if op.max_depth is not None:
            kept = {ns[: op.max_depth] for ns in kept}
        return sorted(kept)[op.offset : op.offset + op.limit]

    def _history(self, namespace: Namespace, key: str) -> _Plan:
        namespace = tuple(namespace)
        user = self._user(namespace)
        items = yield from self._listing(user, {})
        held = items.get((namespace, str(key)))
        if held is None:
            return []
        events = yield _Call("memory_history", (user, held.memory_id))
        return events
