"""One user's files: WAL, snapshots, archive and meta, under ``<root>/users/<dir name>/``.

Layout of a user directory (the name comes from :func:`~memoryos_actors.store.paths.user_dir_name`)::

    meta.json       original user id, embedder name and dimension, config fingerprint
    wal.log         write-ahead log (see :mod:`~memoryos_actors.store.wal`)
    snapshots/      snapshot generations (see :mod:`~memoryos_actors.store.snapshot`)
    archive.log     evicted segments and pages (see :mod:`~memoryos_actors.store.archive`)
    cold.db         the cold index over the archive, derived and rebuildable
                    (see :mod:`~memoryos_actors.store.cold`)

Recovery (:meth:`UserStore.load`) is "newest readable snapshot, then every WAL record after
it". :meth:`UserStore.checkpoint` writes a snapshot and drops WAL records only up to the
*previous* snapshot, so falling back to the previous generation still loses nothing.
The store never starts empty over existing data: damaged files raise
:class:`~memoryos_actors.errors.CorruptDataError` naming them.

A new user's files hold nothing yet, so creating them costs no fsync: the directory, the
meta file and the WAL's name are made durable by the WAL's first fsync (before it counts as
done: at once for ``fsync="always"``, by the flusher for ``"interval"``, at close), or
before the first snapshot or archive record, whichever comes first. A machine crash before
that can leave the user's directory with blank files (see
:func:`~memoryos_actors.store._files.is_blank`) and no snapshot or archive: such leftovers
hold nothing, and opening the user starts it afresh (logged as ``user_creation_cut_short``).

The data-directory lock (:class:`~memoryos_actors.store.lock.DataDirLock`) is the caller's:
a :class:`UserStore` assumes its process owns ``root``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from memoryos_actors.errors import (
    CorruptDataError,
    InvalidInput,
    ReadOnlyError,
    StorageError,
    UnknownUser,
)
from memoryos_actors.store._files import fsync_dir, fsync_file, is_blank
from memoryos_actors.store._framing import log
from memoryos_actors.store.archive import Archive
from memoryos_actors.store.edits import EditLog
from memoryos_actors.store.formats import ArchiveRecord, WalRecord, decode_wal
from memoryos_actors.store.paths import user_dir_name, user_id_from_dir_name, validate_user_id
from memoryos_actors.store.snapshot import (
    SCHEMA_VERSION,
    Recovered,
    list_snapshots,
    read_latest_snapshot,
    write_snapshot,
)
from memoryos_actors.store.user_meta import (
    UserMeta,
    is_blank_content,
    meta_bytes,
    parse_meta,
    replace_meta,
    write_meta,
)
from memoryos_actors.store.wal import WAL

if TYPE_CHECKING:
    from memoryos_actors.store.cold import ColdIndex

__all__ = [
    "ARCHIVE_FILE",
    "META_FILE",
    "SNAPSHOT_DIR",
    "USERS_DIR",
    "WAL_FILE",
    "UserStore",
    "list_users",
    "remove_user",
    "user_exists",
    "user_path",
]

USERS_DIR = "users"
META_FILE = "meta.json"
WAL_FILE = "wal.log"
SNAPSHOT_DIR = "snapshots"
ARCHIVE_FILE = "archive.log"


def user_path(root: str | os.PathLike[str], user_id: str) -> Path:
    """The directory holding ``user_id``'s files under data directory ``root``."""
    return Path(root) / USERS_DIR / user_dir_name(user_id)


def _holds_nothing(directory: Path) -> bool:
    """Whether a user directory holds no data: only blank files (see
    :func:`~memoryos_actors.store._files.is_blank`), temporary files and empty directories,
    as a machine crash can leave a creation that was never fsynced."""
    try:
        for entry in directory.iterdir():
            if entry.is_symlink():
                return False
            if entry.is_dir():
                if any(entry.iterdir()):
                    return False
            elif not (entry.name.endswith(".tmp") or is_blank(entry)):
                return False
    except OSError:
        return False
    return True


def user_exists(root: str | os.PathLike[str], user_id: str) -> bool:
    """Whether ``user_id`` has a directory under data directory ``root``."""
    return user_path(root, user_id).is_dir()


def list_users(root: str | os.PathLike[str], *, damaged: dict[str, str] | None = None) -> list[str]:
    """The original ids of every user stored under data directory ``root``, sorted.

    A user whose meta file is unreadable is named by its directory name. A directory
    whose user can be named neither way is left out (and logged); with ``damaged`` (a
    dict), it is also added there as ``{directory name: reason}``: one user's damage
    never hides the others.
    """
    users_dir = Path(root) / USERS_DIR
    if not users_dir.is_dir():
        return []
    found: list[str] = []
    for entry in users_dir.iterdir():
        if not entry.is_dir() or entry.is_symlink():
            continue
        meta = entry / META_FILE
        reason = f"{meta}: missing, and {entry.name!r} is not a plain user dir name"
        try:
            raw = meta_bytes(meta)
            if raw is not None and not is_blank_content(raw):
                found.append(parse_meta(raw, meta).user_id)
                continue
        except CorruptDataError as exc:
            reason = str(exc)
        decoded = user_id_from_dir_name(entry.name)
        if decoded is None:
            if _holds_nothing(entry):
                continue  # a creation cut short by a machine crash: no user data
            log.error("user_dir_unnamed", path=str(entry), reason=reason)
            if damaged is not None:
                damaged[entry.name] = reason
            continue
        found.append(decoded)
    return sorted(found)


def _for_user(exc: CorruptDataError, user_id: str) -> CorruptDataError:
    """``exc`` naming ``user_id`` too, and the exact repair command for damage that a
    repair can salvage around."""
    if exc.intact_after is None or exc.user_id is not None:
        return exc
    message = str(exc.args[0]).replace(
        "memoryos repair USER", f"memoryos repair {shlex.quote(user_id)}"
    )
    return CorruptDataError(
        f"user {user_id!r}: {message}",
        path=exc.path,
        offset=exc.offset,
        intact_after=exc.intact_after,
        user_id=user_id,
    )


def _setting(explicit: Any, config: Any, attr: str, default: Any) -> Any:
    if explicit is not None:
        return explicit
    if config is not None and hasattr(config, attr):
        return getattr(config, attr)
    return default


class UserStore:
    """Open (creating unless ``create=False``) the files of ``user_id`` under data dir ``root``.

    ``embedder`` (name, dimension) is recorded in the meta file of a user created here, as
    :meth:`check_embedder` would record it, without writing the file twice.

    Settings come from the keyword arguments, else from ``config`` (any object with the
    ``MemoryConfig`` attributes ``fsync``, ``fsync_interval_seconds``, ``archive_enabled`` and
    a ``fingerprint()`` method), else from the defaults: ``fsync="interval"``,
    ``fsync_interval=0.1`` seconds, ``archive=True``.

    With ``read_only=True`` nothing under ``root`` is created, changed or deleted: the
    user must exist; the logs are opened read-only (what the tiers append is kept in
    memory, see :class:`~memoryos_actors.store._framing.RecordLog`), the cold index is
    built in memory from the one on disk, meta changes stay in memory and
    :meth:`checkpoint` raises :class:`ReadOnlyError`. Another process may be writing
    meanwhile: this store sees the files as they were when it opened them.

    Raises :class:`InvalidInput` for a bad user id, :class:`UnknownUser` when ``create`` is
    false (or ``read_only`` true) and the user has no directory, :class:`CorruptDataError`
    naming the file when stored data is damaged beyond automatic repair (for damage with
    intact records after it: the byte offset and their count as attributes too, see
    :func:`~memoryos_actors.store.repair.repair_user`).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        user_id: str,
        config: Any = None,
        *,
        fsync: str | None = None,
        fsync_interval: float | None = None,
        archive: bool | None = None,
        config_fingerprint: str | None = None,
        embedder: tuple[str, int] | None = None,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        validate_user_id(user_id)
        self.read_only = bool(read_only)
        if self.read_only:
            create = False
        self.root = Path(root)
        self.user_id = user_id
        self.dir = user_path(root, user_id)
        self.fsync: str = _setting(fsync, config, "fsync", "interval")
        self.fsync_interval: float = _setting(fsync_interval, config, "fsync_interval_seconds", 0.1)
        self.archive_enabled: bool = bool(_setting(archive, config, "archive_enabled", True))
        if (
            config_fingerprint is None
            and config is not None
            and callable(getattr(config, "fingerprint", None))
        ):
            config_fingerprint = config.fingerprint()
        self._closed = True
        #: Whether the user's directory, meta file and WAL name are durable (see the module
        #: docstring); False only for a user created by this store until its first fsync.
        self._durable = True
        self._durable_lock = threading.Lock()
        self.meta = self._open_meta(create, config_fingerprint, embedder)
        self.snapshot_dir = self.dir / SNAPSHOT_DIR
        fresh = not self._durable
        blank_wal: Any = False
        if self.read_only:
            # Asked only if the WAL does not read as a log: most opens never pay for it.
            blank_wal = self._wal_is_leftover
        elif not fresh:
            self._discard_blank_wal()
        try:
            self.wal = WAL(
                self.dir / WAL_FILE,
                fsync=self.fsync,
                interval=self.fsync_interval,
                sync_create=not fresh,
                on_first_sync=self._make_durable if fresh else None,
                read_only=self.read_only,
                empty_if_blank=blank_wal,
            )
        except CorruptDataError as exc:
            raise _for_user(exc, user_id) from None
        except BaseException:
            if fresh:
                self._discard_fresh()
            raise
        try:
            self.archive = Archive(
                self.dir / ARCHIVE_FILE,
                enabled=self.archive_enabled,
                fsync=self.fsync,
                interval=self.fsync_interval,
                before_create=self._make_durable,
                read_only=self.read_only,
            )
        except CorruptDataError as exc:
            self.wal.close()
            raise _for_user(exc, user_id) from None
        except BaseException:
            self.wal.close()
            if fresh:
                self._discard_fresh()
            raise
        #: The user's per-memory edits (deletions, corrections), as of :meth:`load`; the
        #: LPM actor adds new ones. Readers of the archive apply them.
        self.edits = EditLog()
        self._cold: ColdIndex | None = None
        self._snapshot_lsn: int | None = None
        self._closed = False

    @property
    def cold(self) -> ColdIndex:
        """The cold index over the archive; made on first use (its module, with numpy and
        the lexical tools, is imported only then: readers that never search, such as
        ``memoryos stats``, do without it), opened on first search, closed with the store."""
        if self._cold is None:
            from memoryos_actors.store.cold import COLD_FILE, ColdIndex

            self._cold = ColdIndex(
                self.dir / COLD_FILE,
                self.archive,
                self.user_id,
                edits=lambda: self.edits,
                read_only=self.read_only,
            )
        return self._cold

    # -- meta --------------------------------------------------------------------------------

    def _open_meta(
        self, create: bool, fingerprint: str | None, embedder: tuple[str, int] | None
    ) -> UserMeta:
        meta_path = self.dir / META_FILE
        if self.dir.is_dir():
            raw = meta_bytes(meta_path)
            blank = raw is not None and is_blank_content(raw)
            if blank:
                log.warning("user_meta_blank", path=str(meta_path), user_id=self.user_id)
            if raw is not None and not blank:
                meta = parse_meta(raw, meta_path)
                if meta.user_id != self.user_id:
                    raise StorageError(
                        f"{meta_path}: directory belongs to user {meta.user_id!r}, "
                        f"not {self.user_id!r} (directory name collision)"
                    )
                if fingerprint is not None and meta.config_fingerprint != fingerprint:
                    if self.read_only:
                        return replace_meta(meta, config_fingerprint=fingerprint)
                    if meta.config_fingerprint is not None:
                        log.warning(
                            "user_config_changed",
                            user_id=self.user_id,
                            old=meta.config_fingerprint,
                            new=fingerprint,
                        )
                    meta = replace_meta(meta, config_fingerprint=fingerprint)
                    write_meta(meta_path, meta)
                return meta
            others = sorted(p.name for p in self.dir.iterdir() if p.name != META_FILE)
            if self.read_only and (not others or _holds_nothing(self.dir)):
                raise UnknownUser(f"user {self.user_id!r} has no stored data")
            if others and _holds_nothing(self.dir):
                log.warning(
                    "user_creation_cut_short",
                    path=str(self.dir),
                    files=others,
                    user_id=self.user_id,
                )
                self._discard_blank_wal()
                others = []
            if others and user_id_from_dir_name(self.dir.name) != self.user_id:
                raise CorruptDataError(
                    f"{meta_path}: missing; cannot confirm that {self.dir} holds user "
                    f"{self.user_id!r} (files: {', '.join(others)})"
                )
            if others:
                log.warning("user_meta_rebuilt", path=str(meta_path), user_id=self.user_id)
        elif not create:
            raise UnknownUser(f"user {self.user_id!r} has no stored data")
        else:
            try:
                self.dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"{self.dir}: cannot create user directory: {exc}") from exc
            self._durable = False  # nothing to lose yet: made durable by the first fsync
        # A new user's embedder goes into its first meta file: one write, not two.
        name, dim = embedder if embedder is not None else (None, None)
        meta = UserMeta(self.user_id, time.time(), name, dim, config_fingerprint=fingerprint)
        if not self.read_only:
            try:
                write_meta(meta_path, meta, durable=self._durable)
            except StorageError:
                if not self._durable:
                    self._discard_fresh()
                raise
        return meta

    def _discard_fresh(self) -> None:
        """Remove the directory of a user this store was creating when that failed (a full
        disk): it holds nothing yet, and a half-made user must not be listed as one. Never
        in read-only mode, which created nothing."""
        if self.read_only:
            return
        try:
            shutil.rmtree(self.dir)
        except OSError as exc:
            log.warning("user_creation_not_undone", path=str(self.dir), error=str(exc))

    def _make_durable(self) -> None:
        """Make a new user's directory, meta file and WAL name durable (once; a no-op for
        a user that existed when the store opened). Raises ``OSError`` if an fsync fails."""
        with self._durable_lock:
            if self._durable:
                return
            fsync_file(self.dir / META_FILE)
            fsync_dir(self.dir)  # the names meta.json and wal.log
            fsync_dir(self.dir.parent)  # the user's directory itself
            self._durable = True

    def _wal_is_leftover(self) -> bool:
        """Whether the WAL is a blank file left by a creation cut short (see the module
        docstring): only when nothing else of the user exists (no snapshot, no archive);
        a blank WAL beside those is damage, and opening it raises ``CorruptDataError``."""
        wal = self.dir / WAL_FILE
        archive = self.dir / ARCHIVE_FILE
        return (
            wal.exists()
            and is_blank(wal)
            and not list_snapshots(self.dir / SNAPSHOT_DIR)
            and (not archive.exists() or is_blank(archive))
        )

    def _discard_blank_wal(self) -> None:
        """Remove a blank WAL left by a creation cut short (see :meth:`_wal_is_leftover`)."""
        if self._wal_is_leftover():
            wal = self.dir / WAL_FILE
            log.warning("user_creation_cut_short", path=str(wal), user_id=self.user_id)
            wal.unlink()

    def check_embedder(self, name: str, dim: int, config_fingerprint: str | None = None) -> None:
        """Check that stored embeddings came from embedder ``name`` with ``dim`` dimensions.

        The first call for a user records the embedder. Raises :class:`EmbedderMismatch` when
        the user's data was written with a different embedder name or dimension. A given
        ``config_fingerprint`` is recorded in the meta file too (a change is logged).
        """
        updated = self.meta.with_embedder(name, dim, config_fingerprint)
        if updated is not self.meta:
            self.meta = updated
            if not self.read_only:
                write_meta(self.dir / META_FILE, self.meta, durable=self._durable)

    # -- WAL, snapshots, archive ---------------------------------------------------------------

    def archive_append(self, record: ArchiveRecord | dict[str, Any]) -> int:
        """Archive ``record`` and index it in the cold tier; 0 when the archive is disabled.

        The archive append is the durable part; the cold index is derived, so if indexing
        fails the record is indexed from the archive later (on the next open or search).
        """
        seq = self.archive.append(record)
        if seq:
            try:
                self.cold.add(seq, record)
            except StorageError as exc:
                log.warning("cold_index_add_failed", user_id=self.user_id, error=str(exc))
        return seq

    def load(self, *, schema_version: int = SCHEMA_VERSION) -> Recovered:
        """Read the newest readable snapshot and the WAL records after it.

        Raises :class:`CorruptDataError` naming the files when data exists but cannot be
        loaded, or when WAL records between the snapshot and the WAL's oldest record are
        missing; :class:`NewerFormatError` for data from a newer version.
        """
        snap = read_latest_snapshot(self.snapshot_dir, schema_version=schema_version)
        snapshot_lsn = snap.wal_lsn if snap is not None else 0
        first = self.wal.first_seq
        if first > snapshot_lsn + 1:
            where = snap.path if snap is not None else f"{self.snapshot_dir} (no snapshot)"
            raise CorruptDataError(
                f"{self.wal.path}: starts at LSN {first} but the newest readable snapshot "
                f"{where} only covers up to LSN {snapshot_lsn}; records "
                f"{snapshot_lsn + 1}..{first - 1} are missing"
            )
        if snapshot_lsn > self.wal.last_lsn:
            # The snapshot is newer than the WAL's durable tail (a machine crash in interval
            # mode): continue numbering after the snapshot so no new LSN hides behind it.
            log.warning(
                "wal_behind_snapshot",
                path=str(self.wal.path),
                wal_lsn=self.wal.last_lsn,
                snapshot_lsn=snapshot_lsn,
            )
            self.wal.truncate_before(snapshot_lsn + 1)
        records = tuple(self.wal.read(after_lsn=snapshot_lsn))
        replay = tuple((lsn, self._decoded(lsn, raw)) for lsn, raw in records)
        self._snapshot_lsn = snapshot_lsn
        edits = EditLog.from_recovered(None if snap is None else snap.state, replay)
        for rec in self.edits.edits:  # added since the last load (a tier restarted)
            edits.add(rec)
        self.edits = edits
        return Recovered(
            state=None if snap is None else snap.state,
            snapshot_lsn=snapshot_lsn,
            schema_version=None if snap is None else snap.schema_version,
            records=records,
            replay=replay,
        )

    def _decoded(self, lsn: int, raw: dict[str, Any]) -> WalRecord:
        """The typed record of WAL map ``raw``; :class:`CorruptDataError` naming the file
        and the LSN for a record of a known kind that lacks what the kind holds."""
        try:
            return decode_wal(raw)
        except (KeyError, TypeError, ValueError, InvalidInput) as exc:
            raise CorruptDataError(
                f"{self.wal.path}: record {lsn} is malformed: {exc!r:.200}"
            ) from None

    def checkpoint(
        self,
        state: dict[str, Any],
        *,
        wal_lsn: int | None = None,
        schema_version: int = SCHEMA_VERSION,
    ) -> Path:
        """Write ``state`` as a snapshot covering the WAL up to ``wal_lsn`` (default: the last LSN).

        Then drops WAL records already covered by the *previous* snapshot, so the previous
        generation plus the WAL can still rebuild everything if the new snapshot is damaged.
        Returns the snapshot path. Raises :class:`ReadOnlyError` on a read-only store.
        """
        if self.read_only:
            raise ReadOnlyError(f"{self.dir}: opened read-only; no snapshot is written")
        lsn = self.wal.last_lsn if wal_lsn is None else wal_lsn
        if not isinstance(lsn, int) or lsn < 0 or lsn > self.wal.last_lsn:
            raise InvalidInput(f"wal_lsn must be between 0 and {self.wal.last_lsn}, not {lsn!r}")
        try:
            self._make_durable()  # a snapshot never lands in a directory that could vanish
        except OSError as exc:
            raise StorageError(f"{self.dir}: fsync failed: {exc}") from exc
        # The WAL it summarises is durable first, whatever the fsync policy: a snapshot
        # that outlives its WAL (a machine crash between the two) would hold pages whose
        # turn records are gone, and a WAL that ends before its snapshot is a state
        # recovery must then work around rather than one that cannot happen.
        self.wal.flush()
        previous = self._snapshot_lsn
        if previous is None:
            try:
                snap = read_latest_snapshot(self.snapshot_dir, schema_version=2**32 - 1)
            except CorruptDataError:
                snap = None  # nothing trustworthy: keep the whole WAL
            previous = snap.wal_lsn if snap is not None else 0
        path = write_snapshot(self.snapshot_dir, state, lsn, schema_version)
        if previous > 0:
            self.wal.truncate_before(min(previous, lsn) + 1)
        self._snapshot_lsn = lsn
        return path

    def archive_records(self) -> list[tuple[int, dict[str, Any]]]:
        """The archive's ``(seq, map)`` pairs, oldest first, as the user's edits leave
        them (deleted memories left out, corrected ones corrected)."""
        return list(self.edits.apply_all(self.archive.iter()))

    def archived(self) -> list[tuple[int, ArchiveRecord]]:
        """:meth:`archive_records`, typed (records that hold no item left out)."""
        return list(self.edits.apply_records(self.archive.records()))

    # -- lifecycle ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Fsync the WAL and the archive now, whatever the fsync policy."""
        self.wal.flush()
        self.archive.flush()

    def close(self) -> None:
        """Close the WAL and archive (fsyncing unless the policy is ``"never"``); idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self.wal.close()
        finally:
            try:
                if self._cold is not None:
                    self._cold.close()
            finally:
                self.archive.close()

    @staticmethod
    def remove(root: str | os.PathLike[str], user_id: str) -> list[str]:
        """Delete ``user_id``'s files without opening them (see :func:`remove_user`)."""
        return remove_user(root, user_id)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UserStore({str(self.root)!r}, {self.user_id!r})"


def remove_user(root: str | os.PathLike[str], user_id: str) -> list[str]:
    """Delete every file of ``user_id`` under data directory ``root``; return the removed paths.

    Works on damaged data too (nothing is parsed). Only that user's directory is touched:
    symbolic links inside it are unlinked, never followed. The user's store must not be open.
    Returns ``[]`` when the user has no directory.
    """
    directory = user_path(root, user_id)
    removed: list[str] = []
    try:
        if directory.is_symlink():
            directory.unlink()
            removed.append(str(directory))
        elif directory.is_dir():
            for dirpath, dirnames, filenames in os.walk(directory, topdown=False):
                base = Path(dirpath)
                for name in filenames:
                    p = base / name
                    p.unlink()
                    removed.append(str(p))
                for name in dirnames:
                    p = base / name
                    if p.is_symlink():  # os.walk lists links to directories as directories
                        p.unlink()
                    else:
                        p.rmdir()
                    removed.append(str(p))
            directory.rmdir()
            removed.append(str(directory))
        else:
            return removed
    except OSError as exc:
        raise StorageError(f"{directory}: removing user {user_id!r} failed: {exc}") from exc
    fsync_dir(directory.parent)
    log.info("user_forgotten", user_id=user_id, removed_files=len(removed))
    return removed
