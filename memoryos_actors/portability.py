"""Moving a user's memory in and out: export to a file, import from one, and forget (delete
every trace), and repair. Each runs as one operation of the user directory.
:class:`Portability` works on the facade's :class:`~memoryos_actors.core.SystemCore`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .actors import persist
from .actors.base import (
    actor_names,
)
from .actors.protocol import GetState
from .directory import UserPhase
from .errors import (
    InvalidInput,
    Overloaded,
)
from .import_check import check_export
from .reports import ForgetReport, RepairReport
from .store.edits import MemoryRef, parse_memory_id
from .store.export import read_export, write_export
from .store.formats import rename_archived_assistant
from .store.userstore import UserStore, user_exists
from .validation import check_new_id as _check_new_id
from .validation import check_path as _check_path
from .validation import check_user_id as _check_user_id

if TYPE_CHECKING:
    from .activation import Lifecycle
    from .barrier import Barriers
    from .core import SystemCore


__all__ = ["Portability", "rename_assistants"]


_EXPORT_FORMAT = "memoryos-actors/user-export"
_EXPORT_VERSION = 1


class Portability:
    """Export, import, forget and repair of a user (thread-safe). The contracts are
    documented on :class:`~memoryos_actors.api.MemoryAPI`."""

    def __init__(self, core: SystemCore, lifecycle: Lifecycle, barriers: Barriers) -> None:
        self._core = core
        self._lifecycle = lifecycle
        self._barriers = barriers

    def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """See :meth:`~memoryos_actors.api.MemoryAPI.export_user`."""
        uid = _check_user_id(user_id)
        out = _check_path(path, "path")
        wait = self._core.config.overload_timeout_seconds
        deadline = time.monotonic() + wait
        while True:
            self._lifecycle.call(uid, lambda _e: None, create=False)  # make sure the user is live
            self._barriers.flush(timeout=max(0.001, deadline - time.monotonic()), user_id=uid)
            entry = self._core.directory.claim_active(uid, UserPhase.EXPORTING, deadline)
            if entry is not None:
                break
            if time.monotonic() > deadline:
                raise Overloaded(f"user {uid!r} was passivated again and again; export gave up")
        try:
            stm_n, mtm_n, lpm_n = actor_names(uid)
            # Turns acknowledged since the flush: their pages leave STM's outbox (neither
            # STM's nor MTM's state holds a page on its way between them); MTM's state is
            # asked for after them, so it has them placed.
            self._barriers.settle_pages(uid, max(0.001, deadline - time.monotonic()))
            stm = self._core.ask(stm_n, GetState()).data
            state = {
                "seq": stm["seq"],
                "stm": stm["stm"],
                "mtm": self._core.ask(mtm_n, GetState()).data,
                "lpm": self._core.ask(lpm_n, GetState()).data,
            }
            assert entry.store is not None
            # Evictions between the MTM state and this read are re-applied on import (the
            # MTM state says which archive record it reflects), so the cut is consistent.
            # Deleted memories are not exported; corrected ones are exported corrected (the
            # LPM state carries the edits, the memories' history).
            kept = entry.store.archive_records()
            store_archive = [rec for _seq, rec in kept]
            # The import numbers the exported records 1, 2, ...: records wholly deleted
            # are not exported, so the MTM state's cut is renumbered to match.
            cut = int(state["mtm"].get("archive_seq", 0))
            state["mtm"] = {
                **state["mtm"],
                "archive_seq": sum(1 for seq, _rec in kept if seq <= cut),
            }
        finally:
            self._core.directory.finish(entry, UserPhase.ACTIVE)
        payload = {
            "format": _EXPORT_FORMAT,
            "version": _EXPORT_VERSION,
            "user_id": uid,
            "config_fingerprint": self._core.config.fingerprint(),
            "embedder": list(self._core.gateway_service.embedder_info()),
            "state": state,
            "archive": store_archive,
        }
        write_export(out, payload)
        return out

    def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """See :meth:`~memoryos_actors.api.MemoryAPI.import_user`."""
        self._core.check_writable("import_user")
        try:
            payload = read_export(_check_path(path, "path"))
        except RecursionError:
            raise InvalidInput(f"{path}: nested too deeply to be a user export") from None
        name, dim = self._core.gateway_service.embedder_info()
        # The whole export is checked before a file is written: a failed import leaves
        # nothing behind, and no user is made of data the tiers would refuse later.
        checked = check_export(payload, str(path), self._core.config, (name, dim))
        uid = _check_new_id(_check_user_id(user_id if user_id is not None else checked.user_id))
        deadline = time.monotonic() + self._core.config.overload_timeout_seconds
        entry = self._core.directory.claim_passive(uid, UserPhase.IMPORTING, deadline)
        if entry is None:
            raise InvalidInput(f"user {uid!r} already has data; forget_user first")
        try:
            # Only this user's directory decides: another user's damaged files must not
            # block it.
            if user_exists(self._core.data_dir, uid):
                raise InvalidInput(f"user {uid!r} already has data; forget_user first")
            cfg = self._core.config
            try:
                store = UserStore(
                    self._core.data_dir,
                    uid,
                    fsync=cfg.fsync,
                    fsync_interval=cfg.fsync_interval_seconds,
                    archive=cfg.archive_enabled,
                )
                try:
                    store.check_embedder(name, dim, cfg.fingerprint())
                    # Stored as another id: the pages and the persona name their new owner.
                    source = checked.user_id
                    persist.import_state(store, persist.rebind_user(checked.state, source, uid))
                    if store.archive is not None:
                        for rec in checked.archive:
                            store.archive.append(persist.rebind_user(rec, source, uid))
                finally:
                    store.close()
            except BaseException:
                UserStore.remove(self._core.data_dir, uid)  # a half-imported user is no user
                raise
        finally:
            self._core.directory.finish(entry, UserPhase.PASSIVE)
        return uid

    def forget_user(self, user_id: str) -> ForgetReport:
        """See :meth:`~memoryos_actors.api.MemoryAPI.forget_user`."""
        uid = _check_user_id(user_id)
        self._core.check_writable("forget_user")
        deadline = time.monotonic() + self._core.config.overload_timeout_seconds
        while True:
            entry = self._core.directory.claim_active(uid, UserPhase.FORGETTING, deadline)
            was_active = entry is not None
            if entry is None:
                entry = self._core.directory.claim_passive(uid, UserPhase.FORGETTING, deadline)
            if entry is not None:
                break
            if time.monotonic() > deadline:
                raise Overloaded(f"user {uid!r} kept changing state; forget_user gave up")
        try:
            if was_active:
                self._lifecycle.stop_group(entry, snapshot=False)
            removed = UserStore.remove(self._core.data_dir, uid)
            # The group's actors started their gateway jobs themselves, before they
            # stopped (GatewayClient.submit): no job of this user waits in a mailbox.
            purged = self._core.gateway_service.purge_user(uid)
            purged["degraded_records"] = self._core.gateway.purge_user(uid)
        finally:
            self._core.directory.finish(entry, UserPhase.PASSIVE)
        return ForgetReport(uid, tuple(removed), was_active, purged)

    def repair_user(self, user_id: str) -> RepairReport:
        """See :meth:`~memoryos_actors.api.MemoryAPI.repair_user`."""
        from .repair import repair_user

        uid = _check_user_id(user_id)
        self._core.check_writable("repair_user")
        deadline = time.monotonic() + self._core.config.overload_timeout_seconds
        while True:
            entry = self._core.directory.claim_active(uid, UserPhase.REPAIRING, deadline)
            was_active = entry is not None
            if entry is None:
                entry = self._core.directory.claim_passive(uid, UserPhase.REPAIRING, deadline)
            if entry is not None:
                break
            if time.monotonic() > deadline:
                raise Overloaded(f"user {uid!r} kept changing state; repair_user gave up")
        try:
            if was_active:
                self._lifecycle.stop_group(entry, snapshot=False)
            report = repair_user(self._core.data_dir, uid)
            self._core.damaged.pop(uid, None)
        finally:
            self._core.directory.finish(entry, UserPhase.PASSIVE)
        return report


def rename_assistants(payload: dict[str, Any], rename: Callable[[str], str]) -> dict[str, Any]:
    """A copy of the export ``payload`` (what :meth:`Portability.export_user` writes) in
    which every assistant id ``a`` is ``rename(a)``: the pages' ``assistant_id`` (in every
    tier, queue and archive record), the LPM's personas, the archived agent traits, the
    agent-trait memory ids of the memories' history and the assistant of each job owed.

    Parts of another shape are copied as they are (the import's check refuses them);
    ``payload`` itself is not changed. ``rename`` may raise (e.g. ``InvalidInput``).
    """

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: rename(v) if k == "assistant_id" and isinstance(v, str) else walk(v)
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out: dict[str, Any] = walk(payload)
    state = out.get("state")
    lpm = state.get("lpm") if isinstance(state, dict) else None
    if isinstance(lpm, dict):
        personas = lpm.get("personas")
        if isinstance(personas, dict):
            lpm["personas"] = {
                rename(k) if isinstance(k, str) else k: v for k, v in personas.items()
            }
        for edit in lpm.get("edits") or ():
            if isinstance(edit, dict) and isinstance(edit.get("id"), str):
                edit["id"] = _rename_in_memory_id(edit["id"], rename)
    mtm = state.get("mtm") if isinstance(state, dict) else None
    work = mtm.get("work") if isinstance(mtm, dict) else None
    for job in (work.get("jobs") if isinstance(work, dict) else None) or ():
        # A persona job's tag ends "|<assistant>" (segment ids hold no "|").
        tag = job.get("tag") if isinstance(job, dict) else None
        if isinstance(tag, str) and "|" in tag:
            head, _, assistant = tag.partition("|")
            job["tag"] = f"{head}|{rename(assistant)}"
    archive = out.get("archive")
    for rec in archive if isinstance(archive, list) else ():
        rename_archived_assistant(rec, rename)
    return out


def _rename_in_memory_id(memory_id: str, rename: Callable[[str], str]) -> str:
    """``memory_id`` with its assistant renamed if it is an agent trait's."""
    try:
        ref = parse_memory_id(memory_id)
    except InvalidInput:
        return memory_id
    if ref.kind != "agent_trait":
        return memory_id
    return MemoryRef(ref.kind, ref.key, rename(ref.assistant)).memory_id
