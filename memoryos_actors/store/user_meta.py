"""A user directory's ``meta.json``: :class:`UserMeta` (who, when created, which embedder,
which configuration) and how it is read, parsed, checked and written."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memoryos_actors.errors import CorruptDataError, EmbedderMismatch, InvalidInput
from memoryos_actors.store._files import atomic_write
from memoryos_actors.store._frames import NewerFormatError
from memoryos_actors.store._framing import log

__all__ = [
    "META_FORMAT",
    "UserMeta",
    "is_blank_content",
    "meta_bytes",
    "parse_meta",
    "read_meta",
    "replace_meta",
    "write_meta",
]

META_FORMAT = 1
"""The ``format`` this build writes into ``meta.json`` (and the newest it reads)."""


@dataclass(frozen=True, slots=True)
class UserMeta:
    """What a user directory records about itself.

    ``created`` is seconds since the Unix epoch; ``embedder_dim`` is the vector length.
    """

    user_id: str
    created: float
    embedder_name: str | None = None
    embedder_dim: int | None = None
    config_fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in ``meta.json``."""
        return {
            "format": META_FORMAT,
            "user_id": self.user_id,
            "created": self.created,
            "embedder": None
            if self.embedder_name is None
            else {"name": self.embedder_name, "dim": self.embedder_dim},
            "config_fingerprint": self.config_fingerprint,
        }

    @classmethod
    def from_dict(cls, d: Any, path: Path) -> UserMeta:
        """Parse :meth:`to_dict` output; :class:`CorruptDataError` naming ``path`` if malformed."""
        if not isinstance(d, dict):
            raise CorruptDataError(f"{path}: meta is not a JSON object")
        fmt = d.get("format")
        if not isinstance(fmt, int) or fmt < 1:
            raise CorruptDataError(f"{path}: meta has invalid format {fmt!r}")
        if fmt > META_FORMAT:
            raise NewerFormatError(f"{path}: meta format {fmt} is newer than this build reads")
        user_id = d.get("user_id")
        created = d.get("created")
        emb = d.get("embedder")
        fp = d.get("config_fingerprint")
        if not isinstance(user_id, str) or not user_id:
            raise CorruptDataError(f"{path}: meta has no valid user_id")
        if not isinstance(created, (int, float)) or isinstance(created, bool):
            raise CorruptDataError(f"{path}: meta has no valid created time")
        name: str | None = None
        dim: int | None = None
        if emb is not None:
            if not (
                isinstance(emb, dict)
                and isinstance(emb.get("name"), str)
                and isinstance(emb.get("dim"), int)
                and not isinstance(emb.get("dim"), bool)
            ):
                raise CorruptDataError(f"{path}: meta has a malformed embedder entry")
            name, dim = emb["name"], emb["dim"]
        if fp is not None and not isinstance(fp, str):
            raise CorruptDataError(f"{path}: meta has a malformed config_fingerprint")
        return cls(user_id, float(created), name, dim, fp)

    def with_embedder(self, name: str, dim: int, config_fingerprint: str | None) -> UserMeta:
        """This meta with embedder ``name`` (``dim`` dimensions) and ``config_fingerprint``
        recorded, or this very object when nothing changes (a changed fingerprint is logged).

        Raises:
            InvalidInput: an empty name or a dim that is not a positive int.
            EmbedderMismatch: the user's data was written with another embedder or dim.
        """
        if not isinstance(name, str) or not name or not isinstance(dim, int) or dim <= 0:
            raise InvalidInput(
                f"embedder must be a non-empty name and a positive dim, got {name!r}, {dim!r}"
            )
        if self.embedder_name is not None and (
            self.embedder_name != name or self.embedder_dim != dim
        ):
            raise EmbedderMismatch(
                f"user {self.user_id!r}: stored memories were embedded with "
                f"{self.embedder_name!r} (dim {self.embedder_dim}) but the configured embedder "
                f"is {name!r} (dim {dim}); configure the original embedder, or, with it "
                "configured, convert the stored embeddings: memoryos reembed --embedder ..."
            )
        changes: dict[str, Any] = {}
        if self.embedder_name is None:
            changes.update(embedder_name=name, embedder_dim=dim)
        if config_fingerprint is not None and config_fingerprint != self.config_fingerprint:
            if self.config_fingerprint is not None:
                log.warning(
                    "user_config_changed",
                    user_id=self.user_id,
                    old=self.config_fingerprint,
                    new=config_fingerprint,
                )
            changes["config_fingerprint"] = config_fingerprint
        return replace_meta(self, **changes) if changes else self


def meta_bytes(path: Path) -> bytes | None:
    """The meta file's bytes, None when it is missing; :class:`CorruptDataError` when it
    cannot be read (one read: its blankness and its content both come from these bytes)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptDataError(f"{path}: cannot read meta: {exc}") from exc


def is_blank_content(raw: bytes) -> bool:
    """Whether file content ``raw`` is blank (as :func:`~memoryos_actors.store._files.is_blank`)."""
    return raw.count(0) == len(raw)


def read_meta(path: Path) -> UserMeta:
    """The meta file at ``path``; :class:`CorruptDataError` when missing or malformed."""
    raw = meta_bytes(path)
    if raw is None:
        raise CorruptDataError(f"{path}: cannot read meta: missing")
    return parse_meta(raw, path)


def parse_meta(raw: bytes, path: Path) -> UserMeta:
    """Meta file content ``raw`` (read from ``path``, named in errors) parsed."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptDataError(f"{path}: meta is not valid JSON: {exc}") from None
    return UserMeta.from_dict(doc, path)


def write_meta(path: Path, meta: UserMeta, *, durable: bool = True) -> None:
    """Write ``meta`` to ``path`` atomically (fsynced when ``durable``)."""
    data = json.dumps(meta.to_dict(), ensure_ascii=False, indent=1).encode("utf-8")
    atomic_write(path, data, "meta", durable=durable)


def replace_meta(meta: UserMeta, **changes: Any) -> UserMeta:
    """``meta`` with ``changes`` (field names and values)."""
    return replace(meta, **changes)
