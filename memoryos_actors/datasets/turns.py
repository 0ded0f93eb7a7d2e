"""Read JSON Lines files of turns: one ``{user_id, query, response, timestamp, turn_key}``
per line.

``user_id`` is required and must be a non-empty string. ``query`` and ``response`` are
strings (either may be missing or empty, not both). ``timestamp`` is optional: seconds since
the Unix epoch as a number; when it is absent or ``null`` the memory system's clock stamps
the turn. ``turn_key`` is optional: a string of 1 to 200 bytes of UTF-8 naming the turn,
so that storing it again (re-running the file) stores it once; ``memoryos ingest`` derives
one from the record when it is absent. Other fields are ignored. Blank lines are skipped.
Any other shape is an error naming the file and line.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import DatasetError

__all__ = ["MAX_TURN_KEY_BYTES", "DatasetError", "TurnRecord", "count_turns", "read_turns"]

#: Longest ``turn_key``, bytes of UTF-8 (the limit of ``MemoryOS.add_turn``).
MAX_TURN_KEY_BYTES = 200


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One turn read from a file.

    Attributes:
        user_id: whose turn.
        query: what the user said (may be empty).
        response: what the assistant answered (may be empty).
        timestamp: seconds since the Unix epoch, or None to use the system clock.
        line: the 1-based line of the file it came from (for error messages).
        turn_key: the record's own idempotency key, or None.
    """

    user_id: str
    query: str
    response: str
    timestamp: float | None
    line: int
    turn_key: str | None = None


def _field(rec: dict[str, Any], name: str, where: str) -> str:
    value = rec.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DatasetError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
    return value


def _parse(text: str, where: str, number: int) -> TurnRecord:
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise DatasetError(f"{where}: nested too deeply to be a turn") from None
    if not isinstance(rec, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    user_id = rec.get("user_id")
    if not isinstance(user_id, str) or not user_id.strip():
        raise DatasetError(f"{where}: 'user_id' must be a non-empty string")
    query = _field(rec, "query", where)
    response = _field(rec, "response", where)
    if not query and not response:
        raise DatasetError(f"{where}: a turn needs a 'query' or a 'response'")
    ts = rec.get("timestamp")
    if ts is not None:
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise DatasetError(f"{where}: 'timestamp' must be a number of seconds, got {ts!r}")
        ts = float(ts)
    key = rec.get("turn_key")
    if key is not None and (
        not isinstance(key, str)
        or not key
        or len(key.encode("utf-8", "surrogatepass")) > MAX_TURN_KEY_BYTES
    ):
        raise DatasetError(
            f"{where}: 'turn_key' must be a string of 1 to "
            f"{MAX_TURN_KEY_BYTES} bytes, got {key!r:.60}"
        )
    return TurnRecord(user_id, query, response, ts, number, key)


def read_turns(path: str | os.PathLike[str]) -> Iterator[TurnRecord]:
    """Yield the turns of the JSON Lines file at ``path`` in file order.

    The file is read lazily, so a bad line is reported when it is reached; call
    :func:`count_turns` first to validate the whole file before acting on any turn.

    Raises:
        DatasetError: the file is missing or unreadable, or a line is not a turn
            (the message is ``path:line: reason``).
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{file}: no such file")
    try:
        with file.open(encoding="utf-8") as fh:
            for number, text in enumerate(fh, 1):
                if text.strip():
                    yield _parse(text, f"{file}:{number}", number)
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{file}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise DatasetError(f"{file}: cannot read: {exc}") from exc


def count_turns(path: str | os.PathLike[str]) -> int:
    """Validate every line of the file at ``path`` and return how many turns it holds.

    Raises:
        DatasetError: as :func:`read_turns`.
    """
    return sum(1 for _ in read_turns(path))
