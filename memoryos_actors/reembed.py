"""Switching a data directory to another embedder: every stored vector computed again.

A user's data records the embedder that built its vectors, and a memory system configured
with another one refuses to open it (:class:`~memoryos_actors.errors.EmbedderMismatch`):
vectors of two embedders cannot be compared. :func:`reembed_data_dir` is the way forward.
Each user is exported with the old embedder (read-only), every vector of the export is
computed again from its text with the new one (:func:`reembed_export`: the pages of
mid-term segments, archived segments and pages, user facts and assistant traits, in the
tiers and in the archive, and corrected memories), and the export is imported into a new
data directory ``<data dir>/reembed/`` beside the old users. The export is the one
complete, checked picture of a user the library has (deleted memories stay deleted,
corrected ones stay corrected); an import checks it whole against the new embedder.

* **The old data is kept and used until the new data is complete.** Nothing under
  ``<data dir>/users/`` changes before every user is re-embedded; an interrupted run leaves
  the data directory opening with the old embedder, as before.
* **Resumable.** The users done are recorded (``reembed/users/.reembed-progress.json``,
  replaced atomically after each user); a rerun with the same embedder skips them, and
  removes what a killed run left half-imported.
* **Switched atomically.** When every user is done, ``users/`` and ``reembed/users/``
  trade places in one rename (``renameat2(RENAME_EXCHANGE)`` on Linux, ``renamex_np``
  with ``RENAME_SWAP`` on macOS; elsewhere two renames that a rerun finishes); the new
  users' meta files already record the new embedder. Then the old users are deleted.
* The data directory's lock is held throughout: a running server refuses it, and no
  server can start on it meanwhile.

Not handled yet (refused with a message): a sharded data directory (its users live in
its shards' folders), and the shared assistant personas (``shared_agent_persona``), whose pseudo-users no export carries.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .actors.base import ASSISTANT_PREFIX
from .actors.mtm import page_text
from .errors import CorruptDataError, EmbedderMismatch, InvalidInput
from .records import Page
from .store._files import atomic_write, fsync_dir
from .store.export import read_export, write_export
from .store.formats import (
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    ArchiveRecord,
    decode_archived,
    emb_to_f16,
)
from .store.lock import DataDirLock
from .store.paths import user_dir_name
from .store.user_meta import read_meta
from .store.userstore import META_FILE, USERS_DIR, list_users, user_path

if TYPE_CHECKING:
    from .config import MemoryConfig

__all__ = [
    "PROGRESS_FILE",
    "STAGING_DIR",
    "ReembedReport",
    "reembed_data_dir",
    "reembed_export",
]

STAGING_DIR = "reembed"
"""The folder of a data directory that holds the new data until the switch."""

PROGRESS_FILE = ".reembed-progress.json"
"""The record of a run's progress, in the new ``users/`` folder (it moves with it)."""

_EXPORT_TMP = "export-tmp"
_OLD_USERS = "users-old"  # only where no atomic exchange exists: the old users, set aside
_BATCH = 256  # texts per embedder call

Embed = Callable[[Sequence[str]], npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What :func:`reembed_data_dir` did.

    Attributes:
        data_dir: the data directory.
        embedder: the new embedder's ``(name, dimension)``.
        users: how many users the data directory holds.
        resumed: how many of them an earlier, interrupted run had already done.
    """

    data_dir: Path
    embedder: tuple[str, int]
    users: int
    resumed: int


# -- one export -----------------------------------------------------------------------------


def _vectors(embed: Embed, texts: Sequence[str], dim: int) -> npt.NDArray[np.float32]:
    """``texts`` embedded, ``_BATCH`` at a time: a ``(len(texts), dim)`` float32 matrix."""
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    parts = [np.asarray(embed(texts[i : i + _BATCH])) for i in range(0, len(texts), _BATCH)]
    mat = np.concatenate(parts).astype(np.float32)
    if mat.shape != (len(texts), dim):
        raise InvalidInput(f"the new embedder gave {mat.shape} vectors for {len(texts)} texts")
    return mat


def _page_text(page: Any) -> str:
    return page_text(Page.from_dict(page))


def _f32_rows(embed: Embed, texts: Sequence[str], dim: int) -> bytes:
    return _vectors(embed, texts, dim).astype("<f4").tobytes()


def _reembed_fifo(fifo: Any, embed: Embed, dim: int) -> None:
    """A KB or assistant-trait FIFO's state (``entries``, ``embeddings``), in place."""
    if isinstance(fifo, dict):
        texts = [str(e["text"]) for e in fifo.get("entries") or ()]
        fifo["embeddings"] = _f32_rows(embed, texts, dim)


def _reembed_archived(rec: Any, embed: Embed, dim: int) -> None:
    """An archive record's dict (as the archive file holds it), in place, re-encoded by
    its record type; a kind that holds no item is left as it is."""
    if not isinstance(rec, dict):
        return
    typed = decode_archived(rec)
    done: ArchiveRecord
    if isinstance(typed, ArchivedSegment):
        pages = list(typed.pages)
        vecs = _vectors(embed, [_page_text(p) for p in pages], dim)
        embs: dict[str | int, bytes] = {
            str(int(p["seq"])): emb_to_f16(v) for p, v in zip(pages, vecs, strict=True)
        }
        done = replace(typed, embs=embs)
    elif isinstance(typed, ArchivedPage):
        done = replace(typed, emb=emb_to_f16(_vectors(embed, [_page_text(typed.page)], dim)[0]))
    elif isinstance(typed, ArchivedFact):
        text = str(typed.entry.get("text", ""))
        done = replace(typed, emb=emb_to_f16(_vectors(embed, [text], dim)[0]))
    else:
        return
    rec.update(done.encode())


def reembed_export(
    payload: dict[str, Any],
    embed: Embed,
    embedder: tuple[str, int],
    config_fingerprint: str | None = None,
) -> dict[str, Any]:
    """The user export ``payload`` (what :meth:`MemoryAPI.export_user
    <memoryos_actors.api.MemoryAPI.export_user>` writes, as read back) with every vector
    computed again by ``embed`` (texts to unit vectors) and marked as made by ``embedder``
    (``(name, dimension)``); ``payload`` itself is not changed.

    Each vector is computed from the text the tiers embed: a page's query, response and
    chain summary; a fact's or a trait's text; a corrected memory's new text. The saved
    nearest-neighbour graphs are left out (they index the old vectors): the tiers build
    them again from the new vectors when the user is next opened.
    """
    name, dim = embedder
    out: dict[str, Any] = copy.deepcopy(payload)
    state = out["state"]
    mtm = state["mtm"]
    mtm["dim"] = dim
    mtm["page_graph"] = None
    mtm["segment_graph"] = None
    for seg in mtm.get("segments") or ():
        seg["embeddings"] = _f32_rows(embed, [_page_text(p) for p in seg["pages"]], dim)
    for rec in (mtm.get("work") or {}).get("unarchived") or ():
        _reembed_archived(rec, embed, dim)
    lpm = state["lpm"]
    lpm["dim"] = dim
    _reembed_fifo(lpm.get("kb"), embed, dim)
    for persona in (lpm.get("personas") or {}).values():
        _reembed_fifo(persona.get("traits") if isinstance(persona, dict) else None, embed, dim)
    for edit in lpm.get("edits") or ():
        if isinstance(edit, dict) and edit.get("emb") and edit.get("new") is not None:
            edit["emb"] = emb_to_f16(_vectors(embed, [str(edit["new"])], dim)[0])
    for rec in out.get("archive") or ():
        _reembed_archived(rec, embed, dim)
    out["embedder"] = [name, dim]
    if config_fingerprint is not None:
        out["config_fingerprint"] = config_fingerprint
    return out


# -- the data directory ---------------------------------------------------------------------


@dataclass
class _Progress:
    """What a run has done, as :data:`PROGRESS_FILE` records it."""

    embedder: tuple[str, int]
    done: list[str]
    complete: bool = False

    def write(self, folder: Path) -> None:
        data = {
            "format": "memoryos-reembed-progress",
            "version": 1,
            "embedder": list(self.embedder),
            "done": self.done,
            "complete": self.complete,
        }
        atomic_write(folder / PROGRESS_FILE, json.dumps(data).encode("utf-8"), "reembed progress")

    @classmethod
    def read(cls, folder: Path) -> _Progress | None:
        path = folder / PROGRESS_FILE
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            name, dim = doc["embedder"]
            return cls((str(name), int(dim)), [str(u) for u in doc["done"]], bool(doc["complete"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptDataError(f"{path}: not a reembed progress file ({exc})") from None


def reembed_data_dir(
    data_dir: str | os.PathLike[str],
    old_config: MemoryConfig,
    new_config: MemoryConfig,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> ReembedReport:
    """Compute every vector stored in ``data_dir`` again with ``new_config``'s embedder
    (see the module docstring); ``old_config`` opens the data directory as it is.

    ``progress(user_id, done, total)`` is called once the users left are known (with an
    empty user id) and after each user. Resumes an interrupted run with the same new
    embedder; returns when the data directory opens with the new embedder only.

    Raises:
        DataDirLocked: another process (a server) holds the data directory.
        InvalidInput: no data directory there, a sharded one, shared assistant personas,
            a damaged user (``memoryos repair`` it first), or an interrupted run towards
            another embedder.
        EmbedderMismatch: ``old_config`` does not open the data directory.
    """
    root = Path(data_dir)
    if not (root / USERS_DIR).is_dir() and not (root / STAGING_DIR).is_dir():
        # A sharded data directory keeps its users in its shards' folders: refused here too.
        raise InvalidInput(f"{root}: no unsharded data directory (no {USERS_DIR}/ folder)")
    staging = root / STAGING_DIR
    with DataDirLock(root):
        if _switch_was_done(root):
            prog = _Progress.read(root / USERS_DIR)
            assert prog is not None
            _clean_up(root)
            n = len(prog.done)
            if progress is not None:
                progress("", n, n)
            return ReembedReport(root, prog.embedder, n, n)
        damaged: dict[str, str] = {}
        users = list_users(root, damaged=damaged)
        if damaged:
            where, why = next(iter(damaged.items()))
            raise InvalidInput(
                f"{root}: user folder {where} is damaged ({why}); repair it first "
                "(memoryos repair USER)"
            )
        shared = [u for u in users if u.startswith(ASSISTANT_PREFIX)]
        if shared:
            raise InvalidInput(
                f"{root} holds shared assistant personas ({shared[0]!r}); reembed does not "
                "carry them yet"
            )
        new_users = staging / USERS_DIR
        prog = _Progress.read(new_users) if new_users.is_dir() else None
        _drop_unfinished(new_users, prog)
        try:
            target, resumed = _run(root, users, prog, old_config, new_config, progress)
        except BaseException:
            if prog is None:  # nothing of a run to resume: no folder left behind
                shutil.rmtree(staging, ignore_errors=True)
            raise
        shutil.rmtree(staging / _EXPORT_TMP, ignore_errors=True)
        _switch(root)
        _clean_up(root)
    return ReembedReport(root, target, len(users), resumed)


def _run(
    root: Path,
    users: list[str],
    prog: _Progress | None,
    old_config: MemoryConfig,
    new_config: MemoryConfig,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[tuple[str, int], int]:
    """Re-embed every user of ``users`` not done yet into ``root/reembed``; the new
    embedder's ``(name, dimension)``, and how many users an earlier run had done."""
    from .system import MemoryOS

    staging = root / STAGING_DIR
    new_users = staging / USERS_DIR
    with (
        MemoryOS.open(root, old_config, read_only=True) as old,
        MemoryOS.open(staging, new_config) as new,
    ):
        target = new.gateway_service.embedder_info()
        if prog is None:
            prog = _Progress(target, [])
        elif prog.embedder != target:
            raise InvalidInput(
                f"{staging} holds an interrupted reembed to {prog.embedder[0]!r} "
                f"(dim {prog.embedder[1]}), not {target[0]!r} (dim {target[1]}): rerun "
                f"it with that embedder, or delete {staging} to start over"
            )
        source = old.gateway_service.embedder_info()
        if target == source:
            raise InvalidInput(f"{root} is embedded with {target[0]!r} (dim {target[1]}) already")
        _check_source(root, users, source)
        new_users.mkdir(parents=True, exist_ok=True)
        prog.write(new_users)
        done = set(prog.done)
        resumed = sum(1 for u in users if u in done)
        if progress is not None:
            progress("", resumed, len(users))

        def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
            return new.gateway_service.embed(list(texts))

        count = resumed
        for uid in users:
            if uid in done:
                continue
            _move_user(old, new, uid, staging, embed, target, new_config.fingerprint())
            prog.done.append(uid)
            prog.write(new_users)
            count += 1
            if progress is not None:
                progress(uid, count, len(users))
        prog.complete = True
        prog.write(new_users)
    return target, resumed


def _check_source(root: Path, users: list[str], source: tuple[str, int]) -> None:
    """Refuse unless every user's recorded embedder is ``source`` (or none yet)."""
    for uid in users:
        meta = read_meta(user_path(root, uid) / META_FILE)
        recorded = (meta.embedder_name, meta.embedder_dim)
        if meta.embedder_name is not None and recorded != source:
            raise EmbedderMismatch(
                f"user {uid!r} in {root} was embedded with {recorded[0]!r} (dim "
                f"{recorded[1]}) but the configuration names {source[0]!r} (dim {source[1]}): "
                "run reembed with the configuration that opens the data directory today "
                "(--config, MEMORYOS_* variables) and name the new embedder in its options"
            )


def _move_user(
    old: Any,
    new: Any,
    uid: str,
    staging: Path,
    embed: Embed,
    target: tuple[str, int],
    fingerprint: str,
) -> None:
    """Export ``uid`` from ``old``, re-embed it, import it into ``new``."""
    tmp = staging / _EXPORT_TMP
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        payload = read_export(old.export_user(uid, tmp / "old.msgpack"))
        write_export(tmp / "new.msgpack", reembed_export(payload, embed, target, fingerprint))
        new.import_user(tmp / "new.msgpack", user_id=uid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _drop_unfinished(new_users: Path, prog: _Progress | None) -> None:
    """Remove from ``new_users`` every user folder of a user not recorded as done: a
    killed run may have left one half-imported."""
    if not new_users.is_dir():
        return
    keep = {user_dir_name(u) for u in (prog.done if prog is not None else ())}
    for entry in new_users.iterdir():
        if entry.is_dir() and not entry.is_symlink() and entry.name not in keep:
            shutil.rmtree(entry)
    fsync_dir(new_users)


def _switch_was_done(root: Path) -> bool:
    """Whether an earlier run made the switch (and was stopped before cleaning up); one
    that stopped halfway through two renames is finished here."""
    users, new_users = root / USERS_DIR, root / STAGING_DIR / USERS_DIR
    aside = root / STAGING_DIR / _OLD_USERS
    if not users.exists() and aside.is_dir() and new_users.is_dir():
        os.rename(new_users, users)  # the second of the two renames
        fsync_dir(root)
    prog = _Progress.read(users) if users.is_dir() else None
    return prog is not None and prog.complete


def _switch(root: Path) -> None:
    """Put the new users in place of the old ones, atomically where the system can."""
    users, new_users = root / USERS_DIR, root / STAGING_DIR / USERS_DIR
    users.mkdir(exist_ok=True)
    if not _exchange(users, new_users):
        os.rename(users, root / STAGING_DIR / _OLD_USERS)
        fsync_dir(root / STAGING_DIR)
        os.rename(new_users, users)
    fsync_dir(root)
    fsync_dir(root / STAGING_DIR)


def _clean_up(root: Path) -> None:
    """After the switch: the old users (now under ``reembed/``) and the progress file go."""
    with contextlib.suppress(FileNotFoundError):
        (root / USERS_DIR / PROGRESS_FILE).unlink()
    fsync_dir(root / USERS_DIR)
    shutil.rmtree(root / STAGING_DIR, ignore_errors=True)
    fsync_dir(root)


def _exchange(a: Path, b: Path) -> bool:
    """Swap paths ``a`` and ``b`` in one rename; False where the system has no such call."""
    libc_name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
    except OSError:
        return False
    fa, fb = os.fsencode(a), os.fsencode(b)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        at_fdcwd, rename_exchange = -100, 2
        result = libc.renameat2(at_fdcwd, fa, at_fdcwd, fb, rename_exchange)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rename_swap = 2
        result = libc.renamex_np(fa, fb, rename_swap)
    else:
        return False
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False  # the file system cannot: two renames instead
    raise OSError(err, os.strerror(err), str(a), None, str(b))
