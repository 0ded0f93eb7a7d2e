"""Reading a framed log whole when it is opened: the scan, the damage it finds and the
intact frames past it, the torn tail cut off, and the checkpoint a clean close leaves so
that the next open can skip the scan.

This module is private; :class:`memoryos_actors.store._framing.RecordLog` uses it, and
``memoryos repair`` (:mod:`memoryos_actors.repair`) salvages with it.
"""

from __future__ import annotations

import io
import os
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from memoryos_actors.errors import CorruptDataError, StorageError
from memoryos_actors.logs import lazy_logger
from memoryos_actors.store._files import atomic_write, fsync_dir
from memoryos_actors.store._frames import (
    _FRAME,
    _LEN_SEQ,
    HEADER_SIZE,
    MAX_RECORD_BYTES,
    PreadReader,
    read_frame,
    read_header,
)

__all__ = [
    "KEEP_AT_OPEN_BYTES",
    "Damage",
    "ScanResult",
    "checkpoint_path",
    "cut_tail",
    "next_intact_frame",
    "read_checkpoint",
    "refusal",
    "scan",
    "walk_damaged",
    "write_checkpoint",
]

# Lazy: readers such as ``memoryos stats`` import structlog only if they log something.
log = lazy_logger("memoryos.store")


@dataclass(frozen=True, slots=True)
class Damage:
    """One damaged byte range of a framed log.

    ``start`` is where the damage begins (just past the last intact frame before it),
    ``end`` where the next intact frame starts (the file size when none follows);
    ``after_seq`` is the seq of the last intact frame before it (the base seq if none),
    ``next_seq`` that of the first intact frame after it (None when none follows), and
    ``reason`` what was wrong with the frame at ``start``.
    """

    start: int
    end: int
    after_seq: int
    next_seq: int | None
    reason: str

    @property
    def lost_seqs(self) -> int:
        """How many records the range held (seqs missing between the intact frames around
        it); 0 when nothing intact follows (a damaged tail: how many is not known)."""
        return 0 if self.next_seq is None else self.next_seq - self.after_seq - 1


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a scan of a framed log found (see :func:`scan`); offsets in bytes."""

    base_seq: int
    last_seq: int
    valid_end: int  # byte offset just past the last valid frame
    size: int
    bad_reason: str | None
    #: The damage is a crash's cut write: nothing intact follows it and its first record is
    #: incomplete (shorter than its frame says, or bytes never written). A whole record that
    #: fails its checks at the end is media damage or a stray write: not torn.
    torn: bool
    later_valid: bool  # an intact frame follows the damage (corruption in the middle)
    last_offset: int = 0  # where the last valid frame starts (0: no frame)
    marks: tuple[tuple[int, int], ...] = ()  # (seq, offset) of every marks-th frame (scan)
    intact_after: int = 0  # intact frames after the first damage
    damage: tuple[Damage, ...] = ()  # every damaged range, in file order


_RESYNC_CHUNK = 1 << 20  # bytes examined per vectorised pass when resynchronising


def _be32(a: Any, k: int, n: int) -> Any:
    """Big-endian u32 at offsets ``k .. k+n-1`` of the byte array ``a`` (numpy)."""
    import numpy as np

    u = np.uint32
    return (
        (a[k : k + n].astype(u) << u(24))
        | (a[k + 1 : k + 1 + n].astype(u) << u(16))
        | (a[k + 2 : k + 2 + n].astype(u) << u(8))
        | a[k + 3 : k + 3 + n].astype(u)
    )


def _frame_ok_at(fd: int, at: int, end: int, after_seq: int) -> int | None:
    """The seq of the checksum-valid frame starting at ``at`` (above ``after_seq``, wholly
    before ``end``), else None."""
    head = os.pread(fd, _FRAME.size, at)
    if len(head) < _FRAME.size:
        return None
    length, crc, seq = _FRAME.unpack(head)
    if not (
        0 < length <= MAX_RECORD_BYTES and at + _FRAME.size + length <= end and seq > after_seq
    ):
        return None
    payload = os.pread(fd, length, at + _FRAME.size)
    if len(payload) != length or zlib.crc32(payload, zlib.crc32(_LEN_SEQ.pack(length, seq))) != crc:
        return None
    return int(seq)


def next_intact_frame(fd: int, start: int, end: int, after_seq: int) -> tuple[int, int] | None:
    """``(offset, seq)`` of the first checksum-valid frame at or after byte ``start`` whose
    seq is above ``after_seq``, or None when there is none before ``end``.

    Every byte offset is a candidate: a vectorised pass (numpy) keeps those whose length
    and seq fields are plausible (a seq can be at most one more per 17 bytes, the smallest
    frame), and only those are checksummed. Runs only on damaged files.
    """
    import numpy as np

    min_frame = _FRAME.size + 1
    lo = after_seq + 1
    hi = after_seq + (end - start) // min_frame + 1
    pos = start
    while pos + min_frame <= end:
        stop = min(end, pos + _RESYNC_CHUNK + _FRAME.size)
        chunk = os.pread(fd, stop - pos, pos)
        n = len(chunk) - _FRAME.size + 1
        if n <= 0:
            break
        a = np.frombuffer(chunk, dtype=np.uint8)
        length = _be32(a, 0, n).astype(np.int64)
        seq = (_be32(a, 8, n).astype(np.uint64) << np.uint64(32)) | _be32(a, 12, n).astype(
            np.uint64
        )
        at = np.arange(pos, pos + n, dtype=np.int64)
        ok = (
            (length > 0)
            & (length <= MAX_RECORD_BYTES)
            & (at + _FRAME.size + length <= end)
            & (seq >= np.uint64(lo))
            & (seq <= np.uint64(hi))
        )
        for i in np.flatnonzero(ok):
            got = _frame_ok_at(fd, pos + int(i), end, after_seq)
            if got is not None:
                return pos + int(i), got
        pos += n
    return None


def walk_damaged(
    fd: int, offset: int, size: int, prev_seq: int, reason: str
) -> tuple[list[Damage], list[tuple[int, int, int]]]:
    """From damage at ``offset`` (after the intact frame numbered ``prev_seq``), every
    damaged range and every intact frame up to ``size``: ``(damages, frames)`` with
    frames as ``(seq, offset, payload length)``."""
    damages: list[Damage] = []
    frames: list[tuple[int, int, int]] = []
    # Buffered over the descriptor (its offset is used by nothing else, see scan).
    with open(fd, "rb", closefd=False) as reader:
        while True:
            found = next_intact_frame(fd, offset, size, prev_seq)
            if found is None:
                damages.append(Damage(offset, size, prev_seq, None, reason))
                return damages, frames
            at, seq = found
            damages.append(Damage(offset, at, prev_seq, seq, reason))
            offset, prev_seq = at, seq - 1
            reader.seek(offset)
            while offset < size:
                got = read_frame(reader, offset, size, prev_seq)
                if isinstance(got, str):
                    reason = got
                    break
                prev_seq = got[0]
                frames.append((prev_seq, offset, len(got[1])))
                offset += _FRAME.size + len(got[1])
            else:
                return damages, frames


KEEP_AT_OPEN_BYTES = 4 * 1024 * 1024
"""Largest log (bytes) whose records a read-only open keeps in memory for its first read."""


def scan(
    path: Path,
    magic: bytes,
    version: int,
    kind: str,
    *,
    marks: int = 0,
    fd: int | None = None,
    keep: list[tuple[int, bytes]] | None = None,
) -> ScanResult:
    """Validate every frame of ``path`` (read through ``fd`` when given) and report where
    valid data ends (with ``marks`` > 0, also where every ``marks``-th frame starts), and,
    past damage, every damaged range and how many intact frames follow. With ``keep`` (a
    list), the ``(seq, payload)`` of every valid frame before the first damage is appended
    to it."""
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        found: list[tuple[int, int]] = []
        last_offset = 0
        # Buffered: two reads per frame stay in user space. A large file is read through
        # the descriptor, moving its offset, which nothing else relies on (every other read
        # of it is a pread).
        f: io.BytesIO | io.BufferedReader
        if size <= KEEP_AT_OPEN_BYTES:  # a small log: one read, then frames from memory
            f = io.BytesIO(os.pread(fd, size, 0))
        else:
            f = open(fd, "rb", closefd=False)  # noqa: SIM115 - closed below
        try:
            f.seek(0)
            base = read_header(f, path, magic, version, kind)
            offset = HEADER_SIZE
            seq = base
            reason: str | None = None
            while offset < size:
                got = read_frame(f, offset, size, seq)
                if isinstance(got, str):
                    reason = got
                    break
                seq = got[0]
                if keep is not None:
                    keep.append(got)
                if marks and seq % marks == 0:
                    found.append((seq, offset))
                last_offset = offset
                offset += _FRAME.size + len(got[1])
        finally:
            f.close()
        if reason is None:
            return ScanResult(
                base, seq, offset, size, None, False, False, last_offset, tuple(found)
            )
        damages, frames = walk_damaged(fd, offset, size, seq, reason)
        later = bool(frames)
        torn = not later and _incomplete(fd, offset, size, reason)
    finally:
        if own:
            os.close(fd)
    return ScanResult(
        base,
        seq,
        offset,
        size,
        reason,
        torn,
        later,
        last_offset,
        tuple(found),
        len(frames),
        tuple(damages),
    )


TRUNCATED_REASONS = ("truncated frame header", "truncated record")
"""The reasons :func:`~memoryos_actors.store._frames.read_frame` gives for a record the file
ends inside of."""


_SECTOR = 512  # the smallest unit a disk writes whole; a write cut short ends on one


def _incomplete(fd: int, offset: int, size: int, reason: str) -> bool:
    """Whether the damaged tail at ``offset`` (nothing intact after it) is a write a crash
    cut short: the file ends inside the frame its header describes (whatever that length
    says), or the tail ends in zero bytes from a sector boundary on (the file grew but
    those bytes never reached the disk). A frame that fits in the file and fails its
    checksum or sequence check with no such unwritten end was written whole and damaged
    since (media damage, a stray write): that is not a torn write."""
    if reason in TRUNCATED_REASONS:
        return True
    head = os.pread(fd, _FRAME.size, offset)
    if len(head) == _FRAME.size:
        length = _FRAME.unpack(head)[0]
        if length and offset + _FRAME.size + length > size:
            return True  # an implausible length the file ends before: never whole
    # Where the run of zero bytes that ends the file starts (``size``: there is none).
    zeros = size
    while zeros > offset:
        lo = max(offset, zeros - _RESYNC_CHUNK)
        chunk = os.pread(fd, zeros - lo, lo)
        kept = len(chunk.rstrip(b"\0"))
        if kept:
            zeros = lo + kept
            break
        zeros = lo
    if zeros == offset:
        return size > offset  # nothing of the record was written
    boundary = -(-zeros // _SECTOR) * _SECTOR
    return boundary < size


def checkpoint_path(path: Path) -> Path:
    """The checkpoint file beside a log that keeps one (see ``RecordLog.CHECKPOINT``)."""
    return path.with_name(path.name + ".ckpt")


def _file_identity(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def read_checkpoint(
    path: Path, magic: bytes, version: int, kind: str, fd: int | None = None
) -> ScanResult | None:
    """The scan result a checkpoint written at the last clean close vouches for, or None
    when there is none or it does not match the file exactly as it is now (any write
    since, by us or anybody, changes its size or modification time). With ``fd``, the
    file is the one open there."""
    ckpt = checkpoint_path(path)
    try:
        raw = ckpt.read_bytes()
        st = path.stat() if fd is None else os.fstat(fd)
    except OSError:
        return None
    try:
        data = msgpack.unpackb(raw, raw=False)
        if not isinstance(data, dict) or data.get("v") != 1:
            return None
        if list(data["file"]) != _file_identity(st):
            return None
        base, last, last_off = int(data["base"]), int(data["last_seq"]), int(data["last_off"])
        marks = tuple((int(sq), int(off)) for sq, off in data["marks"])
    except (ValueError, TypeError, KeyError, msgpack.UnpackException):
        return None
    size = st.st_size
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    try:
        f = PreadReader(fd)
        try:
            if read_header(f, path, magic, version, kind) != base:
                return None
        except CorruptDataError:
            return None
        if last > base:
            # The last frame must be whole and end the file: a cheap check that the
            # checkpoint and the file belong together.
            if not HEADER_SIZE <= last_off < size:
                return None
            f.seek(last_off)
            got = read_frame(f, last_off, size, last - 1)
            if isinstance(got, str) or last_off + _FRAME.size + len(got[1]) != size:
                return None
        elif size != HEADER_SIZE:
            return None
    finally:
        if own:
            os.close(fd)
    if any(not (base < sq <= last and HEADER_SIZE <= off < size) for sq, off in marks):
        return None
    return ScanResult(
        base, last, size, size, None, False, False, last_off if last > base else 0, marks
    )


def refusal(path: Path, kind: str, result: ScanResult) -> CorruptDataError:
    """The error (logged) for damage in ``path`` that is not a torn tail (intact records
    after it, or a whole last record that fails its checks): nothing is changed,
    ``memoryos repair`` keeps every intact record."""
    lost = sum(d.lost_seqs for d in result.damage)
    ranges = ", ".join(f"{d.start}..{d.end}" for d in result.damage)
    if not result.later_valid:
        log.error(
            "store_damage_refused",
            path=str(path),
            kind=kind,
            offset=result.valid_end,
            reason=result.bad_reason,
            intact_records_after=0,
            damaged_byte_ranges=ranges,
        )
        return CorruptDataError(
            f"{path}: {kind} damaged at byte {result.valid_end} ({result.bad_reason}): its "
            "last record is whole but fails its check, which a crash does not leave (media "
            "damage or a stray write); nothing was changed: repair the user to keep every "
            "intact record and cut the damaged one (memoryos repair USER)",
            path=str(path),
            offset=result.valid_end,
            intact_after=0,
        )
    log.error(
        "store_damage_refused",
        path=str(path),
        kind=kind,
        offset=result.valid_end,
        reason=result.bad_reason,
        intact_records_after=result.intact_after,
        damaged_byte_ranges=ranges,
    )
    return CorruptDataError(
        f"{path}: {kind} damaged at byte {result.valid_end} "
        f"({result.bad_reason}) with {result.intact_after} intact records after it "
        f"(damaged bytes {ranges}; {lost} records lost in between); nothing was changed: "
        "repair the user to keep every intact record (memoryos repair USER)",
        path=str(path),
        offset=result.valid_end,
        intact_after=result.intact_after,
    )


def cut_tail(path: Path, kind: str, result: ScanResult) -> None:
    """Cut the torn tail ``result`` found off ``path`` (see :attr:`ScanResult.torn`),
    durably; a tail of zero bytes is copied aside first."""
    dropped = result.size - result.valid_end
    fields = {
        "path": str(path),
        "kind": kind,
        "offset": result.valid_end,
        "dropped_bytes": dropped,
        "last_valid_seq": result.last_seq,
        "reason": result.bad_reason,
    }
    if result.bad_reason in TRUNCATED_REASONS:
        log.warning("store_torn_tail_truncated", **fields)
    else:
        # Zero bytes past the last record, or a length the file ends before: a crash's
        # doing too (a file grown, its bytes never written), cut, but keep a copy.
        backup = path.with_name(f"{path.name}.corrupt-{int(time.time() * 1000)}")
        shutil.copy2(path, backup)
        fsync_dir(path.parent)
        log.error("store_damaged_tail_cut", backup=str(backup), **fields)
    with open(path, "r+b") as f:
        f.truncate(result.valid_end)
        f.flush()
        os.fsync(f.fileno())


def write_checkpoint(
    path: Path,
    end: int,
    base: int,
    last_seq: int,
    last_offset: int,
    marks: list[tuple[int, int]],
) -> None:
    """Describe the closed log ``path`` (``end`` bytes long, ``base`` seq, the last frame's
    seq and offset, the marks) for the next open, which then skips the scan; best effort
    (a failure is logged)."""
    try:
        st = path.stat()
        if st.st_size != end:
            return
        data = {
            "v": 1,
            "file": _file_identity(st),
            "base": base,
            "last_seq": last_seq,
            "last_off": last_offset,
            "marks": marks,
        }
        atomic_write(checkpoint_path(path), msgpack.packb(data), "checkpoint", durable=False)
    except (OSError, StorageError) as exc:
        log.warning("store_checkpoint_failed", path=str(path), error=str(exc))
