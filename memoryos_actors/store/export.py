"""Portable export files: one user's (or one archive's) data in a single file.

Two encodings, chosen by the file name:

* anything but ``.json``: msgpack with a header — magic ``"MOSEXP\\0\\0"``, format version
  (u16), payload length (u64), CRC32 (u32) — then the msgpack payload;
* ``.json``: UTF-8 JSON ``{"format": "memoryos-export", "version": 1, "payload": ...}``.
  JSON has no bytes, tuples or non-string keys, so values are tagged to round-trip:
  ``bytes`` (embeddings are float32 bytes) become ``{"$b64": "<base64>"}``; a map with a
  non-string key, or whose only key is a tag, becomes ``{"$map": [[key, value], ...]}``.
  Tuples come back as lists, as they do from msgpack.

A regular file is written atomically (temporary file, fsync, rename). A symlink is
followed: the file it points to is what is replaced, and the link stays. A FIFO or a
character device (a pipe, ``/dev/stdout``) is opened and written, never replaced; any other
kind of file is refused.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgpack

from memoryos_actors.errors import CorruptDataError, InvalidInput, StorageError
from memoryos_actors.store._files import atomic_write
from memoryos_actors.store._frames import NewerFormatError, unpack_map

__all__ = ["EXPORT_FORMAT_VERSION", "read_export", "write_export"]

EXPORT_FORMAT_VERSION = 1
"""Version of the export file format this build writes and reads."""

_MAGIC = b"MOSEXP\x00\x00"
_HEAD = struct.Struct(">8sHQ")
_CRC = struct.Struct(">I")
_JSON_FORMAT = "memoryos-export"
_TAGS = frozenset({"$b64", "$map"})


def _to_json(value: Any) -> Any:
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not (len(value) == 1 and set(value) <= _TAGS):
            return {k: _to_json(v) for k, v in value.items()}
        return {"$map": [[_to_json(k), _to_json(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return _bytes_to_json(value)  # bytes as $b64; any other type refused


#: Types JSON carries as they are (bytes go through :func:`_bytes_to_json`): a container
#: whose elements are all of these needs no walk.
_LEAVES = frozenset({str, int, float, bool, type(None), bytes})
_STR_ONLY = frozenset({str})


def _tagged(value: Any) -> Any:
    """``value`` with every map JSON cannot carry as is (a non-string key, or a tag as its
    only key) written as a ``$map``; the same object when there is none, so a large export
    is not copied. Bytes are left to :func:`_bytes_to_json` (the encoder's ``default``).

    The types of a container's keys and values are collected in C (``set(map(type, ...))``)
    and only the containers among them are walked: an export is mostly flat records and
    lists of keywords, and a Python loop over every value cost it a third of its time.
    """
    if isinstance(value, dict):
        if (len(value) == 1 and set(value) <= _TAGS) or not (
            set(map(type, value)) <= _STR_ONLY or all(isinstance(k, str) for k in value)
        ):
            return _to_json(value)
        if set(map(type, value.values())) <= _LEAVES:
            return value
        return _tag_children(value.items(), value, dict)
    if isinstance(value, (list, tuple)):
        if set(map(type, value)) <= _LEAVES:
            return value
        return _tag_children(enumerate(value), value, list)
    return value


def _tag_children(
    children: Iterable[tuple[Any, Any]], value: Any, copy: Callable[[Any], Any]
) -> Any:
    """``value`` (a dict or a sequence) with its ``(key or index, child)`` ``children``
    passed through :func:`_tagged`; copied with ``copy`` only when a child changed."""
    changed: Any = None
    for k, v in children:
        if isinstance(v, (dict, list, tuple)):
            w = _tagged(v)
            if w is not v:
                if changed is None:
                    changed = copy(value)
                changed[k] = w
    return value if changed is None else changed


def _bytes_to_json(value: Any) -> Any:
    """The JSON encoder's ``default``: bytes as ``$b64``; any other unknown type refused."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b64": base64.b64encode(bytes(value)).decode("ascii")}
    raise InvalidInput(f"cannot export a value of type {type(value).__name__}")


def _from_json(value: Any, path: Path) -> Any:
    if isinstance(value, list):
        return [_from_json(v, path) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "$b64" in value:
            try:
                return base64.b64decode(value["$b64"], validate=True)
            except (ValueError, TypeError) as exc:
                raise CorruptDataError(f"{path}: bad base64 value: {exc}") from None
        if len(value) == 1 and "$map" in value:
            pairs = value["$map"]
            if not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 for p in pairs
            ):
                raise CorruptDataError(f"{path}: malformed $map value")
            out = {}
            for k, v in pairs:
                key = _from_json(k, path)
                if isinstance(key, list):  # a list cannot be a key; msgpack gives us tuples
                    key = tuple(key)
                try:
                    out[key] = _from_json(v, path)
                except TypeError:
                    raise CorruptDataError(f"{path}: unhashable map key {key!r}") from None
            return out
        return {k: _from_json(v, path) for k, v in value.items()}
    return value


def write_export(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``path`` (JSON if the name ends in ``.json``, else msgpack).

    Raises :class:`InvalidInput` if ``payload`` is not a dict of encodable values.
    """
    p = Path(path)
    if not isinstance(payload, dict):
        raise InvalidInput(f"export payload must be a dict, not {type(payload).__name__}")
    if p.suffix.lower() == ".json":
        doc = {
            "format": _JSON_FORMAT,
            "version": EXPORT_FORMAT_VERSION,
            "payload": _tagged(payload),
        }
        # No indent: only then does the json module use its C encoder (about 3 times
        # faster on a long history, which is mostly base64 embeddings). One line per file;
        # `python -m json.tool` shows it indented.
        try:
            text = json.dumps(doc, ensure_ascii=False, default=_bytes_to_json)
        except ValueError as exc:  # a circular reference, or NaN refused
            raise InvalidInput(f"export payload cannot be encoded as JSON: {exc}") from None
        data = text.encode("utf-8")
    else:
        try:
            body = msgpack.packb(payload, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInput(f"export payload cannot be encoded as msgpack: {exc}") from None
        head = _HEAD.pack(_MAGIC, EXPORT_FORMAT_VERSION, len(body))
        data = head + _CRC.pack(zlib.crc32(body, zlib.crc32(head))) + body
    _write_out(p, data)
    return p


def _write_out(p: Path, data: bytes) -> None:
    """Write an export's bytes to ``p`` (see the module docstring for each kind of file)."""
    target = p
    try:
        try:
            st: os.stat_result | None = os.lstat(p)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            # Through the link, as a shell's redirection goes: the link is the user's.
            target = Path(os.path.realpath(p))
            try:
                st = os.stat(target)
            except FileNotFoundError:
                st = None  # a dangling link: the file it names is created
        if st is None or stat.S_ISREG(st.st_mode):
            target.parent.mkdir(parents=True, exist_ok=True)
        elif stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            # Not renamed over: a pipe's reader, or the device, gets the bytes.
            fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)
            with open(fd, "wb") as f:
                f.write(data)
            return
        else:
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            kind = "a block device" if stat.S_ISBLK(st.st_mode) else kind
            raise InvalidInput(
                f"{p} is {kind}: an export is written to a regular file (replaced whole), "
                "a FIFO or a character device"
            )
    except OSError as exc:
        raise StorageError(f"{p}: writing export failed: {exc}") from exc
    atomic_write(target, data, "export")


def read_export(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a file written by :func:`write_export`; return its payload.

    Raises :class:`CorruptDataError` naming the file when it is damaged or not an export,
    :class:`NewerFormatError` when a newer version wrote it.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CorruptDataError(f"{p}: cannot read export: {exc}") from exc
    if p.suffix.lower() == ".json":
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise CorruptDataError(f"{p}: export is not valid JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("format") != _JSON_FORMAT:
            raise CorruptDataError(f"{p}: not a memoryos export file")
        version = doc.get("version")
        if not isinstance(version, int) or version < 1:
            raise CorruptDataError(f"{p}: export has invalid version {version!r}")
        if version > EXPORT_FORMAT_VERSION:
            raise NewerFormatError(f"{p}: export version {version} is newer than this build reads")
        payload = _from_json(doc.get("payload"), p)
    else:
        header_size = _HEAD.size + _CRC.size
        if len(data) < header_size:
            raise CorruptDataError(f"{p}: export is {len(data)} bytes, shorter than its header")
        magic, version, length = _HEAD.unpack_from(data)
        (crc,) = _CRC.unpack_from(data, _HEAD.size)
        if magic != _MAGIC:
            raise CorruptDataError(f"{p}: not a memoryos export file (magic {magic!r})")
        if length != len(data) - header_size:
            raise CorruptDataError(f"{p}: export length field does not match the file size")
        body = data[header_size:]
        if zlib.crc32(body, zlib.crc32(data[: _HEAD.size])) != crc:
            raise CorruptDataError(f"{p}: export checksum mismatch")
        if version > EXPORT_FORMAT_VERSION:
            raise NewerFormatError(f"{p}: export version {version} is newer than this build reads")
        payload = unpack_map(body, f"{p}: export payload")
    if not isinstance(payload, dict):
        raise CorruptDataError(f"{p}: export payload is not a map")
    return payload
