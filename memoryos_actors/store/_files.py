"""Durable file replacement: the one way the store writes a whole file.

A crash at any point leaves either the old file or the complete new one, never a mix:
the bytes go to ``<name>.tmp`` beside the target, are fsynced, renamed over the target,
and the directory is fsynced so the rename itself survives a machine crash.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from memoryos_actors.errors import StorageError

__all__ = ["atomic_write", "fsync_dir", "fsync_file", "is_blank", "tmp_path"]


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside directory ``path`` durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # Windows cannot open directories; its renames are metadata-journaled
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make the content of the file at ``path`` durable (it must exist)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_blank(path: Path) -> bool:
    """Whether the file at ``path`` holds nothing but zero bytes (or nothing at all).

    That is what a file created without fsync can look like after a machine crash: its
    name reached the disk, its bytes did not. A file that ever held data made durable
    never looks like this.
    """
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 16):
                if chunk.count(0) != len(chunk):
                    return False
    except OSError:
        return False
    return True


def tmp_path(path: Path) -> Path:
    """Where :func:`atomic_write` stages the new content of ``path`` (``<name>.tmp``)."""
    return path.with_name(path.name + ".tmp")


def atomic_write(
    path: Path, content: bytes | Callable[[BinaryIO], None], what: str, *, durable: bool = True
) -> None:
    """Replace ``path`` with ``content`` durably (temp file, fsync, rename, directory fsync).

    Args:
        path: the file to create or replace; its directory must exist.
        content: the bytes, or a function that writes them to the open temp file (for
            content streamed from another file).
        what: what the file is, for the error message (``"snapshot"``, ``"meta"``).
        durable: False skips both fsyncs: a killed process still leaves the old file or
            the whole new one, but after a machine crash the file may be missing or
            blank (see :func:`is_blank`) until the caller fsyncs it and its directory.

    Raises:
        StorageError: the write, fsync or rename failed; the temp file is removed and
            ``path`` is unchanged.
    """
    tmp = tmp_path(path)
    try:
        with open(tmp, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        # Removing the temp file can fail for the reason the write did (a name too long
        # for the file system, a directory gone): the caller must still get the typed
        # error for the write, not this second one.
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise StorageError(f"{path}: writing {what} failed: {exc}") from exc
    if durable:
        fsync_dir(path.parent)
