"""How an MTM actor takes over from the incarnation before it.

:func:`finish_recovery` is the first thing a started :class:`~memoryos_actors.actors.mtm.MTMActor`
does, before any message it handles: it applies the archive records written after the
snapshot's cut, writes the archive records a full disk refused, places again from the WAL
every page that must have left STM by now (:func:`catch_up`, ``seq <= last_seq -
stm_capacity``, one catch-up at a time in the process through the catch-up gate), drops what
was deleted meanwhile, and takes over the work the snapshot says was owed
(:func:`restore_work`; :func:`work_state` writes that part of the snapshot).

A job whose persona update LPM applied is never asked again: LPM's state lists the job ids
it applied lately (``applied``), and the WAL tail holds the ones it applied after
(:func:`applied_jobs`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from supervisor import SafeEvent

from ..messages import SegmentRecord
from ..store.formats import WalRecord, persona_job
from . import persist
from .protocol import CompletionJob, split_tag

if TYPE_CHECKING:
    from .mtm import MTMActor

__all__ = ["applied_jobs", "catch_up", "finish_recovery", "restore_work", "work_state"]

#: Pages a catch-up embeds in one embedder call.
CATCH_UP_BATCH = 32


def applied_jobs(records: Iterable[tuple[int, WalRecord | Mapping[str, Any]]]) -> set[str]:
    """Ids of the jobs whose persona update is in ``records`` (a WAL tail: typed records,
    or the maps the WAL holds)."""
    return {job for _lsn, rec in records if (job := persona_job(rec))}


def finish_recovery(actor: MTMActor) -> None:
    """Run the rest of ``actor``'s recovery (its snapshot's MTM section is loaded already)."""
    recovered, actor.recovery = actor.recovery, None
    assert recovered is not None
    env = actor.env
    snap_seq = int(recovered.state["seq"]) if recovered.state is not None else 0
    # One pass over the archive records written after the snapshot's cut (all of them
    # without a snapshot). Their evictions are applied again, so no page is both
    # archived and in MTM, and those pages are never inserted again; and their page ids
    # are remembered, so a WAL replay that evicts a page again does not archive it
    # twice (pages archived from now on are new by definition). Records up to the cut
    # need no visit: MTM wrote them before its state was taken, so their pages are
    # older than any page the WAL replays. Activation thus costs the archive's tail,
    # not the user's whole history.
    work = recovered.state["mtm"].get("work") if recovered.state is not None else None
    actor.outbox.replay_tail(actor.core)
    # Records the archive refused before the snapshot (a full disk) come next, before
    # anything the catch-up below evicts.
    actor.outbox.take_owed((work or {}).get("unarchived", ()))
    last = persist.last_turn_seq(recovered.replay, snap_seq)
    upto = last - env.config.stm_capacity
    gate = env.catch_up_gate
    if upto > actor.core.max_seq and gate is not None:
        # Pages to place: one catch-up at a time in the process (see CatchUpGate).
        ticket = actor.gate_ticket = SafeEvent()
        try:
            if not gate.enter(ticket, lambda: actor.stop_requested):
                actor.complete = False
                return  # stopped while waiting: the files still hold everything
            actor.catch_up(upto, recovered.replay)
        finally:
            gate.release(ticket)
            actor.gate_ticket = None
    else:
        actor.catch_up(upto, recovered.replay)
    edits = env.store.edits
    # Summaries in the snapshot were asked for after the deletions its MTM had seen: only
    # the segments of later deletions may quote a deleted page (a state without the count,
    # or no state: every deletion's).
    seen = int((work or {}).get("deletions_seen", 0))
    actor.drop_deleted(
        edits.deleted_pages, edits.deleted, sorted(edits.segments_scrubbed_after(seen))
    )
    actor.deletions_seen = edits.deletions
    if not actor.complete:
        return  # the catch-up stopped early; the files still hold everything
    if work:
        lpm_state = recovered.state["lpm"] if recovered.state is not None else {}
        restore_work(
            actor, work, recovered.replay, {str(j) for j in lpm_state.get("applied_jobs", ())}
        )
    env.mtm_recovered.set()


def catch_up(
    actor: MTMActor, upto_seq: int, records: Iterable[tuple[int, WalRecord]] | None = None
) -> bool:
    """Insert from the WAL every page with ``max_seq < seq <= upto_seq``; False (and
    ``actor.complete`` cleared) when a stop request cut it short.

    Each page is inserted at the time of the turn ``stm_capacity`` later (the one that
    pushed it out of STM), as it was live, and with its meta data if the WAL has it.
    """
    if not actor.complete:
        return False
    if upto_seq <= actor.core.max_seq:
        return True
    env = actor.env
    cap = env.config.stm_capacity
    held = actor.held_pages
    pages = persist.wal_pages(
        env.store, actor.core.max_seq, upto_seq, cap, records=records, held=held
    )
    deleted = env.store.edits.deleted_pages
    todo = [
        (page, when)
        for page, when in pages
        if page.seq not in actor.outbox.archived and page.seq not in deleted
    ]
    # Embedded a batch at a time (one embedder call, not one a page).
    for start in range(0, len(todo), CATCH_UP_BATCH):
        if actor.stop_requested:
            # This incarnation is being stopped (a passivation that skipped the
            # snapshot): what is not placed yet stays in the WAL for the next one.
            actor.complete = False
            return False
        batch = todo[start : start + CATCH_UP_BATCH]
        embs = actor.embed_pages([page for page, _ in batch])
        for (page, when), emb in zip(batch, embs, strict=True):
            if actor.stop_requested:
                actor.complete = False
                return False
            actor.place(page, when, emb)
    if held:
        # Placed now: only the snapshot's pages still ahead can be asked for again.
        actor.held_pages = {seq: page for seq, page in held.items() if seq > upto_seq}
    return True


def work_state(actor: MTMActor) -> dict[str, Any]:
    """What ``actor`` owes, for the snapshot: summaries, promoted segments waiting for
    their persona update, jobs not answered yet (the held-back ones included), and the
    archive records a full disk refused."""
    return {
        "unsummarised": dict(actor.unsummarised),
        "persona_queue": [segment.to_dict() for segment in actor.persona_queue],
        "jobs": actor.jobs.state(),
        "unarchived": actor.outbox.owed_state(),
        "deletions_seen": actor.deletions_seen,
    }


def restore_work(
    actor: MTMActor,
    work: dict[str, Any],
    records: Iterable[tuple[int, WalRecord]],
    applied: AbstractSet[str] = frozenset(),
) -> None:
    """Take over the work a previous incarnation owed (:func:`work_state`); ``records``:
    the WAL tail; ``applied``: jobs whose update the snapshot's LPM state has applied."""
    env = actor.env
    every = env.config.summary_every_pages
    core = actor.core
    unsummarised = actor.unsummarised
    for seg_id, n in dict(work.get("unsummarised", {})).items():
        if core.segment_pages(str(seg_id)):
            unsummarised[str(seg_id)] = max(unsummarised.get(str(seg_id), 0), int(n))
    restored, actor.persona_queue = actor.persona_queue, []
    actor.persona_queue = [SegmentRecord.from_dict(d) for d in work.get("persona_queue", ())]
    edits = env.store.edits
    # Pages deleted since (or before) the snapshot are left out of the queued segments.
    actor.unread(set(edits.deleted_pages), edits.deleted_segments())
    actor.persona_queue += restored
    # A persona job that read a segment a page was deleted from may quote that page: it is
    # asked again from the pages the segment holds now, not taken over as it was.
    touched = edits.segments_scrubbed_after(0) | edits.deleted_segments()
    done = applied_jobs(records) | set(applied)
    for item in work.get("jobs", ()):
        job_id, kind, tag = str(item["id"]), str(item["kind"]), str(item["tag"])
        if kind == "segment_summary":
            seg_id = split_tag(tag)[1]
            if core.segment_pages(seg_id):
                unsummarised[seg_id] = max(unsummarised.get(seg_id, 0), every)
            continue
        if job_id in done or job_id in actor.jobs.owed:
            continue  # its persona update reached LPM's WAL before the stop
        body = split_tag(tag)[1]
        if touched & set(body.split("+")):
            actor.requeue_persona(body)
            if kind == "segment_persona" and core.segment_pages(body):
                unsummarised[body] = max(unsummarised.get(body, 0), every)
            continue
        env.metrics.inc("mtm_jobs_taken_over")
        actor.jobs.submit(
            CompletionJob(
                kind=kind,
                payload=item["payload"],
                user_id=env.user_id,
                reply_to=env.mtm_name,
                tag=tag,
                epoch=env.epoch,
            ),
            job_id,
        )
    for seg_id, n in unsummarised.items():
        if n >= every:
            actor.schedule_summary(seg_id)
    actor.arm_persona_ask(0.0)
