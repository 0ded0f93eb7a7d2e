"""The API key file's format: its records, read and checked in one place.

The key file is JSON, written atomically with mode 0600 by
:class:`~memoryos_actors.server.keys.KeyStore`::

    {"format": "memoryos-actors/api-keys", "version": 1,
     "keys": [{"key_id": "3f9a0c1b2d4e", "tenant": "acme", "sha256": "<64 hex digits>",
               "created": 1763900000.0, "rate_per_second": null, "burst": null,
               "note": "chat bot"}]}

The server, the ``keys`` commands and ``memoryos doctor`` all read it through
:func:`parse_key_file`, so each of them accepts and refuses exactly the same files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, StorageError

__all__ = ["KEY_FILE_FORMAT", "KEY_FILE_VERSION", "KeyRecord", "check_tenant", "parse_key_file"]

KEY_FILE_FORMAT = "memoryos-actors/api-keys"
KEY_FILE_VERSION = 1
_FORMAT = KEY_FILE_FORMAT
_VERSION = KEY_FILE_VERSION
_TENANT = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def check_tenant(name: object) -> str:
    """``name`` if it is a valid tenant name (1-63 of ``a-z 0-9 _ . -``, starting with a
    letter or digit), else :class:`InvalidInput`."""
    if not isinstance(name, str) or not _TENANT.match(name):
        raise InvalidInput(
            f"tenant name {name!r} is invalid: use 1-63 characters of a-z, 0-9, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One API key as stored (never the key itself).

    Attributes:
        key_id: public part of the key, 12 hex digits; names the key in logs and commands.
        tenant: the tenant the key belongs to.
        sha256: hex SHA-256 digest of the whole key.
        created: when the key was made, seconds since the epoch.
        rate_per_second: request limit of this key (sustained), or None for the default.
        burst: requests this key may send at once, or None for the default.
        note: free text.
    """

    key_id: str
    tenant: str
    sha256: str
    created: float
    rate_per_second: float | None = None
    burst: int | None = None
    note: str = ""

    @classmethod
    def from_dict(cls, d: Any, where: str) -> KeyRecord:
        """Validate one record read from the key file (``where`` names it in errors)."""
        if not isinstance(d, dict):
            raise StorageError(f"{where}: a key record must be an object")
        try:
            rec = cls(
                key_id=str(d["key_id"]),
                tenant=check_tenant(d["tenant"]),
                sha256=str(d["sha256"]),
                created=float(d.get("created", 0.0)),
                rate_per_second=None
                if d.get("rate_per_second") is None
                else float(d["rate_per_second"]),
                burst=None if d.get("burst") is None else int(d["burst"]),
                note=str(d.get("note", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageError(f"{where}: bad key record: {exc}") from None
        if not re.fullmatch(r"[0-9a-f]{12}", rec.key_id) or not re.fullmatch(
            r"[0-9a-f]{64}", rec.sha256
        ):
            raise StorageError(f"{where}: bad key_id or sha256 in record {rec.key_id!r}")
        if (rec.rate_per_second is not None and not rec.rate_per_second > 0) or (
            rec.burst is not None and rec.burst < 1
        ):
            raise StorageError(f"{where}: key {rec.key_id}: rate and burst must be positive")
        return rec


def parse_key_file(path: Path) -> dict[str, KeyRecord]:
    """Every record of the key file at ``path``, by key id; :class:`StorageError` (one line naming the file and
    what is wrong) for anything that is not a whole, valid key file."""
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise StorageError(f"{where}: cannot read the key file: nested too deeply") from None
    except (OSError, ValueError) as exc:
        raise StorageError(f"{where}: cannot read the key file: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise StorageError(f"{where}: not a memoryos-actors key file")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise StorageError(f"{where}: key file version must be an int >= 1, not {version!r:.40}")
    if version > _VERSION:
        raise StorageError(
            f"{where}: key file version {version} is newer than this library reads ({_VERSION})"
        )
    raw_keys = data.get("keys", [])
    if not isinstance(raw_keys, list):
        raise StorageError(f"{where}: 'keys' must be a list of key records")
    records: dict[str, KeyRecord] = {}
    for raw in raw_keys:
        rec = KeyRecord.from_dict(raw, where)
        if rec.key_id in records:
            raise StorageError(f"{where}: key {rec.key_id} is listed twice")
        records[rec.key_id] = rec
    return records
