"""The header check every tier core's snapshot loader starts with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memoryos_actors.errors import EmbedderMismatch, InvalidInput

__all__ = ["state_dim"]


def state_dim(state: Mapping[str, Any], version: int, dim: int | None, tier: str) -> int | None:
    """The embedding dimension ``tier``'s snapshot ``state`` was written with (``None`` if
    it recorded none), after checking its format ``version`` and, when ``dim`` is given,
    that the dimensions agree.

    Raises:
        InvalidInput: another format version.
        EmbedderMismatch: ``dim`` differs from the stored dimension.
        KeyError, TypeError, ValueError: a malformed state (the loader reports it).
    """
    if state["version"] != version:
        raise InvalidInput(f"unsupported {tier} state version {state['version']!r}")
    raw = state["dim"]
    stored = None if raw is None else int(raw)
    if dim is not None and stored is not None and stored != dim:
        raise EmbedderMismatch(f"{tier} state has {stored}-dimensional embeddings, expected {dim}")
    return stored
