"""Argument checks shared by the facades (in-process, cluster, HTTP): each returns the
checked value or raises :class:`~memoryos_actors.errors.InvalidInput`.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

from .actors.base import (
    ASSISTANT_PREFIX,
)
from .errors import (
    InvalidInput,
    MemoryOSError,
    StorageError,
)
from .store.paths import validate_user_id

__all__ = [
    "DOT_SEGMENTS",
    "MAX_ID_BYTES",
    "PATH_UNSAFE",
    "check_path",
    "check_text",
    "check_timeout",
    "check_new_id",
    "check_timestamp",
    "check_user_id",
    "typed_cause",
]


MAX_ID_BYTES = 1024
"""Longest user or assistant id the library takes, UTF-8 bytes."""


def check_text(
    value: object,
    what: str,
    limit: int,
    *,
    allow_empty: bool = False,
    setting: str | None = None,
) -> str:
    """``value`` if it is a str of at most ``limit`` UTF-8 bytes without NUL (empty only
    with ``allow_empty``), else :class:`InvalidInput`; a limit that is a configuration
    value names it (``setting``, e.g. ``"max_text_bytes"``) in the message."""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidInput(f"{what} must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode text (lone surrogate)") from None
    if size > limit:
        named = f" ({setting})" if setting else ""
        raise InvalidInput(f"{what} is {size} UTF-8 bytes; the limit is {limit}{named}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")
    return value


#: Ids that no URL can carry as a path segment: every HTTP client resolves them as dot
#: segments (also when percent-encoded as ``%2E``), so ``/v1/users/../memories`` reaches
#: ``/v1/memories``. Refused as user ids everywhere, so every user can be reached by URL.
DOT_SEGMENTS = frozenset({".", ".."})


def check_user_id(user_id: object) -> str:
    """A user id the API accepts: a storable id (:func:`~memoryos_actors.store.paths.
    validate_user_id`, the one definition of those) of at most :data:`MAX_ID_BYTES` UTF-8
    bytes, with no NUL, no leading or trailing white space, not ``.`` or ``..`` (see
    :data:`DOT_SEGMENTS`), and not in the reserved assistant space."""
    uid = check_text(user_id, "user_id", MAX_ID_BYTES)
    if uid.strip() != uid or not uid.strip():
        raise InvalidInput("user_id must not be blank or have leading/trailing white space")
    if uid in DOT_SEGMENTS:
        raise InvalidInput(f"user_id must not be {uid!r}: a URL path cannot carry it")
    if uid.startswith(ASSISTANT_PREFIX):
        raise InvalidInput(f"user ids starting with {ASSISTANT_PREFIX!r} are reserved")
    validate_user_id(uid)
    return uid


#: What no new user or assistant id may contain: ``/`` (in a URL path it would split the id,
#: so the HTTP API, MCP and the memory page could not name the user) and control
#: characters (C0 and DEL). The one rule for ids at every front door: the library refuses
#: them in an id it writes under (:func:`check_new_id`), the server's tenants in any id.
PATH_UNSAFE = re.compile(r"[\x00-\x1f\x7f/]")


def check_new_id(value: str, what: str = "user_id") -> str:
    """``value`` (an id already checked as usable) if memory may be written under it,
    else :class:`InvalidInput`: it must not contain :data:`PATH_UNSAFE` characters.

    Ids stored before this rule that do contain them stay readable, exportable and
    forgettable through the library and the command line; only new memory under them is
    refused, with the way out (export, then import under another id)."""
    if PATH_UNSAFE.search(value) is None:
        return value
    if what == "user_id":
        way_out = (
            "; a user stored under such an id can still be read, exported and forgotten: "
            "export it and import it under a new id (memoryos export USER FILE, then "
            "memoryos import FILE --as NEW_ID)"
        )
    else:
        way_out = ""
    raise InvalidInput(
        f"{what} {value!r} contains '/' or a control character, which a URL path cannot "
        f"carry; ids must not{way_out}"
    )


#: Most UTF-8 bytes the metadata of a remembered memory may take, as compact JSON.
MAX_METADATA_BYTES = 4096

#: Deepest nesting of lists and objects metadata may have.
_METADATA_DEPTH = 8


def _check_json(node: object, where: str, depth: int) -> None:
    """:class:`InvalidInput` unless ``node`` is JSON data (see :func:`check_metadata`)."""
    if depth > _METADATA_DEPTH:
        raise InvalidInput(f"metadata is nested more than {_METADATA_DEPTH} deep at {where}")
    if isinstance(node, dict):
        for key, item in node.items():
            if not isinstance(key, str):
                raise InvalidInput(f"metadata keys must be str, got {key!r:.40} at {where}")
            _check_json(item, f"{where}.{key}", depth + 1)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _check_json(item, f"{where}[{i}]", depth + 1)
    elif isinstance(node, float) and not math.isfinite(node):
        raise InvalidInput(f"metadata numbers must be finite, got {node!r} at {where}")
    elif node is not None and not isinstance(node, (str, int, float, bool)):
        raise InvalidInput(
            "metadata values must be JSON (str, number, bool, None, list, dict), "
            f"got {type(node).__name__} at {where}"
        )


def check_metadata(value: object) -> str:
    """The metadata of a remembered memory as compact JSON text (keys sorted; ``""`` for
    None or an empty object), if ``value`` is a JSON object: a dict with str keys whose
    values are str, finite numbers, bools, None, lists and such dicts (at most
    :data:`MAX_METADATA_BYTES` bytes, nested at most 8 deep); else :class:`InvalidInput`
    naming the offending part."""
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise InvalidInput(f"metadata must be a dict (a JSON object), got {type(value).__name__}")
    _check_json(value, "metadata", 0)
    if not value:
        return ""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput("metadata is not valid Unicode text (lone surrogate)") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is {size} bytes as JSON; the limit is {MAX_METADATA_BYTES}")
    return text


def check_timestamp(ts: object) -> float:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise InvalidInput(f"timestamp must be a number of seconds, got {type(ts).__name__}")
    value = float(ts)
    if not math.isfinite(value) or value < 0 or value > 32503680000.0:  # year 3000
        raise InvalidInput(f"timestamp {ts!r} is not a plausible Unix time in seconds")
    return value


def typed_cause(exc: BaseException) -> MemoryOSError:
    """The first :class:`MemoryOSError` in ``exc``'s cause chain, else a ``StorageError``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryOSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return StorageError(f"starting the user's actors failed: {exc}")


def check_path(value: object, what: str) -> Path:
    """``value`` as a :class:`Path` if it is a usable file-system path, else ``InvalidInput``."""
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidInput(f"{what} must be a path, got {type(value).__name__}")
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise InvalidInput(f"{what} must be a text path, got {type(raw).__name__}")
    return Path(check_text(raw, what, 4096))


def check_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInput(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)
