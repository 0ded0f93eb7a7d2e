"""Pages of long listings: a stable order and opaque cursors.

A listing (a user's memories, the users of a tenant, a memory's history) is sorted by a key
that never changes for an item (a page's key is its sequence number, not where it is now),
and a cursor is the key of the last item a page returned, wrapped so that callers treat it
as an opaque string. The next page is the items after that key. So paging through a user
while turns are added, or while pages move from STM to MTM to the archive, neither skips
nor repeats an item that existed when paging began: new items sort after the old ones (or
appear in a later page), deleted ones simply stop appearing.

A front end that serves several tenants binds its cursors to the tenant (``scope``): a
cursor from one tenant's listing is refused in another's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from .errors import InvalidInput

__all__ = [
    "MemoryList",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
    "memory_sort_key",
    "page_of",
]

T = TypeVar("T")
Key = tuple[Any, ...]

_VERSION = 1
#: Order of memory kinds in a listing: turns first, then what was learned from them.
_KIND_ORDER = {"page": 0, "segment": 1, "fact": 2, "agent_trait": 3, "trait": 4}
_TRAILING_NUMBER = re.compile(r"(\d+)$")


class MemoryList(list[Any]):
    """A list of :class:`~memoryos_actors.Memory` (one page of a listing) that also says
    where the next page starts.

    Attributes:
        next_cursor: pass it as ``cursor=`` to get the next page; None when this page is
            the last one.
    """

    def __init__(self, items: Iterable[Any] = (), next_cursor: str | None = None) -> None:
        super().__init__(items)
        self.next_cursor = next_cursor

    def __repr__(self) -> str:
        return f"MemoryList({list.__repr__(self)}, next_cursor={self.next_cursor!r})"


def memory_sort_key(memory_id: str) -> Key:
    """The listing order of a memory id: by kind (pages, segments, facts, agent traits,
    traits), then by its sequence number (``p12`` -> 12: the order it was stored in), then
    by the id itself. Depends on the id only, so it never changes while the memory lives."""
    kind, _, rest = memory_id.partition(":")
    found = _TRAILING_NUMBER.search(rest.rsplit(":", 1)[-1])
    return (_KIND_ORDER.get(kind, len(_KIND_ORDER)), int(found.group(1)) if found else 0, memory_id)


def encode_cursor(listing: str, key: Key, scope: str | None = None) -> str:
    """The opaque cursor for "after the item with sort key ``key``" in ``listing``, bound
    to ``scope`` (a tenant) when one is given."""
    doc: list[Any] = [_VERSION, listing, list(key)]
    if scope is not None:
        doc.append(_scope_tag(scope))
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(
    cursor: str, listing: str, shape: Sequence[type], scope: str | None = None
) -> Key:
    """The sort key in ``cursor``, which must come from a page of ``listing`` in
    ``scope`` and hold values of the types in ``shape``; :class:`InvalidInput` for
    anything else (a cursor of another listing or another tenant's, an edited or
    truncated one)."""
    shown = cursor[:80] if isinstance(cursor, str) else cursor
    bad = InvalidInput(
        f"cursor {shown!r} is not a cursor of this listing: pass the "
        "next_cursor of the previous page unchanged"
    )
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4096:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise bad from None
    if not isinstance(doc, list) or len(doc) not in (3, 4):
        raise bad
    version, name, key, *tag = doc
    if (
        version != _VERSION
        or name != listing
        or not isinstance(key, list)
        or len(key) != len(shape)
        or not all(
            isinstance(v, t) and not isinstance(v, bool) for v, t in zip(key, shape, strict=True)
        )
    ):
        raise bad
    if tag != ([] if scope is None else [_scope_tag(scope)]):
        if scope is None or not tag:
            raise bad
        raise InvalidInput(
            f"cursor {shown!r} comes from another tenant's listing: pass the next_cursor "
            "of this listing's previous page unchanged"
        )
    return tuple(key)


def _scope_tag(scope: str) -> str:
    # A digest, not the name: a cursor need not spell out whose listing it came from.
    return hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]


def check_limit(limit: int | None, top: int | None = None) -> int | None:
    """``limit`` if it is None or an int in 1..``top``; else :class:`InvalidInput`."""
    if limit is None:
        return None
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or limit < 1
        or (top is not None and limit > top)
    ):
        raise InvalidInput(f"limit must be an int in 1..{top or 'any'}, got {limit!r}")
    return limit


def page_of(
    items: Iterable[T],
    key: Callable[[T], Key],
    listing: str,
    limit: int | None,
    after: Key | None,
    scope: str | None = None,
) -> tuple[list[T], str | None]:
    """``(page, next_cursor)``: at most ``limit`` (None: all) of ``items`` in ``key``
    order whose key is greater than ``after``, and the cursor of what follows them (None
    when nothing does), bound to ``scope`` (see :func:`encode_cursor`)."""
    ordered = sorted(items, key=key)
    if after is not None:
        ordered = [item for item in ordered if key(item) > after]
    if limit is None or len(ordered) <= limit:
        return ordered, None
    shown = ordered[:limit]
    return shown, encode_cursor(listing, key(shown[-1]), scope)
