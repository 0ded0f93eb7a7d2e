"""The whole of a user export, checked before an import writes a byte.

:func:`check_export` rebuilds every tier from the export's state with the tiers' own
``from_state`` (so the rules are the cores' rules, not a second schema), decodes every
archive and edit record, and checks what holds across them: one owner for every page, each
page id once, turn numbers (``seq``) that cover every page, an STM no larger than this
system's. The first problem found is raised as one :class:`~memoryos_actors.errors.InvalidInput`
line naming where it is; anything else a hand-edited file can hold (a wrong type, a missing
key, nesting too deep) is turned into such a line too, never a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .clock import SystemClock
from .config import MemoryConfig
from .errors import InvalidInput, MemoryOSError
from .messages import Page
from .store.archived import decode_archived
from .store.edits import EditRecord, parse_memory_id
from .tiers.lpm import LPMCore
from .tiers.mtm import MTMCore
from .tiers.stm import STMCore
from .validation import check_user_id

__all__ = ["CheckedExport", "check_export"]

_FORMAT = "memoryos-actors/user-export"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class CheckedExport:
    """An export that passed :func:`check_export`.

    Attributes:
        user_id: the id the export was written for.
        state: the tiers' state (``seq``, ``stm``, ``mtm``, ``lpm``, ``turn_keys``).
        archive: the archive records, oldest first.
    """

    user_id: str
    state: dict[str, Any]
    archive: tuple[dict[str, Any], ...]


def check_export(
    payload: object, where: str, config: MemoryConfig, embedder: tuple[str, int]
) -> CheckedExport:
    """Check an export's whole payload (see the module docstring); ``where`` names the
    file in messages, ``embedder`` is this system's ``(name, dimension)``.

    Raises:
        InvalidInput: one line saying what is wrong and where.
    """
    try:
        return _check(payload, where, config, embedder)
    except InvalidInput:
        raise
    except RecursionError:
        raise InvalidInput(f"{where}: nested too deeply to be a user export") from None
    except MemoryOSError as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        what = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InvalidInput(f"{where}: not a valid user export ({what})") from None


def _need(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise InvalidInput(f"{where}: {what}")


def _map(value: object, where: str, what: str) -> Mapping[str, Any]:
    _need(isinstance(value, Mapping), where, f"{what} must be a map, not {type(value).__name__}")
    assert isinstance(value, Mapping)
    return value


def _list(value: object, where: str, what: str) -> list[Any]:
    _need(
        isinstance(value, (list, tuple)),
        where,
        f"{what} must be a list, not {type(value).__name__}",
    )
    assert isinstance(value, (list, tuple))
    return list(value)


def _count(value: object, where: str, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidInput(f"{where}: {what} must be an int >= {least}, not {value!r:.40}")
    return value


def _check(
    payload: object, where: str, config: MemoryConfig, embedder: tuple[str, int]
) -> CheckedExport:
    top = _map(payload, where, "the export")
    _need(top.get("format") == _FORMAT, where, "not a memoryos-actors user export")
    version = _count(top.get("version"), where, "export version", 1)
    _need(
        version <= _VERSION,
        where,
        f"export version {version} is newer than this library reads ({_VERSION})",
    )
    try:
        source = check_user_id(top.get("user_id"))
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: the export's user_id: {exc}") from None
    name, dim = embedder
    _need(
        list(top.get("embedder") or []) == [name, dim],
        where,
        f"written with embedder {top.get('embedder')!r:.80}, this system uses {[name, dim]}; "
        "import it into a system configured with that embedder",
    )
    state = dict(_map(top.get("state"), where, "state"))
    for key in ("stm", "mtm", "lpm"):
        _map(state.get(key), where, f"state.{key}")
    seq = _count(state.get("seq"), where, "state.seq", 0)
    clock = SystemClock()
    stm = STMCore.from_state(state["stm"])
    mtm = MTMCore.from_state(state["mtm"], config, dim, clock)
    LPMCore.from_state(state["lpm"], config, clock=clock, dim=dim)
    for name_, owner in (("stm", state["stm"]), ("mtm", state["mtm"]), ("lpm", state["lpm"])):
        uid = owner.get("user_id")
        _need(uid in (None, source), where, f"state.{name_} belongs to user {uid!r:.80}")
    _need(
        len(stm.pages()) <= config.stm_capacity,
        where,
        f"state.stm holds {len(stm.pages())} pages; this system's STM holds "
        f"{config.stm_capacity} (stm_capacity)",
    )
    pages: list[tuple[str, Page]] = [("state.stm", p) for p in stm.pages()]
    for view in mtm.segments():
        pages.extend(("state.mtm", p) for p in mtm.segment_pages(view.segment_id))
    archive = tuple(
        dict(_map(rec, where, f"archive[{i}]"))
        for i, rec in enumerate(_list(top.get("archive", ()), where, "archive"))
    )
    for i, rec in enumerate(archive):
        found = decode_archived(rec)
        for p in found.pages if found is not None else ():
            pages.append((f"archive[{i}]", Page.from_dict(dict(p))))
    seen: dict[str, str] = {}
    for place, page in pages:
        _need(
            page.user_id == source,
            where,
            f"{place}: page {page.page_id} belongs to user {page.user_id!r:.80}, "
            f"not {source!r:.80}",
        )
        _need(
            page.page_id not in seen,
            where,
            f"page {page.page_id} is held twice ({seen.get(page.page_id)} and {place})",
        )
        seen[page.page_id] = place
        _need(
            page.seq <= seq,
            where,
            f"{place}: page {page.page_id} is numbered past state.seq ({seq}): the next "
            "turn would get an id already taken",
        )
        _need(math.isfinite(page.timestamp), where, f"{place}: page {page.page_id}: bad time")
    for i, rec in enumerate(_list(state["lpm"].get("edits") or (), where, "state.lpm.edits")):
        edit = EditRecord.decode(_map(rec, where, f"state.lpm.edits[{i}]"))
        _need(edit.op in ("delete", "correct"), where, f"state.lpm.edits[{i}]: bad op")
        parse_memory_id(edit.memory_id)
    for i, pair in enumerate(_list(state.get("turn_keys") or (), where, "state.turn_keys")):
        _need(
            isinstance(pair, (list, tuple))
            and len(pair) == 2
            and all(isinstance(x, str) for x in pair),
            where,
            f"state.turn_keys[{i}] must be [key, page id]",
        )
    return CheckedExport(source, state, archive)
