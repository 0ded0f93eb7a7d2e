"""Memory ids: ``page:p12``, ``segment:s3``, ``fact:f7``, ``agent_trait:<assistant>:a2``,
``trait:<name>`` (see :mod:`memoryos_actors.store.edits`), parsed and checked. Pure."""

from __future__ import annotations

import dataclasses

from ..errors import InvalidInput

__all__ = [
    "DERIVED_ACTIONS",
    "EDITABLE_KINDS",
    "MEMORY_KINDS",
    "MemoryRef",
    "cold_item_id",
    "parse_memory_id",
]

#: Kinds of memory, as they appear in memory ids.
MEMORY_KINDS = ("page", "segment", "fact", "agent_trait", "trait")

#: Kinds whose value can be corrected (pages and segments can only be deleted).
EDITABLE_KINDS = ("fact", "agent_trait", "trait")

#: What a deletion does to a memory derived from the deleted pages that quotes them (see
#: :attr:`EditRecord.derived`).
DERIVED_ACTIONS = ("delete", "revert", "scrub")

#: Longest memory id accepted, in characters.
_MAX_ID = 512


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRef:
    """A parsed memory id: its kind, its key within the kind, and (agent traits) the
    assistant it belongs to."""

    kind: str
    key: str
    assistant: str = ""

    @property
    def memory_id(self) -> str:
        """The id in its text form."""
        if self.kind == "agent_trait":
            return f"agent_trait:{self.assistant}:{self.key}"
        return f"{self.kind}:{self.key}"


def parse_memory_id(memory_id: object) -> MemoryRef:
    """Parse ``memory_id``; raises :class:`InvalidInput` saying what a valid id looks like."""
    if not isinstance(memory_id, str) or not memory_id or len(memory_id) > _MAX_ID:
        raise InvalidInput(
            f"memory_id must be a non-empty str of at most {_MAX_ID} "
            f"characters, got {memory_id!r:.80}"
        )
    kind, sep, rest = memory_id.partition(":")
    if not sep or kind not in MEMORY_KINDS or not rest:
        raise InvalidInput(
            f"memory_id {memory_id!r:.80} is not one of page:<id>, segment:<id>, fact:<id>, "
            "agent_trait:<assistant>:<id>, trait:<name>"
        )
    if kind == "agent_trait":
        assistant, sep, key = rest.rpartition(":")
        if not sep or not assistant or not key:
            raise InvalidInput(
                f"memory_id {memory_id!r:.80}: an agent trait's id is "
                "agent_trait:<assistant>:<entry id>"
            )
        return MemoryRef(kind, key, assistant)
    return MemoryRef(kind, rest)


def cold_item_id(ref: MemoryRef) -> str | None:
    """The cold index's id of the item ``ref`` names (None: the cold tier has no such
    items)."""
    if ref.kind == "page":
        return ref.key
    if ref.kind == "fact":
        return f"fact::{ref.key}"
    if ref.kind == "agent_trait":
        return f"agent_trait:{ref.assistant}:{ref.key}"
    return None
