"""An OpenAI Agents SDK ``Session`` backed by a user's memory (extra ``openai-agents``).

::

    from agents import Agent, Runner
    from memoryos_actors import MemoryOS
    from memoryos_actors.integrations.openai_agents import MemorySession, memory_instructions

    mem = MemoryOS.open("./memdata")
    agent = Agent(name="Assistant", instructions=memory_instructions(mem, "Be brief."))
    session = MemorySession("alice", mem)
    await Runner.run(agent, "My cat is called Tom.", session=session)

How the session's items are kept. A session is one user of the memory (``session_id``,
after an optional ``prefix`` such as a tenant's ``"acme:"``), and its items are that
user's pages, in the order the pages were stored. The items of one ``add_items`` call are
cut into exchanges, a new one at each user message; each exchange is one turn
(``add_turn``): its ``query`` is the user's text, its ``response`` the readable text of the
other items (the assistant's messages, each tool call and tool output on a line), followed
by one last line, :data:`ITEMS_MARK` and the exchange's items as JSON. So:

* ``get_items`` gives back exactly the items given (the SDK compares what it reads back with
  what it wrote when it resumes a run), in order, also after the pages left short-term
  memory for mid-term memory or the archive (``memories(kinds=["page"])`` lists them all,
  oldest first). A page stored by other means (``chat``, ``add_turn``) reads back as a
  user message and an assistant message.
* Every exchange is a page like any other: retrieved by ``retrieve`` (the readable text
  first), summarised, deletable with ``delete_memory``, exported and imported.
* The SDK stores a run's input before the model answers, and the run's new items after:
  items that do not start with a user message join the session's last exchange, whose
  page is stored again with them, then deleted (``delete_memory``, a verified delete; its
  history keeps that it was deleted). So a question and its answer are one page.
* ``pop_item`` stores the rest of the last exchange again as a new last page and deletes
  the old one; ``clear_session`` forgets the user (``forget_user``).
* One writer per session at a time (an ``asyncio.Lock`` in the object serialises this
  object's changes; two processes writing one session may interleave their exchanges).

The cost: ``get_items`` reads the user's page list (``memories``), which reads the whole
user; ``bench/adapters_bench.py`` measures it. A query or response is at most
``max_text_bytes`` (64 KiB by default): a bigger exchange is refused with ``InvalidInput``.

The module imports nothing from the SDK: a session is any object with the ``Session``
protocol's members (the SDK asks third-party sessions to implement the protocol rather
than subclass its ABC).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, UnknownUser
from ._bridge import call

if TYPE_CHECKING:
    from ..api import AsyncMemoryAPI, MemoryAPI

__all__ = ["ITEMS_MARK", "MemorySession", "memory_instructions"]

#: The line of a page's response that carries the exchange's items as JSON (the last
#: such line of the response; JSON keeps it on one line).
ITEMS_MARK = "[agents-session-items v1] "

Item = dict[str, Any]


def _text_of(content: object) -> str:
    """The text of a message's ``content``: a string, or a list of parts with ``text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text") or part.get("refusal")
                if isinstance(text, str):
                    texts.append(text)
        return "\n".join(texts)
    return ""


def _is_user_message(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _readable(item: Mapping[str, Any]) -> str:
    """One line (or a few) a reader, and retrieval, can use for a non-user item."""
    kind = item.get("type", "message")
    if kind == "message":
        return _text_of(item.get("content"))
    if kind == "function_call":
        return f"tool call {item.get('name')}({item.get('arguments', '')})"
    if kind == "function_call_output":
        output = item.get("output")
        return f"tool output: {output if isinstance(output, str) else _text_of(output)}"
    return f"[{kind}]"


def _exchanges(items: Sequence[Item]) -> list[list[Item]]:
    """``items`` cut before each user message (the first exchange may have none)."""
    out: list[list[Item]] = []
    for item in items:
        if not out or _is_user_message(item):
            out.append([])
        out[-1].append(item)
    return out


def encode(exchange: Sequence[Item]) -> tuple[str, str]:
    """The (query, response) of the turn that stores ``exchange``."""
    query = _text_of(exchange[0].get("content")) if _is_user_message(exchange[0]) else ""
    rest = exchange[1:] if _is_user_message(exchange[0]) else exchange
    lines = [line for line in (_readable(item) for item in rest) if line]
    payload = json.dumps(list(exchange), ensure_ascii=False, separators=(",", ":"))
    return query, "\n".join([*lines, ITEMS_MARK + payload])


def _stored_items(response: str) -> list[Item] | None:
    """The items :func:`encode` put in ``response``, or None if it holds none."""
    at = response.rfind(ITEMS_MARK)
    if at == 0 or (at > 0 and response[at - 1] == "\n"):
        try:
            items = json.loads(response[at + len(ITEMS_MARK) :])
        except ValueError:
            return None
        if isinstance(items, list) and all(isinstance(i, dict) for i in items):
            return items
    return None


def decode(query: str, response: str) -> list[Item]:
    """The items a page holds: those :func:`encode` stored, or (a page stored otherwise) a
    user message and an assistant message."""
    items = _stored_items(response)
    if items is not None:
        return items
    out: list[Item] = []
    if query:
        out.append({"role": "user", "content": query})
    if response:
        out.append({"role": "assistant", "content": response})
    return out


class MemorySession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) whose items are
    the pages of one user of ``mem`` (see the module's documentation for the format).

    Args:
        session_id: the SDK's session id.
        mem: a running memory system, synchronous (its calls run in a worker thread) or
            asynchronous.
        prefix: put before ``session_id`` to make the user id (a tenant, e.g.
            ``"acme:"``), so two tenants' sessions of one id are two users.
        assistant_id: the assistant the turns are stored for.
    """

    #: The SDK reads this; None: its defaults.
    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        mem: MemoryAPI | AsyncMemoryAPI,
        *,
        prefix: str = "",
        assistant_id: str = "default",
    ) -> None:
        self.session_id = session_id
        self.user_id = prefix + session_id
        self.assistant_id = assistant_id
        self._mem = mem
        # One change at a time through this object: pop_item reads, deletes and stores.
        self._lock = asyncio.Lock()

    async def _pages(self) -> list[Any]:
        try:
            listing = await call(self._mem, "memories", self.user_id, kinds=["page"])
        except UnknownUser:
            # A session with nothing stored yet (or cleared). Once `memories` of a user
            # with no data answers empty (#44 item 4), this stays as a guard.
            return []
        return list(listing)

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The session's items, oldest first; with ``limit``, the latest ``limit``."""
        items = [item for page in await self._pages() for item in decode(page.query, page.response)]
        if limit is not None:
            return items[-limit:] if limit > 0 else []
        return items

    async def add_items(self, items: list[Item]) -> None:
        """Store ``items`` after the session's others: one turn per exchange (a user
        message and what follows it), durable when this returns.

        The SDK stores a run's input first and the run's new items in a later call: items
        that do not start with a user message continue the session's last exchange, so
        that page is stored again with them (a question and its answer make one turn),
        and then the old page is deleted (after, so a failure in between leaves the
        exchange twice, never lost). When the joined exchange would be too big for one turn
        (``max_text_bytes``), the new items make a page of their own.

        Raises:
            InvalidInput: an exchange too big for one turn by itself."""
        exchanges = _exchanges([dict(item) for item in items])
        if not exchanges:
            return
        async with self._lock:
            if not _is_user_message(exchanges[0][0]):
                pages = await self._pages()
                held = _stored_items(pages[-1].response) if pages else None
                if held and _is_user_message(held[0]):
                    try:
                        await self._append(held + exchanges[0])
                    except InvalidInput:
                        pass  # too big for one turn (max_text_bytes): a page of its own
                    else:
                        exchanges.pop(0)
                        for exchange in exchanges:
                            await self._append(exchange)
                        await call(self._mem, "delete_memory", self.user_id, pages[-1].memory_id)
                        return
            for exchange in exchanges:
                await self._append(exchange)

    async def _append(self, exchange: Sequence[Item]) -> None:
        query, response = encode(exchange)
        await call(
            self._mem, "add_turn", self.user_id, query, response, assistant_id=self.assistant_id
        )

    async def pop_item(self) -> Item | None:
        """Remove the session's last item and return it (None for an empty session)."""
        async with self._lock:
            pages = await self._pages()
            if not pages:
                return None
            last = pages[-1]
            items = decode(last.query, last.response)
            if len(items) > 1:  # the rest of the exchange first: never lost on a failure
                await self._append(items[:-1])
            await call(self._mem, "delete_memory", self.user_id, last.memory_id)
            return items[-1] if items else None

    async def clear_session(self) -> None:
        """Forget the session's user: every item, and all the memory made of them."""
        async with self._lock:
            try:
                await call(self._mem, "forget_user", self.user_id)
            except UnknownUser:
                pass  # nothing stored: already clear


def _latest_user_text(items: Sequence[Any]) -> str:
    for item in reversed(items):
        if isinstance(item, Mapping) and _is_user_message(item):
            return _text_of(item.get("content"))
    return ""


def memory_instructions(
    mem: MemoryAPI | AsyncMemoryAPI,
    base_instructions: str,
    *,
    prefix: str = "",
    assistant_id: str = "default",
) -> Callable[[Any, Any], Awaitable[str]]:
    """Dynamic instructions for an ``Agent``: ``base_instructions`` followed by what the
    memory retrieves for the run's latest user input.

    The user is the run's session user: pass the :class:`MemorySession` as the run's
    ``context`` (``Runner.run(agent, text, session=s, context=s)``), or a context with a
    ``user_id`` attribute; ``prefix`` is added before that id as the session adds it.
    Without a user, or with nothing retrieved, the instructions are ``base_instructions``.
    """

    async def instructions(run_context: Any, agent: Any) -> str:
        context = getattr(run_context, "context", None)
        user_id = getattr(context, "user_id", None)
        if isinstance(context, MemorySession):
            user_id = context.user_id
        elif isinstance(user_id, str):
            user_id = prefix + user_id
        query = _latest_user_text(getattr(run_context, "turn_input", None) or [])
        if not isinstance(user_id, str) or not query:
            return base_instructions
        try:
            found = await call(mem, "retrieve", user_id, query, assistant_id)
        except UnknownUser:
            # A user with no data yet. Once `retrieve` answers such a user with an empty
            # context (#44 item 4), this stays as a guard for older servers.
            return base_instructions
        if found.is_empty():
            return base_instructions
        return f"{base_instructions}\n\nWhat you remember about this user:\n{found.render()}"

    return instructions
