"""The per-tenant user id space: how a tenant's user ids map to the library's user ids.

A tenant's user ``alice`` is stored as library user ``<tenant>:alice``. Tenant names
cannot contain ``:``, so the first ``:`` always ends the tenant and no tenant can name a
user of another: whatever a caller sends, the prefix is its key's tenant. Assistant ids
are scoped the same way, so shared assistant personas are never shared across tenants.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import InvalidInput
from ..validation import DOT_SEGMENTS

__all__ = [
    "MAX_ID_CHARS",
    "check_external_id",
    "external_id",
    "external_memory_id",
    "internal_id",
    "internal_memory_id",
    "relabel_user_id",
    "tenant_prefix",
]

#: Longest user or assistant id a tenant may use, characters.
MAX_ID_CHARS = 256
_BAD = re.compile(r"[\x00-\x1f\x7f/]")


def check_external_id(value: object, what: str = "user_id") -> str:
    """``value`` if it can be a tenant's user (or assistant) id, else :class:`InvalidInput`.

    An id is 1-256 characters, without ``/``, control characters, lone surrogates, or
    leading or trailing white space, and is not ``.`` or ``..``: an id goes in the URL path,
    where ``/`` would split it and HTTP clients resolve ``.`` and ``..`` (also
    percent-encoded) as dot segments, reaching another route.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_ID_CHARS:
        raise InvalidInput(f"{what} must have 1 to {MAX_ID_CHARS} characters")
    if _BAD.search(value):
        raise InvalidInput(f"{what} must not contain '/' or control characters")
    if value.strip() != value:
        raise InvalidInput(f"{what} must not have leading or trailing white space")
    if value in DOT_SEGMENTS:
        raise InvalidInput(f"{what} must not be {value!r}: a URL path cannot carry it")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode text (lone surrogate)") from None
    return value


def tenant_prefix(tenant: str) -> str:
    """The prefix of every library user id of ``tenant``."""
    return f"{tenant}:"


def internal_id(tenant: str, external: str, what: str = "user_id") -> str:
    """The library id of the tenant's ``external`` user (or assistant) id."""
    return tenant_prefix(tenant) + check_external_id(external, what)


def external_id(tenant: str, internal: str) -> str | None:
    """The tenant's id for library id ``internal``, or None if it is not the tenant's."""
    prefix = tenant_prefix(tenant)
    return internal[len(prefix) :] if internal.startswith(prefix) else None


def internal_memory_id(tenant: str, memory_id: str) -> str:
    """The library's id of the tenant's memory ``memory_id``: an agent trait names its
    assistant, which is scoped to the tenant like user ids."""
    from ..store.edits import MemoryRef, parse_memory_id

    ref = parse_memory_id(memory_id)
    if ref.kind != "agent_trait":
        return ref.memory_id
    return MemoryRef(
        ref.kind, ref.key, internal_id(tenant, ref.assistant, "assistant_id")
    ).memory_id


def external_memory_id(tenant: str, memory_id: str) -> str:
    """The tenant's id of library memory id ``memory_id`` (inverse of
    :func:`internal_memory_id`)."""
    from ..store.edits import MemoryRef, parse_memory_id

    ref = parse_memory_id(memory_id)
    if ref.kind != "agent_trait":
        return memory_id
    aid = external_id(tenant, ref.assistant) or ref.assistant
    return MemoryRef(ref.kind, ref.key, aid).memory_id


def relabel_user_id(value: Any, internal: str, external: str) -> Any:
    """``value`` (an export's payload or JSON document) with every ``user_id`` equal to
    ``internal`` replaced by ``external``: a tenant's export names its user as the tenant
    does (the HTTP export and ``memoryos --tenant T export`` both)."""
    if isinstance(value, dict):
        return {
            k: (
                external
                if k == "user_id" and v == internal
                else relabel_user_id(v, internal, external)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [relabel_user_id(v, internal, external) for v in value]
    return value
