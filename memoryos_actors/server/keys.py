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
from dataclasses import asdict
from pathlib import Path

import structlog

from ..errors import InvalidInput, StorageError
from ..operations import (
    KEY_FILE_FORMAT,
    KEY_FILE_VERSION,
    KeyRecord,
    check_tenant,
    parse_key_file,
)

log = structlog.get_logger("memoryos.server")

__all__ = [
    "KeyRecord",
    "KeyStore",
    "check_tenant",
    "generate_key",
    "hash_key",
]

_FORMAT = KEY_FILE_FORMAT
_VERSION = KEY_FILE_VERSION
_KEY = re.compile(r"^mos_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
#: Seconds between checks of the key file's modification time.
_RELOAD_EVERY_S = 1.0


def hash_key(key: str) -> str:
    """Hex SHA-256 digest of an API key (what the key file stores)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key() -> tuple[str, str]:
    """A new random API key and its key id: ``(key, key_id)``."""
    key_id = secrets.token_hex(6)
    return f"mos_{key_id}_{secrets.token_urlsafe(32)}", key_id


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
        self._problem: str | None = None
        self._checked = 0.0
        self._load()

    # -- file ------------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._records, self._mtime, self._problem = {}, None, None
            return
        records = parse_key_file(self.path)
        self._records, self._mtime, self._problem = records, stat.st_mtime_ns, None

    @property
    def problem(self) -> str | None:
        """Why the key file cannot be used right now (None when it can): a file changed
        into something that is not a valid key file. Until it is fixed no key is valid, not
        even the ones it held before: a key removed by a hand edit with a typo elsewhere
        must not stay valid. Re-checked like lookups (at most once a second)."""
        with self._lock:
            self._maybe_reload()
            return self._problem

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
        if mtime != self._mtime or self._problem is not None:
            try:
                self._load()
            except StorageError as exc:
                # Serve nothing stale: the keys the file held before may be the ones the
                # edit meant to remove. Said once per change of the file, not per request.
                if str(exc) != self._problem or mtime != self._mtime:
                    log.error("key_file_invalid", path=str(self.path), error=str(exc))
                self._records, self._mtime, self._problem = {}, mtime, str(exc)

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
