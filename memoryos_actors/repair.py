"""Repairing a user's damaged files: keep every intact record, put the damage aside.

Opening a user refuses damage that a crash cannot explain (a damaged record with intact
records after it, an unreadable snapshot with nothing to fall back on, an unreadable meta
file) with :class:`~memoryos_actors.errors.CorruptDataError`, and changes nothing. A repair
is the explicit step after that: :func:`repair_user` (``memoryos repair USER``, or
:meth:`MemoryOS.repair_user <memoryos_actors.system.MemoryOS.repair_user>` on a running
system) works on one user's closed files:

* **logs** (``wal.log``, ``archive.log``): written again with every intact record, before
  and after each damaged range, each keeping its seq. Each seq whose record the damage
  destroyed (known from the intact seqs around it) gets a placeholder record
  (``{"t": "lost"}``, skipped by every reader), so every later seq, every snapshot's
  coverage of the WAL and every cut into the archive keep their meaning. A damaged end of
  a file (nothing intact after it) is cut, as opening would.
* **snapshots**: an unreadable generation is moved aside. If no readable one then covers
  the records the WAL no longer holds, the WAL is rebased onto the newest readable one
  (or onto nothing) with placeholders for the records only the lost snapshot had: the
  user comes back with what the WAL and the archive still hold.
* **meta.json**: an unreadable one is moved aside and written again from the directory
  name (its embedder is recorded again at the next activation).
* **cold.db** is derived from the archive: after an archive repair it is moved aside and
  rebuilt from the repaired archive when next needed.

Every original is kept beside the file as ``<name>.corrupt-<unix ms>``; nothing is deleted.
The :class:`~memoryos_actors.reports.RepairReport` says what was kept and what was lost
(records, turns, byte ranges). Repairing a healthy user changes nothing.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from .errors import CorruptDataError, StorageError, UnknownUser
from .reports import RepairedFile, RepairReport
from .store._files import fsync_dir, is_blank, tmp_path
from .store._frames import (
    _FRAME,
    HEADER_SIZE,
    NewerFormatError,
    PreadReader,
    encode_frame,
    encode_header,
    pack_record,
    read_header,
    unpack_record,
)
from .store._recovery import checkpoint_path, scan, walk_damaged
from .store.archive import ArchiveLog
from .store.cold import COLD_FILE
from .store.formats import decode_archived, lost_record, turn_seq
from .store.paths import user_id_from_dir_name, validate_user_id
from .store.snapshot import list_snapshots, read_snapshot
from .store.user_meta import UserMeta, read_meta, write_meta
from .store.userstore import (
    ARCHIVE_FILE,
    META_FILE,
    SNAPSHOT_DIR,
    WAL_FILE,
    UserStore,
    user_path,
)
from .store.wal import WAL

__all__ = ["repair_user"]

log = structlog.get_logger("memoryos.repair")

_COPY_CHUNK = 1 << 20


def repair_user(data_dir: str | os.PathLike[str], user_id: str) -> RepairReport:
    """Repair ``user_id``'s files under ``data_dir`` (see the module docstring).

    No process may have the user open meanwhile (the ``memoryos repair`` command holds
    the data directory's lock; :meth:`MemoryOS.repair_user` stops the user's actors
    first). Afterwards the user opens again and holds every intact record. Running it
    again changes nothing.

    Raises :class:`~memoryos_actors.errors.UnknownUser` when the user has no directory,
    :class:`~memoryos_actors.store.NewerFormatError` for files of a newer version (upgrade
    instead), and :class:`CorruptDataError` for damage a repair cannot get around (a meta
    file that is unreadable in a directory whose name does not say whose it is).
    """
    validate_user_id(user_id)
    udir = user_path(data_dir, user_id)
    if not udir.is_dir():
        raise UnknownUser(f"user {user_id!r} has no stored data")
    stamp = int(time.time() * 1000)
    files: list[RepairedFile] = []
    notes: list[str] = []

    meta = _repair_meta(udir, user_id, stamp)
    if meta is not None:
        files.append(meta)
        notes.append(
            f"{META_FILE}: unreadable ({meta.reason}); written again from the directory name"
        )
    snaps, covered_lsn, covered_turn = _repair_snapshots(udir / SNAPSHOT_DIR, stamp)
    for f in snaps:
        files.append(f)
        notes.append(f"{Path(f.path).name}: unreadable ({f.reason}); moved aside")

    wal = _Salvage.of(udir / WAL_FILE, WAL.MAGIC, WAL.VERSION, WAL.KIND, floor=covered_lsn)
    wal_turns_kept = 0
    lost_turns: tuple[str, ...] = ()
    if wal is not None:
        wal_turns_kept, lost_turns = wal.turns(covered_lsn, covered_turn)
        if wal.needs_rewrite:
            files.append(wal.rewrite(stamp))
            notes.extend(wal.notes())
            if covered_lsn and any(a <= covered_lsn for a, _b in wal.lost_ranges()):
                notes.append(
                    f"{WAL_FILE}: records up to LSN {covered_lsn} are also in the "
                    "newest readable snapshot: what those lost records held is kept"
                )
    archive = _Salvage.of(
        udir / ARCHIVE_FILE, ArchiveLog.MAGIC, ArchiveLog.VERSION, ArchiveLog.KIND, floor=0
    )
    if archive is not None and archive.needs_rewrite:
        files.append(archive.rewrite(stamp))
        notes.extend(archive.notes())
        checkpoint_path(udir / ARCHIVE_FILE).unlink(missing_ok=True)
        cold = udir / COLD_FILE
        if cold.exists():
            backup = _backup_name(cold, stamp)
            os.replace(cold, backup)
            for suffix in ("-journal", "-wal", "-shm"):  # SQLite's side files go with it
                side = Path(str(cold) + suffix)
                if side.exists():
                    os.replace(side, Path(str(backup) + suffix))
            files.append(
                RepairedFile(
                    str(cold), "moved_aside", str(backup), "derived from the damaged archive"
                )
            )
            notes.append(f"{COLD_FILE}: moved aside; rebuilt from the repaired archive")
    # The proof: the user's files open and load (read-only, so this changes nothing).
    with UserStore(data_dir, user_id, read_only=True) as store:
        recovered = store.load(schema_version=2**32 - 1)
        if lost_turns:
            # A turn evicted to the archive before its WAL record was lost is not lost.
            archived = {f"p{seq}" for _n, rec in store.archive.iter() for seq in _page_seqs(rec)}
            lost_turns = tuple(t for t in lost_turns if t not in archived)
        if archive is not None and archive.lost_ranges():
            # A destroyed archive record held pages of its own; those whose turns neither
            # the WAL nor the snapshot still holds are gone, and the report says which.
            unheld = _unheld_turns(store, recovered.state)
            lost_turns = tuple(
                sorted(dict.fromkeys([*lost_turns, *unheld]), key=lambda pid: int(pid[1:]))
            )
    if lost_turns:
        notes.append(f"turns lost: {', '.join(lost_turns)}")
    if files:
        fsync_dir(udir)
        log.warning(
            "user_repaired",
            user_id=user_id,
            files=[f.path for f in files],
            kept_records=sum(f.kept_records for f in files),
            lost_records=sum(f.lost_records for f in files),
            lost_turns=list(lost_turns),
        )
    return RepairReport(user_id, tuple(files), wal_turns_kept, tuple(lost_turns), tuple(notes))


def _unheld_turns(store: UserStore, state: dict[str, Any] | None) -> list[str]:
    """Page ids of the turns, up to the newest one the files know of, that no file holds:
    not the snapshot's tiers, not a WAL ``turn`` record, not an archive record, and not
    deleted on purpose. Every turn numbered is held somewhere while the archive is whole,
    so after an archive repair these are the turns its destroyed records took."""
    held: set[int] = set(store.edits.deleted_pages)
    last = 0
    if state is not None:
        last = int(state.get("seq", 0))
        held.update(int(p["seq"]) for p in state["stm"]["pages"])
        for seg in state["mtm"]["segments"]:
            held.update(int(p["seq"]) for p in seg["pages"])
        # Archive records a full disk refused wait in the snapshot for the next try.
        for rec in (state["mtm"].get("work") or {}).get("unarchived", ()):
            held.update(int(seq) for seq in _page_seqs(rec) if isinstance(seq, int))
    for _lsn, rec in store.wal.read():
        seq = turn_seq(rec)
        if seq is not None:
            held.add(seq)
            last = max(last, seq)
    for _n, rec in store.archive.iter():
        held.update(int(seq) for seq in _page_seqs(rec) if isinstance(seq, int))
    return [f"p{seq}" for seq in range(1, last + 1) if seq not in held]


def _page_seqs(record: dict[str, Any]) -> list[Any]:
    """The turn seqs of the pages an archive record holds (none for a record too damaged
    to say)."""
    try:
        found = decode_archived(record)
    except (KeyError, TypeError):
        return []
    return [p.get("seq") for p in found.pages if isinstance(p, dict)] if found else []


def _backup_name(path: Path, stamp: int) -> Path:
    backup = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while backup.exists():
        backup = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
        n += 1
    return backup


def _repair_meta(udir: Path, user_id: str, stamp: int) -> RepairedFile | None:
    meta_path = udir / META_FILE
    if not meta_path.exists() or is_blank(meta_path):
        return None  # opening rebuilds a missing or blank one by itself
    try:
        meta = read_meta(meta_path)
    except NewerFormatError:
        raise
    except CorruptDataError as exc:
        if user_id_from_dir_name(udir.name) != user_id:
            raise CorruptDataError(
                f"{meta_path}: unreadable, and the directory name does not say whose it is; "
                "cannot repair",
                path=str(meta_path),
            ) from exc
        backup = _backup_name(meta_path, stamp)
        os.replace(meta_path, backup)
        write_meta(meta_path, UserMeta(user_id, time.time()))
        return RepairedFile(str(meta_path), "rebuilt", str(backup), str(exc))
    if meta.user_id != user_id:
        raise StorageError(
            f"{meta_path}: directory belongs to user {meta.user_id!r}, not {user_id!r}"
        )
    return None


def _repair_snapshots(snap_dir: Path, stamp: int) -> tuple[list[RepairedFile], int, int]:
    """Move unreadable snapshots aside; return them, and the WAL LSN and turn seq the
    newest readable one covers (0, 0 without one)."""
    moved: list[RepairedFile] = []
    newest: Any = None
    for _gen, path in list_snapshots(snap_dir):
        try:
            snap = read_snapshot(path, schema_version=2**32 - 1)
        except NewerFormatError:
            raise
        except CorruptDataError as exc:
            backup = _backup_name(path, stamp)
            os.replace(path, backup)
            moved.append(RepairedFile(str(path), "moved_aside", str(backup), str(exc)))
            continue
        if newest is None:
            newest = snap
    if moved:
        fsync_dir(snap_dir)
    if newest is None:
        return moved, 0, 0
    seq = newest.state.get("seq", 0) if isinstance(newest.state, dict) else 0
    return moved, newest.wal_lsn, int(seq) if isinstance(seq, int) else 0


@dataclass
class _Salvage:
    """The intact parts of one framed log, and how to write them again."""

    path: Path
    magic: bytes
    version: int
    kind: str
    size: int
    base: int  # the new file's base seq
    head_end: int  # the first run of intact frames: HEADER_SIZE .. head_end
    head_first: int  # seq of its first frame
    head_last: int  # seq of its last frame (head_first - 1: the run is empty)
    frames: list[tuple[int, int, int]]  # intact frames after damage: (seq, offset, length)
    damaged: list[tuple[int, int, int | None]]  # (start, end, next seq or None)
    reason: str | None
    rebased_from: int | None  # the old base when the log no longer met the snapshot

    @classmethod
    def of(cls, path: Path, magic: bytes, version: int, kind: str, floor: int) -> _Salvage | None:
        """Examine ``path`` (None if missing). ``floor``: the seq the log must reach back
        to (the newest readable snapshot's LSN for a WAL, 0 for an archive)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            try:
                base = read_header(PreadReader(fd), path, magic, version, kind)
            except NewerFormatError:
                raise
            except CorruptDataError as exc:
                # No header to trust: every intact frame after the floor is kept.
                lost, kept = walk_damaged(fd, 0, size, floor, f"unreadable header ({exc})")
                return cls(
                    path,
                    magic,
                    version,
                    kind,
                    size,
                    floor,
                    HEADER_SIZE,
                    floor + 1,
                    floor,
                    kept,
                    [(d.start, d.end, d.next_seq) for d in lost],
                    str(exc),
                    None,
                )
            result = scan(path, magic, version, kind, fd=fd)
            frames: list[tuple[int, int, int]] = []
            damaged: list[tuple[int, int, int | None]] = []
            if result.bad_reason is not None:
                damages, frames = walk_damaged(
                    fd, result.valid_end, size, result.last_seq, result.bad_reason
                )
                damaged = [(d.start, d.end, d.next_seq) for d in damages]
        finally:
            os.close(fd)
        new_base = min(base, floor)
        return cls(
            path,
            magic,
            version,
            kind,
            size,
            new_base,
            result.valid_end,
            base + 1,
            result.last_seq,
            frames,
            damaged,
            result.bad_reason,
            base if new_base < base else None,
        )

    @property
    def needs_rewrite(self) -> bool:
        """Whether the file is damaged or no longer reaches back to the snapshot."""
        return self.reason is not None or self.rebased_from is not None

    def _kept(self) -> list[tuple[int, int, int, int]]:
        """Every intact frame as ``(first seq, last seq, offset, bytes)``, the first run
        as one block."""
        out = []
        if self.head_last >= self.head_first:
            out.append((self.head_first, self.head_last, HEADER_SIZE, self.head_end - HEADER_SIZE))
        out.extend((seq, seq, off, _FRAME.size + length) for seq, off, length in self.frames)
        return out

    def lost_ranges(self) -> list[tuple[int, int]]:
        """Inclusive seq ranges the rewritten file fills with placeholders."""
        ranges = []
        prev = self.base
        if self.head_last >= self.head_first:
            if self.head_first > prev + 1:
                ranges.append((prev + 1, self.head_first - 1))
            prev = self.head_last
        for seq, _off, _len in self.frames:
            if seq > prev + 1:
                ranges.append((prev + 1, seq - 1))
            prev = seq
        return ranges

    def kept_records(self) -> int:
        return max(0, self.head_last - self.head_first + 1) + len(self.frames)

    def records(self) -> list[tuple[int, dict[str, Any]]]:
        """The intact records, decoded, in seq order."""
        out: list[tuple[int, dict[str, Any]]] = []
        with open(self.path, "rb") as f:
            reader_at = HEADER_SIZE
            f.seek(reader_at)
            seq = self.head_first - 1
            while reader_at < self.head_end and seq < self.head_last:
                length, _crc, seq = _FRAME.unpack(f.read(_FRAME.size))
                out.append((seq, unpack_record(f.read(length), self.path, seq)))
                reader_at += _FRAME.size + length
            for seq, off, length in self.frames:
                f.seek(off + _FRAME.size)
                out.append((seq, unpack_record(f.read(length), self.path, seq)))
        return out

    def turns(self, covered_lsn: int, covered_turn: int) -> tuple[int, tuple[str, ...]]:
        """``(turn records kept, page ids of turns known lost)`` of a WAL. Records up to
        ``covered_lsn`` (turns up to ``covered_turn``) are in the newest readable snapshot,
        so not lost. A later turn is known lost when its seq lies between the turns of the
        intact records around a lost range."""
        try:
            records = self.records()
        except CorruptDataError:
            return 0, ()
        turn_at = [(lsn, t) for lsn, rec in records if (t := turn_seq(rec)) is not None]
        lost: list[str] = []
        for first, last in self.lost_ranges():
            first = max(first, covered_lsn + 1)
            if first > last:
                continue  # the snapshot holds what those records held
            before = [t for lsn, t in turn_at if lsn < first]
            after = [t for lsn, t in turn_at if lsn > last]
            if not after:
                continue  # nothing later says how many turns there were
            low = max([covered_turn, *before])
            lost.extend(f"p{t}" for t in range(low + 1, min(after)))
        return len({t for _lsn, t in turn_at}), tuple(dict.fromkeys(lost))

    def notes(self) -> list[str]:
        name = self.path.name
        out = []
        if self.rebased_from is not None:
            out.append(
                f"{name}: records {self.base + 1}..{self.rebased_from} were only in "
                "an unreadable snapshot; placeholders keep their seqs"
            )
        for start, end, nxt in self.damaged:
            if nxt is None:
                out.append(f"{name}: damaged end cut at byte {start} ({end - start} bytes)")
            else:
                out.append(
                    f"{name}: bytes {start}..{end} damaged; intact records resume at seq {nxt}"
                )
        lost = self.lost_ranges()
        out.append(
            f"{name}: kept {self.kept_records()} intact records"
            + (
                f", {sum(b - a + 1 for a, b in lost)} lost (seqs "
                + ", ".join(f"{a}..{b}" for a, b in lost)
                + ")"
                if lost
                else ""
            )
        )
        return out

    def rewrite(self, stamp: int) -> RepairedFile:
        """Write the salvaged log over the file, the original kept as a backup."""
        placeholder = pack_record(lost_record(stamp / 1000.0))
        tmp = tmp_path(self.path)
        lost = self.lost_ranges()
        try:
            with open(self.path, "rb") as src, open(tmp, "wb") as out:
                out.write(encode_header(self.magic, self.version, self.base))
                prev = self.base
                for seq, last, off, nbytes in self._kept():
                    out.writelines(
                        encode_frame(missing, placeholder) for missing in range(prev + 1, seq)
                    )
                    src.seek(off)
                    remaining = nbytes
                    while remaining > 0:
                        chunk = src.read(min(remaining, _COPY_CHUNK))
                        if not chunk:
                            raise OSError(f"{self.path} shrank during the repair")
                        out.write(chunk)
                        remaining -= len(chunk)
                    prev = last
                out.flush()
                os.fsync(out.fileno())
            backup = _backup_name(self.path, stamp)
            try:
                os.link(self.path, backup)
            except OSError:
                shutil.copy2(self.path, backup)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StorageError(f"{self.path}: repair failed: {exc}") from exc
        fsync_dir(self.path.parent)
        cut = sum(end - start for start, end, nxt in self.damaged if nxt is None)
        return RepairedFile(
            path=str(self.path),
            action="rewritten",
            backup=str(backup),
            reason=self.reason or "no longer reaches back to the newest readable snapshot",
            kept_records=self.kept_records(),
            lost_records=sum(b - a + 1 for a, b in lost),
            lost_seqs=tuple(lost),
            damaged_bytes=tuple((s, e) for s, e, _n in self.damaged),
            cut_tail_bytes=cut,
        )
