"""Mapping user ids to safe, portable directory names.

Every user's files live in one directory under ``<data dir>/users/``. The directory name is
derived from the user id by :func:`user_dir_name`, which is:

* **injective** — two different ids never share a directory (for ids longer than the plain
  limit this rests on SHA-256; the original id is also recorded in the user's meta file and
  checked on open, so a collision could never mix two users' data silently);
* **safe** — the name uses only ``a-z 0-9 - _ ^ ~``, always starts with ``u-`` or ``h-``, so it
  can never be ``.``, ``..``, empty, hidden, contain a separator, end in a dot or space, or be a
  Windows reserved device name (``CON``, ``NUL``, ``COM1`` ...);
* **case-collision-safe** — upper-case letters are escaped (``A`` -> ``^a``), so the names of
  two different ids also differ on case-insensitive file systems (macOS, Windows), and the
  ASCII-only alphabet is immune to Unicode normalisation by the file system;
* **bounded** — at most :data:`MAX_DIR_NAME_CHARS` characters; long ids are hashed;
* **reversible** for plain names (:func:`user_id_from_dir_name`); hashed names are resolved
  through the meta file.

Ids are validated by :func:`validate_user_id`: a non-empty ``str`` of at most
:data:`MAX_USER_ID_BYTES` UTF-8 bytes. Strings that cannot be encoded as UTF-8 (lone
surrogates such as ``"\\ud800"``) are rejected with :class:`~memoryos_actors.errors.InvalidInput`
before any path is built.
"""

from __future__ import annotations

import hashlib

from memoryos_actors.errors import InvalidInput

__all__ = [
    "ASSISTANT_PREFIX",
    "MAX_DIR_NAME_CHARS",
    "MAX_USER_ID_BYTES",
    "user_dir_name",
    "user_id_from_dir_name",
    "validate_user_id",
]

MAX_USER_ID_BYTES = 4096
"""Longest accepted user id, in UTF-8 bytes."""

#: User ids with this prefix are reserved: the shared persona of an assistant lives in the
#: LPM of the pseudo-user ``ASSISTANT_PREFIX + assistant_id`` (``shared_agent_persona``).
#: Defined here, at the bottom of the layers, because readers of stored data (``memoryos
#: stats``) must tell such pseudo-users from users without importing the actors.
ASSISTANT_PREFIX = "@assistant:"

_PLAIN_PREFIX = "u-"
_HASHED_PREFIX = "h-"
_MAX_PLAIN_BODY = 100
_HINT_CHARS = 40
_DIGEST_HEX = 40  # 160 bits of SHA-256: collisions are out of reach in practice

MAX_DIR_NAME_CHARS = len(_PLAIN_PREFIX) + _MAX_PLAIN_BODY
"""Longest directory name :func:`user_dir_name` returns, in characters (all ASCII)."""

_SAFE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_HEX = frozenset("0123456789abcdef")


def validate_user_id(user_id: object) -> bytes:
    """Check that ``user_id`` is usable and return its UTF-8 encoding.

    Raises :class:`InvalidInput` when the id is not a ``str``, is empty, is longer than
    :data:`MAX_USER_ID_BYTES` UTF-8 bytes, or cannot be encoded as UTF-8 (lone surrogates).
    """
    if not isinstance(user_id, str):
        raise InvalidInput(f"user id must be a str, not {type(user_id).__name__}")
    if not user_id:
        raise InvalidInput("user id must not be empty")
    try:
        raw = user_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"user id {user_id!r} is not valid Unicode text (position {exc.start}: "
            f"{exc.reason}); user ids must be encodable as UTF-8"
        ) from None
    if len(raw) > MAX_USER_ID_BYTES:
        raise InvalidInput(
            f"user id is {len(raw)} UTF-8 bytes long; the limit is {MAX_USER_ID_BYTES}"
        )
    return raw


def _escape_char(ch: str) -> str:
    if ch in _SAFE_CHARS:
        return ch
    if "A" <= ch <= "Z":
        return "^" + ch.lower()
    return "".join(f"~{b:02x}" for b in ch.encode("utf-8"))


def user_dir_name(user_id: str) -> str:
    """Return the directory name that holds ``user_id``'s files (see the module docstring).

    The result is at most :data:`MAX_DIR_NAME_CHARS` ASCII characters. Raises
    :class:`InvalidInput` for ids rejected by :func:`validate_user_id`.
    """
    raw = validate_user_id(user_id)
    parts = [_escape_char(ch) for ch in user_id]
    body = "".join(parts)
    if len(body) <= _MAX_PLAIN_BODY:
        return _PLAIN_PREFIX + body
    # Long ids: a readable hint (whole escapes only) plus a digest of the full id. The "h-"
    # prefix keeps hashed names disjoint from plain ones, whatever the hint looks like.
    hint: list[str] = []
    used = 0
    for part in parts:
        if used + len(part) > _HINT_CHARS:
            break
        hint.append(part)
        used += len(part)
    digest = hashlib.sha256(raw).hexdigest()[:_DIGEST_HEX]
    return f"{_HASHED_PREFIX}{''.join(hint)}-{digest}"


def user_id_from_dir_name(name: str) -> str | None:
    """Decode a plain directory name back to its user id.

    Returns ``None`` for hashed names (the id is then only in the user's meta file) and for
    names :func:`user_dir_name` would never produce.
    """
    if not name.startswith(_PLAIN_PREFIX):
        return None
    body = name[len(_PLAIN_PREFIX) :]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch in _SAFE_CHARS:
            out += ch.encode("ascii")
            i += 1
        elif ch == "^" and i + 1 < len(body) and "a" <= body[i + 1] <= "z":
            out += body[i + 1].upper().encode("ascii")
            i += 2
        elif ch == "~" and i + 2 < len(body) and set(body[i + 1 : i + 3]) <= _HEX:
            out.append(int(body[i + 1 : i + 3], 16))
            i += 3
        else:
            return None
    try:
        user_id = out.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # Only the canonical spelling decodes: "~61" is not another name for "a".
    try:
        if user_dir_name(user_id) != name:
            return None
    except InvalidInput:
        return None
    return user_id
