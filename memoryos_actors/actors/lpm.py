"""The LPM actor: the user's profile, knowledge base and traits, and the agent persona.

Everything that changes LPM is written to the user's WAL before it is applied: profiles the
caller set (user data, acknowledged once durable) and persona updates derived from promoted
segments (LLM work that a crash should not have to redo). Recovery is the snapshot's LPM
section plus those WAL records with a higher LSN.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np
import structlog

from supervisor import SupervisedActor

from ..cold_items import ColdItem
from ..errors import InvalidInput, MemoryOSError, UnknownMemory
from ..lexicon import terms
from ..messages import (
    FactHit,
    KBEntry,
    PersonaUpdate,
    SetAgentProfile,
    SetUserProfile,
    TraitLevel,
)
from ..store.edits import EDITABLE_KINDS, cold_item_id, parse_memory_id
from ..store.formats import (
    AgentProfileRecord,
    ArchivedFact,
    EditRecord,
    PersonaRecord,
    RememberRecord,
    UserProfileRecord,
    emb_from_f16,
    emb_to_f16,
)
from ..tiers.lpm import LPMCore
from ..tiers.quotes import Deletion
from ..tiers.traits import TRAITS_BY_NAME
from .base import UserEnv, actor_names, persona_owner, reply_state
from .protocol import (
    ApplyPersona,
    CompletionDone,
    EditMemory,
    GetState,
    Inspect,
    LPMPicture,
    LPMSearch,
    PersonaAgain,
    Ping,
    ReadHistory,
    Remember,
    TierState,
    emb_from_bytes,
    split_tag,
)

__all__ = ["LPMActor"]

log = structlog.get_logger("memoryos.lpm")

#: Applied job ids an LPM state keeps.
_APPLIED_JOBS = 512

#: Archived facts and agent traits a deletion looks at: those that best match the deleted
#: pages' words (one that quotes a page shares its words).
_QUOTE_CANDIDATES = 1000

#: WAL record kinds that LPM writes and replays.
_LPM_RECORDS = (UserProfileRecord, AgentProfileRecord, PersonaRecord, EditRecord, RememberRecord)
_LPMRecord = UserProfileRecord | AgentProfileRecord | PersonaRecord | EditRecord | RememberRecord


class LPMActor(SupervisedActor):
    """Long-term persona memory of one user (and the agent personas it talks to)."""

    expected_errors = (MemoryOSError,)

    def __init__(self, env: UserEnv) -> None:
        super().__init__()
        self.env = env
        # The injected clock stamps new facts and traits (never the wall clock: a replay
        # must give the same state, and tests drive time).
        self.core = LPMCore(env.config, clock=env.clock)
        self.lsn = 0
        self.updates = 0
        #: Ids of the MTM jobs whose persona update was applied lately (snapshots keep
        #: them: MTM's recovery does not ask those again).
        self.applied_jobs: deque[str] = deque(maxlen=_APPLIED_JOBS)

    def on_start(self) -> None:
        env = self.env
        recovered = env.recovered("lpm")
        if recovered.state is not None:
            lpm_state = recovered.state["lpm"]
            self.core = LPMCore.from_state(lpm_state, env.config, clock=env.clock)
            self.lsn = int(lpm_state.get("lsn", 0))
            self.applied_jobs.extend(str(j) for j in lpm_state.get("applied_jobs", ()))
        for lsn, rec in recovered.replay:
            if lsn > self.lsn and isinstance(rec, _LPM_RECORDS):
                self._apply_record(rec, lsn)
                self.lsn = lsn

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        if isinstance(message, LPMSearch):
            q = emb_from_bytes(message.query_embedding)
            view = self.core.search(
                q, message.top_k_kb, message.top_k_agent, assistant_id=message.assistant_id
            )
            if message.query_terms:
                view = self._with_archived(view, q, message)
            return view
        if isinstance(message, CompletionDone):
            if not self.env.stale(message.epoch):
                self._persona_done(message)
            return None
        if isinstance(message, ApplyPersona):
            # Another user's promotion taught the shared persona of an assistant something.
            update = message.update
            self._log_and_apply(
                PersonaRecord(
                    assistant_id=update.assistant_id,
                    segment_id=update.source_segment or "",
                    agent_traits=update.agent_traits,
                    timestamp=self.env.clock.now(),
                )
            )
            return None
        if isinstance(message, SetUserProfile):
            return self._log_and_apply(UserProfileRecord(message.profile))
        if isinstance(message, SetAgentProfile):
            return self._log_and_apply(AgentProfileRecord(message.assistant_id, message.profile))
        if isinstance(message, EditMemory):
            return self._edit(message)
        if isinstance(message, Remember):
            return self._remember(message)
        if isinstance(message, ReadHistory):
            ref = parse_memory_id(message.memory_id)
            changes = self.core.trait_history(ref.key) if ref.kind == "trait" else ()
            return tuple(self.env.store.edits.history_of(ref.memory_id)), changes
        if isinstance(message, GetState):
            return reply_state(
                self.env,
                message,
                TierState(
                    "lpm",
                    {
                        **self.core.to_state(),
                        "lsn": self.lsn,
                        "edits": self.env.store.edits.to_state(),
                        "applied_jobs": list(self.applied_jobs),
                    },
                ),
            )
        if isinstance(message, Inspect):
            core = self.core
            return LPMPicture(
                profile=core.user_profile(),
                traits=core.known_traits(),
                kb=core.kb(),
                agents={
                    aid: {"profile": core.agent_profile(aid), "traits": core.agent_traits(aid)}
                    for aid in core.assistants()
                },
                updates=self.updates,
            )
        if isinstance(message, Ping):
            return None
        raise TypeError(f"LPM actor got an unknown message: {type(message).__name__}")

    # -- work ----------------------------------------------------------------------------

    def _persona_done(self, done: CompletionDone) -> None:
        env = self.env
        job_id, segment_id, assistant_id = split_tag(done.tag)
        data = done.data
        read = {int(s) for s in data.get("pages") or ()}
        if not read.isdisjoint(env.store.edits.deleted_pages):
            # Asked before a page it read was deleted: it may quote it. MTM asks again
            # from the pages left; until then the update is owed again (a flush that
            # pings this actor after this waits for the new one).
            owed = env.job_watch.owe_again(job_id or segment_id)
            if not env.registry.tell(env.mtm_name, PersonaAgain(segment_id, owed)):
                env.job_watch.settle(*owed)  # MTM is not running: nothing would settle it
            return
        record = PersonaRecord.from_gateway(
            data,
            assistant_id=assistant_id or "default",
            segment_id=segment_id,
            degraded=done.degraded,
            timestamp=env.clock.now(),
        )
        if env.config.shared_agent_persona and record.agent_traits:
            owner = persona_owner(env.user_id, record.assistant_id, True)
            update = ApplyPersona(
                PersonaUpdate(
                    user_id=owner,
                    assistant_id=record.assistant_id,
                    agent_traits=record.agent_traits,
                    source_segment=f"{env.user_id}/{segment_id}",
                )
            )
            # Through the registry: the shared persona may stop between a lookup and a
            # send (passivation, a restart), and that is no reason for this LPM to crash.
            if env.registry.tell(actor_names(owner)[2], update):
                record = dataclasses.replace(record, agent_traits=())
            else:
                # Not running now: the traits stay in this user's own persona.
                log.warning(
                    "lpm.shared_persona_unavailable",
                    user=env.user_id,
                    assistant=record.assistant_id,
                )
        if not record.learned:
            return
        if job_id:
            # MTM's recovery reads it: this job's answer needs no asking again.
            record = dataclasses.replace(record, job=job_id)
            self.applied_jobs.append(job_id)
        self._log_and_apply(record)
        self.updates += 1

    def _log_and_apply(self, record: _LPMRecord) -> int:
        lsn = self.env.store.wal.append(record)
        self._apply_record(record, lsn)
        self.lsn = lsn
        return lsn

    def _remember(self, msg: Remember) -> str:
        """Log a free-text memory, add it as a user fact, and answer its memory id."""
        env = self.env
        emb = emb_to_f16(env.gateway.embed([msg.text], env.user_id)[0])
        record = RememberRecord(
            entry_id=self.core.next_fact_id(),
            text=msg.text,
            timestamp=env.clock.now(),
            metadata=msg.metadata,
            emb=emb,
        )
        record.entry()  # validated before it is logged
        self._log_and_apply(record)
        return f"fact:{record.entry_id}"

    def _edit(self, msg: EditMemory) -> EditRecord:
        """Log one per-memory edit, apply it here, and answer its record."""
        ref = parse_memory_id(msg.memory_id)
        if msg.op not in ("delete", "correct"):
            raise InvalidInput(f"op must be 'delete' or 'correct', got {msg.op!r}")
        if self.env.store.edits.gone(ref.memory_id):
            # Edits of one user reach this actor one at a time: of a deletion and anything
            # racing it, whatever comes after the deletion finds nothing to edit.
            raise UnknownMemory(f"user {self.env.user_id!r} has no memory {ref.memory_id!r}")
        new = evidence = emb = None
        if msg.op == "correct":
            if ref.kind not in EDITABLE_KINDS or msg.value is None:
                raise InvalidInput(f"{ref.kind} memories can be deleted, not corrected")
            new = msg.value
            if ref.kind == "trait":
                TraitLevel.known(ref.key, msg.value, msg.evidence)  # validates the level
                evidence = msg.evidence
            else:
                emb = emb_to_f16(self.env.gateway.embed([msg.value], self.env.user_id)[0])
        edit = EditRecord(
            op=msg.op,
            memory_id=ref.memory_id,
            old=msg.old,
            ts=self.env.clock.now(),
            pages=tuple(int(s) for s in msg.pages),
            chains=tuple((str(c), int(s), int(u)) for c, s, u in msg.chains),
            segments=tuple(msg.segments),
            new=new,
            evidence=evidence,
            emb=emb,
            derived=self._quoting(msg) if msg.op == "delete" and msg.quoted else (),
        )
        lsn = self._log_and_apply(edit)
        return dataclasses.replace(edit, lsn=lsn)

    def _quoting(self, msg: EditMemory) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
        """What of this LPM quotes the pages ``msg`` deletes, as ``EditRecord.derived``
        entries (:mod:`memoryos_actors.tiers.quotes`): hot and archived facts and agent
        traits, traits and their history, and the old values of facts the user corrected."""
        edits = self.env.store.edits
        hot = dict(msg.kept)
        deleted = {int(s) for s in msg.pages}

        def kept(segment_id: str) -> list[str]:
            texts = list(hot.get(segment_id, ()))
            texts.extend(t for _s, seq, t in self._archived_pages(segment_id) if seq not in deleted)
            return texts

        deletion = Deletion(msg.quoted, kept)
        corrected = {mid for mid in edits.corrected if not mid.startswith("trait:")}
        found = self.core.quoting(deletion.quotes, skip=corrected)
        named = {mid for mid, _a, _at in found}
        for mid, text, source in self._archived_entries(msg.quoted):
            if mid not in named and mid not in corrected and not edits.gone(mid):
                if deletion.quotes(text, source):
                    found.append((mid, "delete", ()))
                    named.add(mid)
        for mid in sorted(corrected):
            olds = [str(e.old) for e in edits.history_of(mid) if e.memory_id == mid and e.old]
            source = self._source_of(mid)
            if not edits.gone(mid) and any(deletion.quotes(o, source) for o in olds):
                found.append((mid, "scrub", ()))
        return tuple(found)

    def _archived_pages(self, segment_id: str) -> list[tuple[str, int, str]]:
        """The pages of ``segment_id`` in the archive (none when the index fails: what the
        segment keeps is then taken to be what MTM holds)."""
        try:
            return self.env.store.cold.segment_pages((segment_id,))
        except MemoryOSError as exc:
            log.warning("lpm.cold_segment_failed", user=self.env.user_id, error=str(exc))
            return []

    def _archived_entries(self, quoted: Any) -> list[tuple[str, str, str | None]]:
        """``(memory id, text, source segment)`` of the archived facts and agent traits that
        share a word with the ``quoted`` pages' texts (the only ones that can quote them)."""
        words = sorted({t for _seg, text in quoted for t in terms(text)})
        if not words:
            return []
        try:
            found = self.env.store.cold.search(
                words, _QUOTE_CANDIDATES, kinds=("fact", "agent_trait")
            )
        except MemoryOSError as exc:
            log.warning("lpm.cold_search_failed", user=self.env.user_id, error=str(exc))
            return []
        out = []
        for item in found.items:
            if not isinstance(item, ColdItem):  # a light row: never asked for here
                continue
            if item.record.get("origin") == "remembered":
                continue  # the application's own words, distilled from no page
            out.append((item.memory_id, item.entry_text, item.source_segment or None))
        return out

    def _source_of(self, memory_id: str) -> str | None:
        """The source segment of fact or agent trait ``memory_id``, held or archived."""
        ref = parse_memory_id(memory_id)
        entry = self.core.entry(ref.kind, ref.key, ref.assistant)
        if entry is not None:
            return entry.source_segment
        item_id = cold_item_id(ref)
        try:
            item = self.env.store.cold.item(item_id) if item_id else None
        except MemoryOSError:
            item = None
        source = item.source_segment if item is not None else None
        return source or None

    def _apply_edit(self, edit: EditRecord, lsn: int) -> None:
        """Apply an edit record (live or replayed): idempotent."""
        ref = parse_memory_id(edit.memory_id)
        core = self.core
        for mid, action, at in edit.derived:
            # What quoted the deleted pages, as the deletion found it: replayed exactly.
            took = parse_memory_id(mid)
            if took.kind == "trait":
                if took.key in TRAITS_BY_NAME:
                    core.forget_trait_changes(took.key, at, revert=action == "revert")
            elif action == "delete":
                core.remove_entry(took.kind, took.key, took.assistant)
        if ref.kind in ("fact", "agent_trait"):
            if edit.op == "delete":
                core.remove_entry(ref.kind, ref.key, ref.assistant)
            else:
                emb = emb_from_f16(edit.emb)
                if emb is None:
                    emb = self.env.gateway.embed([str(edit.new)], self.env.user_id)[0]
                core.replace_entry(ref.kind, ref.key, str(edit.new), emb, ref.assistant)
        elif ref.kind == "trait":
            level = None if edit.op == "delete" else str(edit.new)
            core.set_trait(ref.key, level, edit.evidence or "", now=edit.ts, source="edit")
        store = self.env.store
        if store.edits.add(dataclasses.replace(edit, lsn=lsn)) and store.cold.is_open:
            # A closed index applies the edit when it is next opened.
            try:
                store.cold.sync_edits()
            except MemoryOSError as exc:
                log.warning("lpm.cold_edit_failed", user=self.env.user_id, error=str(exc))

    def _apply_record(self, rec: _LPMRecord, lsn: int = 0) -> None:
        if isinstance(rec, EditRecord):
            self._apply_edit(rec, lsn)
        elif isinstance(rec, RememberRecord):
            emb = emb_from_f16(rec.emb)
            if emb is None:
                emb = self.env.gateway.embed([rec.text], self.env.user_id)[0]
            self._archive_evicted(self.core.remember(rec.entry(), emb), "")
        elif isinstance(rec, UserProfileRecord):
            self.core.set_user_profile(rec.profile)
        elif isinstance(rec, AgentProfileRecord):
            self.core.set_agent_profile(rec.assistant_id, rec.profile)
        else:
            self._apply_persona(rec)

    def _apply_persona(self, rec: PersonaRecord) -> None:
        env = self.env
        update, unknown = rec.update(env.user_id)
        for name in unknown:
            log.info("lpm.unknown_trait", user=env.user_id, trait=name)
        uid = env.user_id
        facts_emb = env.gateway.embed(list(update.facts), uid) if update.facts else None
        agent_emb = (
            env.gateway.embed(list(update.agent_traits), uid) if update.agent_traits else None
        )
        # Entries are stamped with the time the update was logged, so a WAL replay gives
        # them the same times (records written before "ts" existed: the clock now).
        ts = rec.timestamp
        effects = self.core.apply(
            update, facts_emb, agent_emb, now=None if ts is None else float(ts)
        )
        self._archive_evicted(effects, update.assistant_id)

    def _with_archived(self, view: Any, q: Any, message: LPMSearch) -> Any:
        """Merge archived facts / agent traits into the view, ranked by the same cosine."""
        try:
            found = self.env.store.cold.search(
                message.query_terms,
                4 * max(message.top_k_kb, message.top_k_agent, 1),
                kinds=("fact", "agent_trait"),
            )
        except MemoryOSError as exc:
            log.warning("lpm.cold_search_failed", user=self.env.user_id, error=str(exc))
            return view
        if not found.items:
            return view
        qv = np.asarray(q, dtype=np.float64)
        owner_prefix = f"agent_trait:{message.assistant_id}:"
        # Scored from the index rows first; of the k best of their kind (plus as many as
        # the hot view may already hold), only those that reach the answer are decoded
        # and made into entries (see _merge).
        scored: dict[str, list[tuple[float, float, Any]]] = {"fact": [], "agent_trait": []}
        for item in found.items:
            if item.kind == "agent_trait" and not _owned(item, owner_prefix, message.assistant_id):
                continue  # another assistant's trait
            emb = item.embedding
            cos = (
                float(np.clip(emb.astype(np.float64) @ qv, -1.0, 1.0))
                if emb is not None and emb.shape == qv.shape
                else 0.0
            )
            scored[item.kind].append((cos, item.timestamp, item))
        picked: dict[str, tuple[FactHit, ...]] = {}
        for kind, k, hot in (
            ("fact", message.top_k_kb, view.kb),
            ("agent_trait", message.top_k_agent, view.agent_traits),
        ):
            scored[kind].sort(key=lambda c: (-c[0], -c[1]))
            picked[kind] = _merge(hot, scored[kind][: k + len(hot)], k)
        return dataclasses.replace(view, kb=picked["fact"], agent_traits=picked["agent_trait"])

    def _archive_evicted(self, effects: Any, assistant_id: str) -> None:
        """Facts and agent traits pushed out of their FIFOs go to the archive (the cold tier).

        A WAL replay evicts the same entries again; an entry the cold index already holds
        is not archived twice.
        """
        embs = self.core.take_evicted_embeddings()
        store = self.env.store
        if not store.archive_enabled:
            return
        for kind, entries in (
            ("fact", effects.facts_evicted),
            ("agent_trait", effects.agent_traits_evicted),
        ):
            for entry in entries:
                owner = assistant_id if kind == "agent_trait" else ""
                if store.cold.contains(f"{kind}:{owner}:{entry.entry_id}"):
                    continue
                emb = embs.get(entry.entry_id)
                store.archive_append(
                    ArchivedFact.of_entry(
                        kind,  # type: ignore[arg-type]
                        entry,
                        owner,
                        emb_to_f16(emb) if emb is not None else None,
                    )
                )


def _fact_hit(item: Any, cos: float) -> FactHit:
    """The archived fact or agent trait ``item`` as a hit (its record decoded)."""
    rec = {key: v for key, v in item.record.items() if key != "assistant"}
    return FactHit(KBEntry.from_dict(rec), cos, "archive")


def _merge(
    hot: tuple[FactHit, ...], cold: list[tuple[float, float, Any]], k: int
) -> tuple[FactHit, ...]:
    """The ``k`` best of the hot hits and the archived ``(cosine, time, item)``
    candidates: best score first, equal scores newer first, a hot hit before an archived
    one on a full tie, an archived copy of a hot entry left out. An archived item is
    decoded only when it is among the ``k`` (or may be a copy of a hot entry: its id
    ends like one)."""
    seen = {h.entry.entry_id for h in hot}
    pool: list[tuple[float, float, Any]] = [(h.score, h.entry.timestamp, h) for h in hot]
    for cos, ts, item in cold:
        if any(item.item_id.endswith(":" + entry_id) for entry_id in seen):
            hit = _fact_hit(item, cos)
            if hit.entry.entry_id in seen:
                continue
            pool.append((cos, hit.entry.timestamp, hit))
        else:
            pool.append((cos, ts, item))
    pool.sort(key=lambda p: (-p[0], -p[1]))
    return tuple(x if isinstance(x, FactHit) else _fact_hit(x, cos) for cos, _ts, x in pool[:k])


def _owned(item: Any, prefix: str, assistant_id: str) -> bool:
    """Whether the archived agent trait ``item`` is ``assistant_id``'s: its id is
    ``agent_trait:<assistant>:<entry id>``, read without decoding the record unless a
    colon leaves the split in doubt."""
    if not item.item_id.startswith(prefix):
        return False
    if ":" not in item.item_id[len(prefix) :]:
        return True
    return bool(item.owner == assistant_id)
