"""``memoryos ingest FILE --server URL --key KEY``: store a file's turns through a running
``memoryos serve`` instead of opening its data directory (which the server holds).

Each user's turns go, in the file's order, in batches to the server's batch route
(``POST /v1/users/{user}/turns/batch``), each turn with the same turn key a local ingest
gives it: a run stopped part way, or a batch sent again after an error, stores every turn
once, and a file ingested locally before is not stored twice through the server (within
the turn keys a user keeps). The user ids are the key's tenant's. A busy server (503, or
429 for the key's request limit) is asked again after its ``Retry-After``; a batch larger
than the server takes (413) is split. Standard library only: the command needs no extra.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from ..errors import InvalidInput

__all__ = ["BATCH_BYTES", "BATCH_TURNS", "RemoteIngest", "batches", "check_remote_args"]

#: Most turns in one request (the server takes up to 1000).
BATCH_TURNS = 200
#: Most bytes of JSON in one request (the server's default limit is 512 KiB).
BATCH_BYTES = 256 * 1024
#: Seconds to keep asking a busy server (503, 429) again before giving up.
BUSY_PATIENCE_S = 120.0


class Turn(Protocol):
    """What is sent of one turn (the ingest's own record type has these fields)."""

    @property
    def user_id(self) -> str: ...
    @property
    def query(self) -> str: ...
    @property
    def response(self) -> str: ...
    @property
    def timestamp(self) -> float | None: ...
    @property
    def where(self) -> str: ...
    @property
    def turn_key(self) -> str: ...


def _wire(turn: Turn) -> dict[str, Any]:
    body: dict[str, Any] = {"query": turn.query, "response": turn.response}
    body["turn_key"] = turn.turn_key
    if turn.timestamp is not None:
        body["timestamp"] = turn.timestamp
    return body


def batches(turns: Sequence[Turn]) -> Iterator[list[Turn]]:
    """The turns grouped by user (users in order of first appearance, each user's turns in
    file order), cut into batches of at most :data:`BATCH_TURNS` turns and about
    :data:`BATCH_BYTES` bytes."""
    by_user: dict[str, list[Turn]] = {}
    for turn in turns:
        by_user.setdefault(turn.user_id, []).append(turn)
    for own in by_user.values():
        batch: list[Turn] = []
        size = 0
        for turn in own:
            cost = len(json.dumps(_wire(turn)).encode("utf-8")) + 1
            if batch and (len(batch) >= BATCH_TURNS or size + cost > BATCH_BYTES):
                yield batch
                batch, size = [], 0
            batch.append(turn)
            size += cost
        if batch:
            yield batch


class RemoteIngest:
    """Sends batches of turns to the server at ``url`` with API key ``key``.

    Raises :class:`InvalidInput` (the command's exit code 2) for what the server refuses,
    naming the file's line when the server names the turn, and for a server it cannot
    reach.
    """

    def __init__(self, url: str, key: str, *, sleep: Callable[[float], None] = time.sleep) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise InvalidInput(f"--server must be an http(s) URL, got {url!r}")
        if not key.strip():
            raise InvalidInput("--server needs --key KEY: an API key of the server's tenant")
        self.url = url.rstrip("/")
        self.key = key.strip()
        self.sleep = sleep

    def send(self, batch: Sequence[Turn]) -> int:
        """Store ``batch`` (one user's turns); how many turns it held."""
        if not batch:
            return 0
        status, body = self._post_when_free(batch)
        if status == 201:
            return len(batch)
        if status == 413 and len(batch) > 1:
            half = len(batch) // 2
            return self.send(batch[:half]) + self.send(batch[half:])
        raise InvalidInput(self._refusal(batch, status, body))

    def _post_when_free(self, batch: Sequence[Turn]) -> tuple[int, dict[str, Any]]:
        """POST ``batch``; asked again while the server answers busy, within patience
        (the turn keys make a batch sent twice store each turn once)."""
        give_up = time.monotonic() + BUSY_PATIENCE_S
        while True:
            status, body, retry_after = self._post(batch)
            if status not in (429, 503) or time.monotonic() + retry_after > give_up:
                return status, body
            self.sleep(retry_after)

    def _post(self, batch: Sequence[Turn]) -> tuple[int, dict[str, Any], float]:
        user = urllib.parse.quote(batch[0].user_id, safe="")
        data = json.dumps({"turns": [_wire(t) for t in batch]}).encode("utf-8")
        request = urllib.request.Request(
            f"{self.url}/v1/users/{user}/turns/batch",
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as resp:  # noqa: S310 - http(s) checked
                return resp.status, _json(resp.read()), 0.0
        except urllib.error.HTTPError as exc:
            retry = exc.headers.get("Retry-After", "1") if exc.headers else "1"
            try:
                wait = min(max(float(retry), 0.1), 30.0)
            except ValueError:
                wait = 1.0
            return exc.code, _json(exc.read()), wait
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InvalidInput(f"cannot reach the server at {self.url}: {reason}") from None

    def _refusal(self, batch: Sequence[Turn], status: int, body: dict[str, Any]) -> str:
        error = body.get("error")
        said = error.get("message") if isinstance(error, dict) else None
        message = str(said or body or f"HTTP {status}")
        if status == 401:
            return f"the server at {self.url} refused the key (401): {message}"
        at = _failed_turn(message, len(batch))
        where = batch[at].where if at is not None else f"{batch[0].where} and after"
        return f"{where}: the server refused the turn ({status}): {message}"


def _failed_turn(message: str, size: int) -> int | None:
    """Which turn of a batch the server's error names (``turn N of the batch: ...``)."""
    import re

    found = re.match(r"turn (\d+) of the batch", message)
    if found is None:
        return None
    n = int(found.group(1))
    return n if n < size else None


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw.decode("utf-8", "replace") or "{}")
    except ValueError:
        return {"error": {"message": raw.decode("utf-8", "replace")[:300]}}
    return value if isinstance(value, dict) else {}


def check_remote_args(tenant: str | None) -> None:
    """``--server`` takes the tenant from the key: a ``--tenant`` as well is refused, as it
    could name another one."""
    if tenant is not None:
        raise InvalidInput(
            "ingest --server takes the tenant from --key (the server maps the key to its "
            "tenant): drop --tenant (and $MEMORYOS_TENANT)"
        )
