"""Counters of what a data directory holds, read from its files without activating users.

``memoryos stats`` reports, for every user, what the user's newest snapshot holds plus
the turns its write-ahead log adds after it, and each user's archive: no actor is started
and no file is written, so it also works while a server has the directory open (each
file is read as it is at that moment). A user whose files are damaged is reported as
damaged, with the error, and the others are counted.

The counts of a user with work still owed (turns in the WAL that a running system has not
placed in a segment yet) are those of the moment before that work: such turns count as
STM pages, the oldest beyond STM's capacity as MTM pages.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Only the store (no actors, no numpy): ``memoryos stats`` is one process per call, and
# its imports are a good part of its time.
from .errors import CorruptDataError, StorageError
from .store.formats import TurnRecord
from .store.paths import ASSISTANT_PREFIX
from .store.userstore import UserStore, list_users

__all__ = ["STORED_KEYS", "stored_stats", "user_stored_stats"]

#: The per-user counters, summed over users by :func:`stored_stats`.
STORED_KEYS = (
    "turns",
    "stm_pages",
    "mtm_segments",
    "mtm_pages",
    "kb_facts",
    "traits_set",
    "archived_records",
)


def user_stored_stats(data_dir: str | os.PathLike[str], user_id: str) -> dict[str, int]:
    """The :data:`STORED_KEYS` counters of one user, from its files (read-only).

    Raises :class:`~memoryos_actors.errors.CorruptDataError` for damaged files and
    :class:`~memoryos_actors.errors.UnknownUser` for a user with no directory.
    """
    store = UserStore(data_dir, user_id, read_only=True)
    try:
        found = store.load()
        # The archive's length comes from reading its frames; decoding every record (to
        # leave deleted memories out) is needed only when the user has edits.
        archived = len(store.archive_records()) if store.edits else len(store.archive)
    finally:
        store.close()
    state = found.state or {}
    stm = state.get("stm") or {}
    mtm = state.get("mtm") or {}
    lpm = state.get("lpm") or {}
    seq = int(state.get("seq", 0) or 0)
    stm_pages = len(stm.get("pages") or ())
    segments = mtm.get("segments") or ()
    mtm_pages = sum(len(seg.get("pages") or ()) for seg in segments)
    # Turns the WAL holds beyond the snapshot (the WAL also keeps older turns until their
    # pages are placed: those the snapshot already counts have a seq at or below its own).
    new = sum(1 for _lsn, rec in found.replay if isinstance(rec, TurnRecord) and rec.seq > seq)
    capacity = int(stm.get("capacity", 7) or 7)
    stm_total = stm_pages + new
    kb = lpm.get("kb") or {}
    return {
        "turns": seq + new,
        "stm_pages": min(stm_total, capacity),
        "mtm_segments": len(segments),
        "mtm_pages": mtm_pages + max(0, stm_total - capacity),
        "kb_facts": len(kb.get("entries") or ()) if isinstance(kb, dict) else len(kb),
        "traits_set": len(lpm.get("traits") or ()),
        "archived_records": archived,
    }


def stored_stats(
    data_dir: str | os.PathLike[str], users: list[str] | None = None
) -> dict[str, Any]:
    """What data directory ``data_dir`` holds, from its files (read-only, no lock).

    Returns ``{"stored": {"users": n, <STORED_KEYS summed>}, "damaged": {user: error},
    "damaged_users": n}``; ``users`` limits it to those ids (default: every user).
    """
    root = Path(data_dir)
    damaged: dict[str, str] = {}
    names = [
        u for u in list_users(root, damaged=damaged) if not u.startswith(ASSISTANT_PREFIX)
    ]  # shared personas are not users
    if users is not None:
        wanted = set(users)
        names = [u for u in names if u in wanted]
    totals = dict.fromkeys(("users", *STORED_KEYS), 0)
    for user in names:
        try:
            per = user_stored_stats(root, user)
        except (CorruptDataError, StorageError) as exc:
            damaged[user] = str(exc)
            continue
        totals["users"] += 1
        for key in STORED_KEYS:
            totals[key] += per[key]
    return {
        "stored": totals,
        "damaged": dict(sorted(damaged.items())),
        "damaged_users": len(damaged),
    }
