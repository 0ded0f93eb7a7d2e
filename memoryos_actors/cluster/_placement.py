"""Where a user lives in a sharded data directory, and how users move when the count changes.

A sharded data directory looks like this::

    <data dir>/
        LOCK                  held by the facade (one facade per sharded data directory)
        shards.json           the layout: how many shards, which placement function
        shard-0000/           one shard's data directory: LOCK, users/<user dir>/...
        shard-0001/
        ...

Each ``shard-NNNN`` directory is an ordinary data directory of the in-process system (the
shard process opens it with :meth:`MemoryOS.open <memoryos_actors.MemoryOS.open>`).

Placement is :func:`shard_of`: a jump consistent hash (Lamping and Veach, 2014) of a
64-bit BLAKE2b digest of the user id's UTF-8 bytes. It is stable across processes,
machines and Python versions (Python's own ``hash`` of a str is salted per process, so it
cannot place data). Going from N to N+1 shards moves only the users whose new shard is the
new one, about 1/(N+1) of them; going down moves only the users of the removed shards.

Changing the shard count is :func:`rebalance_shards`, run while no facade has the data
directory open (every user is then passive): it moves each user whose shard changes, one
directory rename per user, and records the new count. An interrupted rebalance leaves the
layout marked as in progress; opening refuses such a directory and running the rebalance
again finishes the job.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memoryos_actors.errors import (
    ConfigError,
    CorruptDataError,
    DataDirLocked,
    InvalidInput,
    StorageError,
)
from memoryos_actors.store._files import fsync_dir
from memoryos_actors.store.lock import DataDirLock
from memoryos_actors.store.userstore import USERS_DIR, list_users, user_path

__all__ = [
    "LAYOUT_FILE",
    "MAX_SHARDS",
    "PLACEMENT",
    "RebalanceReport",
    "ShardLayout",
    "jump_hash",
    "new_cluster_id",
    "read_layout",
    "rebalance_shards",
    "shard_dir",
    "shard_namespace",
    "shard_of",
    "unshard",
    "user_key",
    "write_layout",
]

LAYOUT_FILE = "shards.json"
"""Name of the layout file at the top of a sharded data directory."""

PLACEMENT = "jump/blake2b-64"
"""Name of the placement function, recorded in the layout so a future change is detected."""

MAX_SHARDS = 4096
"""Most shards a data directory may have (directory names have four digits)."""

_LAYOUT_FORMAT = "memoryos-actors/shard-layout"
_LAYOUT_VERSION = 1
_MASK64 = (1 << 64) - 1
_JUMP_MULTIPLIER = 2862933555777941757  # the 64-bit LCG step of the jump hash paper


def user_key(user_id: str) -> int:
    """A stable 64-bit key of ``user_id``: the first 8 bytes of its BLAKE2b digest."""
    digest = hashlib.blake2b(user_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def jump_hash(key: int, buckets: int) -> int:
    """Lamping and Veach's jump consistent hash: the bucket in ``[0, buckets)`` of ``key``.

    ``key`` is taken modulo 2**64. When ``buckets`` grows by one, a key either keeps its
    bucket or moves to the new bucket ``buckets - 1``; each key moves with probability
    ``1 / buckets``.
    """
    if buckets < 1:
        raise InvalidInput(f"buckets must be >= 1, got {buckets}")
    key &= _MASK64
    bucket, candidate = -1, 0
    while candidate < buckets:
        bucket = candidate
        key = (key * _JUMP_MULTIPLIER + 1) & _MASK64
        candidate = int((bucket + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return bucket


def shard_of(user_id: str, shards: int) -> int:
    """The shard (``0 <= shard < shards``) that holds ``user_id``."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput(f"shards must be an int in [1, {MAX_SHARDS}], got {shards!r}")
    return jump_hash(user_key(user_id), shards)


def shard_dir(data_dir: str | os.PathLike[str], shard: int) -> Path:
    """The data directory of shard number ``shard`` under a sharded ``data_dir``."""
    return Path(data_dir) / f"shard-{shard:04d}"


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The content of ``shards.json``.

    Attributes:
        shards: the shard count users are placed by.
        rebalancing_from: the previous shard count while a rebalance is in progress, else
            ``None``.
        generation: counts the layout's changes: 1 when the directory became sharded, one
            more at every :func:`rebalance_shards` (a file without it reads as 1). A front
            door that sees another generation than the one it opened stops routing.
        cluster_id: the data directory's identity (a random hex id made when it became
            sharded; ``None`` in files written before it existed); names the shared Ray
            shards with the generation (see :func:`shard_namespace`).
    """

    shards: int
    rebalancing_from: int | None = None
    generation: int = 1
    cluster_id: str | None = None


def read_layout(data_dir: str | os.PathLike[str]) -> ShardLayout | None:
    """The layout of a sharded ``data_dir``; ``None`` if it has no layout file yet.

    Raises :class:`CorruptDataError` naming the file when it is unreadable or was written
    with another placement function.
    """
    path = Path(data_dir) / LAYOUT_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptDataError(f"{path}: cannot read the shard layout: {exc}") from exc
    try:
        doc = json.loads(raw.decode("utf-8"))
        if doc.get("format") != _LAYOUT_FORMAT:
            raise ValueError("not a shard layout file")
        if _whole(doc, "version", 0) > _LAYOUT_VERSION:
            raise ValueError(f"layout version {doc.get('version')} is newer than this library")
        if doc.get("placement") != PLACEMENT:
            raise ValueError(f"placement {doc.get('placement')!r} is not {PLACEMENT!r}")
        shards = _whole(doc, "shards")
        moving = None if doc.get("rebalancing_from") is None else _whole(doc, "rebalancing_from")
        generation = _whole(doc, "generation", 1)
        ident = doc.get("cluster_id")
        if ident is not None and not (isinstance(ident, str) and ident.isalnum()):
            raise ValueError(f"cluster_id {ident!r} is not an alphanumeric string")
        if generation < 1:
            raise ValueError(f"generation {generation} is not >= 1")
        layout = ShardLayout(shards, None if moving is None else int(moving), generation, ident)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptDataError(f"{path}: not a usable shard layout: {exc}") from None
    if not 1 <= layout.shards <= MAX_SHARDS:
        raise CorruptDataError(f"{path}: shard count {layout.shards} is out of range")
    if layout.rebalancing_from is None:
        _refuse_stray_shards(Path(data_dir), layout)
    return layout


def _whole(doc: dict[str, Any], key: str, default: int | None = None) -> int:
    """``doc[key]`` if it is a whole number written as one (``true``, ``"3"`` and ``3.0``
    are not counts); ``default`` when absent and one is given."""
    if key not in doc and default is not None:
        return default
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be a whole number, not {value!r:.40}")
    return value


def _refuse_stray_shards(root: Path, layout: ShardLayout) -> None:
    """Refuse a layout whose count leaves users out: a shard directory at or past the
    recorded count that holds users (a hand edit, a restored older ``shards.json``) would
    make them invisible, and a write would create a second copy of one on another shard."""
    try:
        stray = [
            n
            for n in _existing_shards(root)
            if n >= layout.shards and list_users(shard_dir(root, n), damaged={})
        ]
    except OSError:
        return  # nothing readable to compare with: the shards report their own errors
    if stray:
        last = stray[-1]
        raise CorruptDataError(
            f"{root / LAYOUT_FILE}: records {layout.shards} shards, but "
            f"{shard_dir(root, stray[0]).name} (past that count) holds users; the file is "
            f'not the one these shards were written with: set "shards" to {last + 1} and, '
            f"to have fewer shards, run `memoryos rebalance --shards {layout.shards}`"
        )


def _layout_bytes(layout: ShardLayout) -> bytes:
    doc: dict[str, Any] = {
        "format": _LAYOUT_FORMAT,
        "version": _LAYOUT_VERSION,
        "placement": PLACEMENT,
        "shards": layout.shards,
        "generation": layout.generation,
    }
    if layout.cluster_id is not None:
        doc["cluster_id"] = layout.cluster_id
    if layout.rebalancing_from is not None:
        doc["rebalancing_from"] = layout.rebalancing_from
    return json.dumps(doc, indent=1).encode("utf-8")


def _write_tmp(root: Path, layout: ShardLayout) -> Path:
    # A name of its own: front doors opening a new directory at once each write one.
    tmp = root / f"{LAYOUT_FILE}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(_layout_bytes(layout))
        fh.flush()
        os.fsync(fh.fileno())
    return tmp


def write_layout(data_dir: str | os.PathLike[str], layout: ShardLayout) -> None:
    """Write ``shards.json`` atomically (temporary file, fsync, rename, directory fsync)."""
    root = Path(data_dir)
    try:
        tmp = _write_tmp(root, layout)
        try:
            os.replace(tmp, root / LAYOUT_FILE)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(root)
    except OSError as exc:
        raise StorageError(f"{root / LAYOUT_FILE}: cannot write the shard layout: {exc}") from exc


def new_cluster_id() -> str:
    """A fresh identity for a data directory that becomes sharded (32 hex digits)."""
    return uuid.uuid4().hex


def _create_layout(root: Path, layout: ShardLayout) -> bool:
    """Write ``shards.json`` only if there is none (a hard link fails on an existing
    name, so two processes creating it at once leave exactly one); True if this call
    created it."""
    try:
        tmp = _write_tmp(root, layout)
        try:
            os.link(tmp, root / LAYOUT_FILE)
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(root)
    except OSError as exc:
        raise StorageError(f"{root / LAYOUT_FILE}: cannot write the shard layout: {exc}") from exc
    return True


def shard_namespace(data_dir: str | os.PathLike[str], layout: ShardLayout) -> str:
    """The Ray namespace of ``data_dir``'s shared shards for ``layout``'s generation.

    Derived from the directory's ``cluster_id`` (or, for a layout written before it
    existed, a digest of the directory's absolute path) and the generation, so that
    every front door of one generation finds the same shards, and shards of another
    generation are never found.
    """
    ident = layout.cluster_id
    if ident is None:
        path = os.fsencode(Path(data_dir).resolve())
        ident = hashlib.blake2b(path, digest_size=8).hexdigest()
    return f"memoryos-{ident}-g{layout.generation}"


def check_layout(data_dir: str | os.PathLike[str], shards: int) -> ShardLayout:
    """Make ``data_dir`` a sharded data directory for ``shards`` shards, or refuse; return
    its layout.

    A new directory gets a layout file (generation 1, a new ``cluster_id``; created
    atomically, so front doors opening it at once agree on one). An existing layout with
    another count, an interrupted rebalance, or users stored directly in ``data_dir`` (an
    in-process data directory) raise :class:`ConfigError` telling what to run.
    """
    root = Path(data_dir)
    layout = read_layout(root)
    if layout is None:
        if list_users(root):
            raise ConfigError(
                f"{root} is an in-process data directory (it has users/); run "
                f"rebalance_shards(data_dir, {shards}) once to move its users into shards"
            )
        _create_layout(root, ShardLayout(shards, cluster_id=new_cluster_id()))
        layout = read_layout(root)
        if layout is None:
            raise StorageError(f"{root / LAYOUT_FILE} vanished while it was being created")
    if layout.rebalancing_from is not None:
        raise ConfigError(
            f"{root}: a rebalance from {layout.rebalancing_from} to {layout.shards} shards was "
            f"interrupted; run rebalance_shards(data_dir, {layout.shards}) again to finish it"
        )
    if layout.shards != shards:
        raise ConfigError(
            f"{root} holds {layout.shards} shards, the cluster asks for {shards}; run "
            f"rebalance_shards(data_dir, {shards}) (`memoryos rebalance --shards {shards}`) "
            "first, with no facade or front door open"
        )
    return layout


@dataclass(frozen=True, slots=True)
class RebalanceReport:
    """What :func:`rebalance_shards` did.

    Attributes:
        shards_before: the shard count before (0 for an in-process data directory).
        shards_after: the shard count now (0: an in-process data directory again, after
            :func:`unshard`).
        moved: per moved user id, its ``(from, to)`` shard (``from`` is -1 for a user of an
            in-process data directory).
        removed_dirs: shard directories deleted because they were beyond the new count.
    """

    shards_before: int
    shards_after: int
    moved: dict[str, tuple[int, int]]
    removed_dirs: tuple[str, ...]


def _existing_shards(root: Path) -> list[int]:
    found = []
    for entry in root.iterdir():
        name = entry.name
        if entry.is_dir() and name.startswith("shard-") and name[6:].isdigit():
            found.append(int(name[6:]))
    return sorted(found)


def _move_user(user_id: str, src_root: Path, dst_root: Path) -> None:
    src = user_path(src_root, user_id)
    dst = user_path(dst_root, user_id)
    if dst.exists():
        raise CorruptDataError(
            f"user {user_id!r} has files in both {src} and {dst}; keep the right one and run "
            "the rebalance again"
        )
    try:
        (dst_root / USERS_DIR).mkdir(parents=True, exist_ok=True)
        # One rename per user: atomic on one file system, so a crash leaves the user whole
        # in one place or the other, and the next run picks up where this one stopped.
        os.rename(src, dst)
        fsync_dir(dst.parent)
        fsync_dir(src.parent)
    except OSError as exc:
        raise StorageError(
            f"moving user {user_id!r} from {src} to {dst} failed: {exc}; the shards must be "
            "directories on one file system"
        ) from exc


def _remove_if_empty(directory: Path) -> bool:
    """Delete a shard directory that holds no user (only its lock file); True if deleted."""
    users = directory / USERS_DIR
    if users.is_dir() and any(users.iterdir()):
        return False
    leftovers = [p for p in directory.iterdir() if p.name not in ("LOCK", USERS_DIR)]
    if leftovers:
        return False
    if users.is_dir():
        users.rmdir()
    (directory / "LOCK").unlink(missing_ok=True)
    directory.rmdir()
    return True


def rebalance_shards(data_dir: str | os.PathLike[str], shards: int) -> RebalanceReport:
    """Move users between shard directories so that ``data_dir`` has ``shards`` shards.

    Run it while no facade (and no shard process) has the data directory open: it takes
    the data directory's lock and every shard's lock, so a live cluster makes it fail with
    :class:`~memoryos_actors.errors.DataDirLocked` before anything moves. Every user is
    then passive, and moving one is one directory rename. Also turns an in-process data
    directory (users directly under ``data_dir/users/``) into a sharded one.

    Safe to interrupt: the layout says "in progress" until the last user has moved, and
    running it again with the same ``shards`` finishes the job. Shard directories beyond
    the new count are deleted once empty. All shard directories must be on one file
    system (a rename cannot cross file systems; a shared file system mounted at the same
    path on every node is what a multi-node cluster needs anyway).
    """
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput(f"shards must be an int in [1, {MAX_SHARDS}], got {shards!r}")
    root = Path(data_dir)
    if not root.is_dir():
        raise InvalidInput(f"{root}: no such data directory")
    with DataDirLock(root):
        layout = read_layout(root)
        before = (
            0
            if layout is None
            else (layout.rebalancing_from if layout.rebalancing_from is not None else layout.shards)
        )
        if layout is not None and layout.rebalancing_from is not None and layout.shards != shards:
            raise ConfigError(
                f"{root}: an interrupted rebalance to {layout.shards} shards must be finished "
                f"first: run rebalance_shards(data_dir, {layout.shards})"
            )
        existing = _existing_shards(root)
        # The next generation from the first write on: a front door still open on the
        # old one sees the change (and stops routing) as soon as anything moves. An
        # interrupted rebalance being finished keeps the generation it started.
        generation = 1 if layout is None else layout.generation
        if layout is not None and layout.rebalancing_from is None:
            generation += 1
        ident = (layout.cluster_id if layout is not None else None) or new_cluster_id()
        locks = []
        try:
            for n in existing:
                try:
                    locks.append(DataDirLock(shard_dir(root, n)))
                except DataDirLocked as exc:
                    raise DataDirLocked(
                        f"shard {n} of generation {0 if layout is None else layout.generation} "
                        f"is still running ({exc}); stop the shards first (`memoryos shards "
                        "stop DATA_DIR --ray ADDRESS`, or close the facade)"
                    ) from None
            write_layout(root, ShardLayout(shards, before, generation=generation, cluster_id=ident))
            moved: dict[str, tuple[int, int]] = {}
            # Users of an in-process data directory first, then every shard's users.
            sources = [(-1, root)] + [(n, shard_dir(root, n)) for n in existing]
            for number, src_root in sources:
                for uid in list_users(src_root):
                    target = shard_of(uid, shards)
                    if number == target:
                        continue
                    dst_root = shard_dir(root, target)
                    dst_root.mkdir(exist_ok=True)
                    _move_user(uid, src_root, dst_root)
                    moved[uid] = (number, target)
        finally:
            for lock in locks:
                lock.release()
        removed = []
        for n in existing:
            if n >= shards and _remove_if_empty(shard_dir(root, n)):
                removed.append(str(shard_dir(root, n)))
        users_root = root / USERS_DIR
        if users_root.is_dir() and not any(users_root.iterdir()):
            users_root.rmdir()
        write_layout(root, ShardLayout(shards, generation=generation, cluster_id=ident))
    return RebalanceReport(before, shards, moved, tuple(removed))


def unshard(data_dir: str | os.PathLike[str]) -> RebalanceReport:
    """Turn a sharded ``data_dir`` back into an in-process data directory (users under
    ``data_dir/users/``, no ``shards.json``, no shard directories).

    Like :func:`rebalance_shards`, run it while nothing has the data directory open (it
    takes the same locks), and it is safe to interrupt: every user first moves to shard 0
    (a rebalance to one shard), then out of it, one rename per user, and the layout file
    goes last; running it again finishes the job. ``moved`` maps each user to
    ``(shard, -1)``. A directory that is not sharded is left as it is.
    """
    root = Path(data_dir)
    if not root.is_dir():
        raise InvalidInput(f"{root}: no such data directory")
    if read_layout(root) is None:
        return RebalanceReport(0, 0, {}, ())
    first = rebalance_shards(root, 1)
    moved = {uid: (src, -1) for uid, (src, _dst) in first.moved.items()}
    removed = list(first.removed_dirs)
    with DataDirLock(root):
        only = shard_dir(root, 0)
        if only.is_dir():
            with DataDirLock(only):
                for uid in list_users(only):
                    _move_user(uid, only, root)
                    moved.setdefault(uid, (0, -1))
            if not _remove_if_empty(only):
                left = sorted(p.name for p in only.iterdir())
                raise StorageError(
                    f"{only} still holds {', '.join(left)} after its users "
                    "moved out; move or delete them, then run this again"
                )
            removed.append(str(only))
        try:
            (root / LAYOUT_FILE).unlink(missing_ok=True)
            fsync_dir(root)
        except OSError as exc:
            raise StorageError(
                f"{root / LAYOUT_FILE}: cannot remove the shard layout: {exc}"
            ) from exc
    return RebalanceReport(first.shards_before, 0, moved, tuple(removed))
