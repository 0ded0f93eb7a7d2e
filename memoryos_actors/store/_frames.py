"""The framed log file format: header, frames and their msgpack records.

File layout (all integers big-endian)::

    file header (20 bytes): magic (6 bytes) | format version (u16) | base seq (u64) | CRC32 (u32)
    frame:                  length (u32) | CRC32 (u32) | seq (u64) | msgpack payload (length bytes)

The header CRC covers the 16 bytes before it. A frame's CRC covers its length, its seq and
its payload. Sequence numbers (the WAL calls them LSNs) are consecutive: the first frame has
``base seq + 1`` and each next frame one more. ``base seq`` only grows when the WAL drops
old records (``truncate_before``), so numbering never restarts during a file's life.

A record is at most :data:`MAX_RECORD_BYTES`; a length field above it is treated as
corruption before anything is allocated, so a hostile file cannot make us reserve gigabytes.

This module is private; :mod:`memoryos_actors.store._framing` holds the log built on it.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any, Protocol

import msgpack

from memoryos_actors.errors import CorruptDataError, InvalidInput

__all__ = [
    "HEADER_SIZE",
    "MAX_RECORD_BYTES",
    "FrameSource",
    "NewerFormatError",
    "PreadReader",
    "encode_frame",
    "encode_header",
    "pack_record",
    "read_frame",
    "read_header",
    "unpack_map",
    "unpack_record",
]

MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest msgpack payload of one record, in bytes (16 MiB)."""

_HEADER = struct.Struct(">6sHQ")
_HEADER_CRC = struct.Struct(">I")
HEADER_SIZE = _HEADER.size + _HEADER_CRC.size
_FRAME = struct.Struct(">IIQ")
_LEN_SEQ = struct.Struct(">IQ")


class NewerFormatError(CorruptDataError):
    """A file was written by a newer version of this library (format or schema version).

    It is never read silently: upgrade memoryos-actors, or restore a backup.
    """


def pack_record(record: dict[str, Any]) -> bytes:
    """Encode one record as msgpack; :class:`InvalidInput` if it is not a packable dict."""
    if not isinstance(record, dict):
        raise InvalidInput(f"a record must be a dict, not {type(record).__name__}")
    try:
        payload: bytes = msgpack.packb(record, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"record cannot be encoded as msgpack: {exc}") from None
    if len(payload) > MAX_RECORD_BYTES:
        raise InvalidInput(
            f"record is {len(payload)} bytes encoded; the limit is {MAX_RECORD_BYTES}"
        )
    return payload


def unpack_map(payload: bytes, what: str) -> dict[str, Any]:
    """Decode a msgpack map (records, snapshots, exports); :class:`CorruptDataError` starting
    with ``what`` (e.g. ``"<path>: snapshot payload"``) if it is not valid msgpack or not a map.
    """
    try:
        value = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CorruptDataError(f"{what} is not valid msgpack ({exc})") from None
    if not isinstance(value, dict):
        raise CorruptDataError(f"{what} is a {type(value).__name__}, not a map")
    return value


def unpack_record(payload: bytes, path: Path, seq: int) -> dict[str, Any]:
    """Decode one record's payload (see :func:`unpack_map`)."""
    return unpack_map(payload, f"{path}: record {seq}")


def encode_header(magic: bytes, version: int, base_seq: int) -> bytes:
    head = _HEADER.pack(magic, version, base_seq)
    return head + _HEADER_CRC.pack(zlib.crc32(head))


def encode_frame(seq: int, payload: bytes) -> bytes:
    len_seq = _LEN_SEQ.pack(len(payload), seq)
    crc = zlib.crc32(payload, zlib.crc32(len_seq))
    return _FRAME.pack(len(payload), crc, seq) + payload


def read_header(f: FrameSource, path: Path, magic: bytes, version: int, kind: str) -> int:
    """Validate a file header and return its base seq."""
    data = f.read(HEADER_SIZE)
    if len(data) < HEADER_SIZE:
        raise CorruptDataError(
            f"{path}: {kind} file is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header"
        )
    got_magic, got_version, base = _HEADER.unpack_from(data)
    (crc,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
    if got_magic != magic:
        raise CorruptDataError(f"{path}: not a {kind} file (magic {got_magic!r}, want {magic!r})")
    if zlib.crc32(data[: _HEADER.size]) != crc:
        raise CorruptDataError(f"{path}: {kind} file header checksum mismatch")
    if got_version > version:
        raise NewerFormatError(
            f"{path}: {kind} file format version {got_version} was written by a newer "
            f"memoryos-actors (this one reads up to {version}); upgrade before opening it"
        )
    if got_version < 1:
        raise CorruptDataError(f"{path}: {kind} file has invalid format version {got_version}")
    return int(base)


def read_frame(f: FrameSource, offset: int, end: int, prev_seq: int) -> tuple[int, bytes] | str:
    """Read the frame at ``offset``; return ``(seq, payload)`` or a reason it is not valid.

    Never reads past ``end`` and never allocates more than the file holds.
    """
    if end - offset < _FRAME.size:
        return "truncated frame header"
    head = f.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return "truncated frame header"
    length, crc, seq = _FRAME.unpack(head)
    if length == 0 or length > MAX_RECORD_BYTES:
        return f"implausible record length {length}"
    if offset + _FRAME.size + length > end:
        return "truncated record"
    payload = f.read(length)
    if len(payload) < length:
        return "truncated record"
    if zlib.crc32(payload, zlib.crc32(_LEN_SEQ.pack(length, seq))) != crc:
        return "checksum mismatch"
    if seq != prev_seq + 1:
        return f"sequence number {seq} where {prev_seq + 1} was expected"
    return seq, payload


class FrameSource(Protocol):
    """What the frame readers need of a file: ``read`` and ``seek`` (an open binary file,
    :class:`io.BytesIO` or a :class:`PreadReader`)."""

    def read(self, n: int, /) -> bytes:
        """Up to ``n`` bytes from the position (fewer at the end of the file)."""
        ...

    def seek(self, offset: int, whence: int = ..., /) -> int:
        """Move the position (as :meth:`io.IOBase.seek`); the new position, in bytes."""
        ...


class PreadReader:
    """A read-only file view over one descriptor with its own position (``os.pread``), so
    readers sharing the descriptor never move each other's position."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pos = 0

    def read(self, n: int, /) -> bytes:
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        self.pos = self.pos + offset if whence == os.SEEK_CUR else offset
        return self.pos
