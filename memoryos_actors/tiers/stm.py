"""STM: the short-term memory tier, a FIFO queue of the most recent pages.

Pure state and transitions; no threads, no I/O. The actor shell hands pages pushed out of
the queue to MTM.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from memoryos_actors.errors import InvalidInput
from memoryos_actors.messages import Page, normalize_keywords

__all__ = ["STMCore"]

_STATE_VERSION = 1


class STMCore:
    """A FIFO of at most ``capacity`` pages (the paper's short-term memory, 7 by default).

    Pages are kept oldest first. Pushing into a full queue evicts the oldest page, which
    :meth:`push` returns so the caller can move it to MTM. Pushes are idempotent by page
    ``seq``: a page whose seq is not above every seq seen so far is ignored, so replaying a
    write-ahead log after a crash does not duplicate pages.

    Args:
        capacity: maximum pages held (>= 1).
    """

    __slots__ = ("_capacity", "_max_seq", "_pages", "_user_id")

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise InvalidInput(f"STM capacity must be an int >= 1, got {capacity!r}")
        self._capacity = capacity
        self._pages: deque[Page] = deque()
        self._max_seq = 0
        self._user_id: str | None = None

    @property
    def capacity(self) -> int:
        """Maximum number of pages held."""
        return self._capacity

    @property
    def max_seq(self) -> int:
        """Highest page seq pushed so far (0 before the first push)."""
        return self._max_seq

    def __len__(self) -> int:
        return len(self._pages)

    def push(self, page: Page) -> Page | None:
        """Append ``page``; return the evicted oldest page if the queue was full, else None.

        A page with ``seq <= max_seq`` was already pushed: it is ignored and None returned.

        Raises:
            InvalidInput: not a Page, or a page of another user than earlier pages.
        """
        if not isinstance(page, Page):
            raise InvalidInput(f"STMCore.push needs a Page, got {type(page).__name__}")
        if self._user_id is not None and page.user_id != self._user_id:
            raise InvalidInput(
                f"page of user {page.user_id!r} pushed into the STM of user {self._user_id!r}"
            )
        if page.seq <= self._max_seq:
            return None
        self._user_id = page.user_id
        self._max_seq = page.seq
        self._pages.append(page)
        if len(self._pages) > self._capacity:
            return self._pages.popleft()
        return None

    def trim(self) -> tuple[Page, ...]:
        """Pop and return (oldest first) the pages above capacity.

        Only needed after :meth:`from_state` with a smaller capacity than the stored state
        had; the caller moves the returned pages on to MTM so none is lost.
        """
        out: list[Page] = []
        while len(self._pages) > self._capacity:
            out.append(self._pages.popleft())
        return tuple(out)

    def pages(self) -> tuple[Page, ...]:
        """The pages held, oldest first."""
        return tuple(self._pages)

    def last(self) -> Page | None:
        """The most recent page, or None when empty."""
        return self._pages[-1] if self._pages else None

    def remove(self, seq: int) -> Page | None:
        """Delete the page of turn ``seq`` if it is here; returns it (None if not).

        ``max_seq`` stays: a later push of that seq (a WAL replay) is still ignored.
        """
        for i, page in enumerate(self._pages):
            if page.seq == seq:
                del self._pages[i]
                return page
        return None

    def get(self, page_id: str) -> Page | None:
        """The page with ``page_id`` if it is still in STM."""
        for page in self._pages:
            if page.page_id == page_id:
                return page
        return None

    def previous(self, page_id: str) -> Page | None:
        """The page just before ``page_id`` in STM (None if it is the oldest or gone).

        The LLM needs it to decide whether ``page_id`` continues the same dialogue chain.
        """
        prev: Page | None = None
        for page in self._pages:
            if page.page_id == page_id:
                return prev
            prev = page
        return None

    def set_meta(
        self, page_id: str, meta_chain: str, chain_id: str, keywords: Iterable[str] = ()
    ) -> bool:
        """Fill in a page's dialogue-chain meta and keywords.

        The LLM computes meta after the page was pushed; by then the page may have left
        STM, in which case nothing changes and False is returned.
        """
        kw = normalize_keywords(keywords)
        for i, page in enumerate(self._pages):
            if page.page_id == page_id:
                self._pages[i] = dataclasses.replace(
                    page, meta_chain=meta_chain, chain_id=chain_id, keywords=kw
                )
                return True
        return False

    def to_state(self) -> dict[str, Any]:
        """The whole state as msgpack-friendly values."""
        return {
            "version": _STATE_VERSION,
            "capacity": self._capacity,
            "max_seq": self._max_seq,
            "user_id": self._user_id,
            "pages": [p.to_dict() for p in self._pages],
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], capacity: int | None = None) -> STMCore:
        """Rebuild a core from :meth:`to_state` output.

        ``capacity`` overrides the stored capacity (a changed config); if the stored pages
        do not fit, they are all kept and :meth:`trim` hands out the surplus.
        """
        try:
            if state["version"] != _STATE_VERSION:
                raise InvalidInput(f"unsupported STM state version {state['version']!r}")
            core = cls(state["capacity"] if capacity is None else capacity)
            core._pages.extend(Page.from_dict(p) for p in state["pages"])
            core._max_seq = int(state["max_seq"])
            core._user_id = state["user_id"]
        except (KeyError, TypeError) as exc:
            raise InvalidInput(f"malformed STM state: {exc!r}") from None
        return core
