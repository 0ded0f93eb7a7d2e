"""The per-tenant user id space: how a tenant's user ids map to the library's user ids.

A tenant's user ``alice`` is stored as library user ``<tenant>:alice``. Tenant names
cannot contain ``:``, so the first ``:`` always ends the tenant and no tenant can name a
user of another: whatever a caller sends, the prefix is its key's tenant. Assistant ids
are scoped the same way, so shared assistant personas are never shared across tenants.

An export a tenant gets names its user and assistants by the tenant's own ids
(:func:`export_for_tenant`), so it carries no tenant's name; imported into a tenant, they
become that tenant's (:func:`import_for_tenant`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..validation import DOT_SEGMENTS, PATH_UNSAFE
from ..validation import MAX_ID_BYTES as LIBRARY_MAX_ID_BYTES

__all__ = [
    "MAX_ID_BYTES",
    "MAX_ID_CHARS",
    "check_external_id",
    "export_for_tenant",
    "external_id",
    "external_memory_id",
    "import_for_tenant",
    "internal_id",
    "internal_memory_id",
    "relabel_user_id",
    "tenant_export_file",
    "tenant_prefix",
    "tenant_user_ids",
]

#: Longest user or assistant id a tenant may use, characters.
MAX_ID_CHARS = 256
#: Longest tenant prefix: a tenant name (at most 63 ASCII characters, see
#: :func:`~memoryos_actors.server.keys.check_tenant`) and ``:``.
_LONGEST_PREFIX_BYTES = 64
#: Longest user or assistant id a tenant may use, UTF-8 bytes: with any tenant's prefix it
#: stays within the library's own limit (:data:`~memoryos_actors.validation.MAX_ID_BYTES`),
#: so a tenant's id is judged as the tenant wrote it, whatever the tenant's name.
MAX_ID_BYTES = LIBRARY_MAX_ID_BYTES - _LONGEST_PREFIX_BYTES


def check_external_id(value: object, what: str = "user_id") -> str:
    """``value`` if it can be a tenant's user (or assistant) id, else :class:`InvalidInput`.

    An id is 1-256 characters and at most 960 UTF-8 bytes (:data:`MAX_ID_BYTES`), without
    ``/``, control characters, lone surrogates, or leading or trailing white space, and is
    not ``.`` or ``..``: an id goes in the URL path, where ``/`` would split it and HTTP
    clients resolve ``.`` and ``..`` (also percent-encoded) as dot segments, reaching
    another route. Messages speak of the id as the tenant wrote it, never of its prefix.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}")
    if not value or len(value) > MAX_ID_CHARS:
        raise InvalidInput(f"{what} must have 1 to {MAX_ID_CHARS} characters")
    if PATH_UNSAFE.search(value):
        raise InvalidInput(f"{what} must not contain '/' or control characters")
    if value.strip() != value:
        raise InvalidInput(f"{what} must not have leading or trailing white space")
    if value in DOT_SEGMENTS:
        raise InvalidInput(f"{what} must not be {value!r}: a URL path cannot carry it")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode text (lone surrogate)") from None
    if size > MAX_ID_BYTES:
        raise InvalidInput(
            f"{what} is {size} UTF-8 bytes; an id may have at most {MAX_ID_BYTES} "
            f"(and {MAX_ID_CHARS} characters)"
        )
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


def tenant_user_ids(tenant: str, internal_ids: Iterable[str]) -> list[str]:
    """The tenant's ids of those of ``internal_ids`` (library user ids) that are its users
    and that a URL can name, sorted: what the HTTP API, MCP and the memory page list. A
    user stored before ids were checked for ``/`` and control characters
    (:data:`~memoryos_actors.validation.PATH_UNSAFE`) is left out, as no route could reach
    it; the command line still reads, exports and forgets it by its library id."""
    found = (external_id(tenant, i) for i in internal_ids)
    return sorted({u for u in found if u is not None and PATH_UNSAFE.search(u) is None})


def internal_memory_id(tenant: str, memory_id: str) -> str:
    """The library's id of the tenant's memory ``memory_id``: an agent trait names its
    assistant, which is scoped to the tenant like user ids."""
    from ..operations import agent_trait_id, parse_memory_id

    ref = parse_memory_id(memory_id)
    if ref.kind != "agent_trait":
        return ref.memory_id
    return agent_trait_id(memory_id, internal_id(tenant, ref.assistant, "assistant_id"))


def external_memory_id(tenant: str, memory_id: str) -> str:
    """The tenant's id of library memory id ``memory_id`` (inverse of
    :func:`internal_memory_id`)."""
    from ..operations import agent_trait_id, parse_memory_id

    ref = parse_memory_id(memory_id)
    if ref.kind != "agent_trait":
        return memory_id
    return agent_trait_id(memory_id, external_id(tenant, ref.assistant) or ref.assistant)


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


#: The key (and value) a tenant's export carries in its payload: its assistant ids are
#: the tenant's own, not library ids (exports written before it carry no such key).
_TENANT_IDS_KEY = "assistant_ids"
_TENANT_IDS = "tenant"


def export_for_tenant(
    payload: dict[str, Any], tenant: str, internal: str, external: str
) -> dict[str, Any]:
    """The export ``payload`` of library user ``internal`` as ``tenant`` names it: the
    user is ``external`` and every assistant id loses the tenant's prefix, so the export
    carries no tenant's name and imports into any tenant (see :func:`import_for_tenant`)."""
    from ..portability import rename_assistants

    prefix = tenant_prefix(tenant)

    def strip(aid: str) -> str:
        return aid[len(prefix) :] if aid.startswith(prefix) else aid

    relabelled: dict[str, Any] = relabel_user_id(payload, internal, external)
    out = rename_assistants(relabelled, strip)
    # Says that its assistant ids are a tenant's own: an id such as ``0:x`` is then never
    # taken for a library id carrying a tenant's prefix (the library ignores the key).
    out[_TENANT_IDS_KEY] = _TENANT_IDS
    return out


def tenant_export_file(
    path: str | os.PathLike[str], tenant: str, internal: str, external: str
) -> Path:
    """Rewrite the export file at ``path`` (of library user ``internal``) as ``tenant``
    names it (:func:`export_for_tenant`), in the same encoding; returns the path."""
    from ..operations import read_export, write_export

    return write_export(path, export_for_tenant(read_export(path), tenant, internal, external))


def import_for_tenant(payload: dict[str, Any], tenant: str) -> dict[str, Any]:
    """The export ``payload`` with every assistant id in ``tenant``'s id space, for an
    import into that tenant. An id carrying the prefix of the tenant the export's user
    came from (an export written before exports named assistants by the tenant's ids) is
    stripped of it first. :class:`InvalidInput` for an assistant id no tenant can use."""
    from ..portability import rename_assistants
    from .keys import check_tenant

    source = payload.get("user_id")
    owner, sep, _name = source.partition(":") if isinstance(source, str) else ("", "", "")
    old_prefix = None
    if sep and payload.get(_TENANT_IDS_KEY) != _TENANT_IDS:
        try:
            old_prefix = tenant_prefix(check_tenant(owner))
        except InvalidInput:
            old_prefix = None

    def scoped(aid: str) -> str:
        if old_prefix is not None and aid.startswith(old_prefix):
            aid = aid[len(old_prefix) :]
        return internal_id(tenant, aid, "assistant_id")

    return rename_assistants(payload, scoped)
