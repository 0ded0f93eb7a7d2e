"""Tenants and their API keys: key generation, the hashed key file, lookup.

An API key belongs to exactly one tenant. A key looks like ``mos_<key id>_<secret>``: the
key id (12 hex digits) finds the record, the whole key is compared by its SHA-256 digest.
Only digests are stored. Keys are 256-bit random tokens, so a fast hash is enough (there
is nothing to brute-force that a slow password hash would protect).

The key file is JSON, written atomically with mode 0600::

    {"format": "memoryos-actors/api-keys", "version": 1,
     "keys": [{"key_id": "3f9a0c1b2d4e", "tenant": "acme", "sha256": "<64 hex digits>",
               "created": 1763900000.0, "rate_per_second": null, "burst": null,
               "note": "chat bot"}]}

``rate_per_second``/``burst`` override the server's default request limit for that key.
Create keys with ``memoryos keys add --tenant NAME`` (the key is printed once).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, StorageError

__all__ = [
    "KeyRecord",
    "KeyStore",
    "check_tenant",
    "generate_key",
    "hash_key",
]

_FORMAT = "memoryos-actors/api-keys"
_VERSION = 1
_TENANT = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_KEY = re.compile(r"^mos_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: Seconds between checks of the key file's modification time.
_RELOAD_EVERY_S = 1.0


def check_tenant(name: object) -> str:
    """``name`` if it is a valid tenant name (1-63 of ``a-z 0-9 _ . -``, starting with a
    letter or digit), else :class:`InvalidInput`."""
    if not isinstance(name, str) or not _TENANT.match(name):
        raise InvalidInput(
            f"tenant name {name!r} is invalid: use 1-63 characters of a-z, 0-9, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return name


def hash_key(key: str) -> str:
    """Hex SHA-256 digest of an API key (what the key file stores)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key() -> tuple[str, str]:
    """A new random API key and its key id: ``(key, key_id)``."""
    key_id = secrets.token_hex(6)
    return f"mos_{key_id}_{secrets.token_urlsafe(32)}", key_id


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


class KeyStore:
    """The key file of a server: add, revoke, list and look up keys.

    Lookups re-read the file when its modification time changed (checked at most once a
    second), so keys added or revoked with ``memoryos keys`` take effect on a running
    server without a restart.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._records: dict[str, KeyRecord] = {}
        self._mtime: int | None = None
        self._checked = 0.0
        self._load()

    # -- file ------------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._records, self._mtime = {}, None
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StorageError(f"{self.path}: cannot read the key file: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise StorageError(f"{self.path}: not a memoryos-actors key file")
        if int(data.get("version", 0)) > _VERSION:
            raise StorageError(
                f"{self.path}: key file version {data.get('version')} is newer "
                f"than this library reads ({_VERSION})"
            )
        records = {}
        for raw in data.get("keys", []):
            rec = KeyRecord.from_dict(raw, str(self.path))
            records[rec.key_id] = rec
        self._records, self._mtime = records, stat.st_mtime_ns

    def _save(self) -> None:
        payload = {
            "format": _FORMAT,
            "version": _VERSION,
            "keys": [asdict(r) for r in self._records.values()],
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".keys-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(payload, fh, indent=2)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._mtime = self.path.stat().st_mtime_ns

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < _RELOAD_EVERY_S:
            return
        self._checked = now
        try:
            mtime: int | None = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime != self._mtime:
            try:
                self._load()
            except StorageError:
                pass  # a half-edited file: keep serving with the keys we had

    # -- operations ------------------------------------------------------------------------

    def add(
        self,
        tenant: str,
        *,
        rate_per_second: float | None = None,
        burst: int | None = None,
        note: str = "",
    ) -> tuple[str, KeyRecord]:
        """Make a key for ``tenant``; returns ``(key, record)``. The key is not stored."""
        check_tenant(tenant)
        if rate_per_second is not None and not rate_per_second > 0:
            raise InvalidInput(f"rate_per_second must be > 0, got {rate_per_second!r}")
        if burst is not None and burst < 1:
            raise InvalidInput(f"burst must be >= 1, got {burst!r}")
        with self._lock:
            self._load()
            while True:
                key, key_id = generate_key()
                if key_id not in self._records:
                    break
            rec = KeyRecord(
                key_id, tenant, hash_key(key), time.time(), rate_per_second, burst, note
            )
            self._records[key_id] = rec
            self._save()
        return key, rec

    def revoke(self, key_id: str) -> KeyRecord:
        """Remove the key ``key_id``; :class:`InvalidInput` if there is none."""
        with self._lock:
            self._load()
            rec = self._records.pop(key_id, None)
            if rec is None:
                raise InvalidInput(f"no key with id {key_id!r} in {self.path}")
            self._save()
        return rec

    def records(self) -> list[KeyRecord]:
        """Every key record, oldest first."""
        with self._lock:
            self._maybe_reload()
            return sorted(self._records.values(), key=lambda r: r.created)

    def lookup(self, key: object) -> KeyRecord | None:
        """The record of ``key`` if it is a valid key, else None (constant-time compare)."""
        if not isinstance(key, str):
            return None
        m = _KEY.match(key)
        if m is None:
            return None
        with self._lock:
            self._maybe_reload()
            rec = self._records.get(m.group(1))
        if rec is None:
            return None
        return rec if hmac.compare_digest(rec.sha256, hash_key(key)) else None
