"""A deleted page takes with it what quotes it (#41 item 5).

The offline backend distils facts and traits from promoted segments as the LLM would: a
fact rewrites a user's sentence, a trait quotes one as its evidence, a segment summary picks
sentences. Once a page is deleted, none of that may bring its text back: not retrieval, the
context rendered for the LLM, a chat reply, the listing, the archive view or an export;
not after a restart, nor after a kill -9. What went with the page is named in the answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from sysutil import SMALL, turn_text
from waiting import wait_until

from memoryos_actors import ManualClock, MemoryConfig, MemoryOS, UnknownMemory
from memoryos_actors.actors.base import actor_names
from memoryos_actors.actors.lpm import LPMActor
from memoryos_actors.actors.mtm import MTMActor
from memoryos_actors.actors.mtm_jobs import MTMJobs
from memoryos_actors.actors.protocol import ApplyEdit, CompletionDone, OwedJobs, split_tag
from memoryos_actors.actors.stm import STMActor
from memoryos_actors.gateway.offline import OfflineBackend

USER = "derived"
#: A word said once, in the page the tests delete.
SECRET = "quillonby"
#: Segments are promoted on insert and their persona asked for at once.
CFG: dict[str, Any] = {**SMALL, "promotion_threshold": 1.5, "persona_debounce_seconds": 0.0}
TURNS = (
    ("I love hiking in the Dolomites with my sister Quillonby.", "The Dolomites are beautiful."),
    ("I love hiking near glacier lakes too.", "Lakes are lovely."),
    ("I work as a luthier repairing old violins.", "What a craft."),
    ("My favourite food is quokkaberry pie.", "Sounds tasty."),
)
_REPO = Path(__file__).resolve().parents[2]


def _write(mem: MemoryOS, more: int) -> None:
    """The four turns (the first quotes the secret), then ``more`` others."""
    for q, r in TURNS:
        mem.add_turn(USER, q, r)
    for i in range(more):
        mem.add_turn(USER, *turn_text(USER, i))


def _fill(mem: MemoryOS, more: int) -> None:
    _write(mem, more)
    mem.flush()


def _hold_secret_persona(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[threading.Event, threading.Event]:
    """The offline LLM holds its persona updates that read the secret until ``release`` is
    set; ``asked`` is set when one arrives. Returns ``(asked, release)``. For tests that
    answer on the gateway's loop (``offline_on_the_loop``): a held answer is a provider's
    call in flight, not a tier's thread held."""
    asked, release = threading.Event(), threading.Event()
    learn = OfflineBackend._persona_update

    def held(self: OfflineBackend, payload: dict[str, Any]) -> dict[str, Any]:
        if SECRET in repr(payload).casefold():
            asked.set()
            assert release.wait(60.0)
        return learn(self, payload)

    monkeypatch.setattr(OfflineBackend, "_persona_update", held)
    return asked, release


def _seen(mem: MemoryOS, tmp_path: Path, *, chat: bool = True) -> str:
    """Every text of the user a reader can reach: retrieval (each item, the rendered
    context the LLM gets), a chat reply (the offline backend quotes the context line that
    best answers; the turn is stored, so not before the deletion), the listing with trait
    evidence, the archive of facts and pages, the history of every memory, and an
    export."""
    query = f"hiking Dolomites sister {SECRET}"
    ctx = mem.retrieve(USER, query)
    parts = [ctx.render(), ctx.dialogue_chain]
    for group in (ctx.stm, ctx.mtm, ctx.segments, ctx.kb, ctx.agent_traits):
        parts.extend(item.text for item in group)
    parts.extend(f"{t.name} {t.level} {t.evidence}" for t in ctx.traits)
    if chat:
        parts.append(mem.chat(USER, "Who is my sister I go hiking with?"))
    listed = list(mem.memories(USER))
    parts.extend(f"{m.memory_id} {m.text} {m.evidence}" for m in listed)
    for m in listed:
        parts.extend(f"{e.old} {e.new} {e.by}" for e in mem.memory_history(USER, m.memory_id))
    for kind in ("page", "fact", "agent_trait"):
        parts.extend(m.text for m in mem.archived_memories(USER, kind, query=query).memories)
    parts.append(repr(mem.archive(USER)))
    out = mem.export_user(USER, tmp_path / f"export-{len(os.listdir(tmp_path))}.json")
    parts.append(out.read_text())
    return "\n".join(parts).casefold()


def _facts(mem: MemoryOS) -> dict[str, str]:
    return {m.memory_id: m.text for m in mem.memories(USER, kinds=["fact"])}


def test_a_deleted_page_takes_the_facts_traits_and_summary_that_quote_it(
    open_mem, tmp_path: Path
) -> None:
    mem = open_mem(MemoryConfig(**CFG))
    _fill(mem, 10)
    page = mem.get_memory(USER, "page:p1")
    assert page.tier == "mtm" and SECRET in page.text.casefold()
    facts = _facts(mem)
    quoting = {mid for mid, text in facts.items() if SECRET in text.casefold()}
    traits = {
        m.memory_id
        for m in mem.memories(USER, kinds=["trait"])
        if SECRET in (m.evidence or "").casefold()
    }
    assert quoting and traits, "the offline backend learned nothing from the page"
    before = _seen(mem, tmp_path, chat=False)
    assert before.count(SECRET) > 10

    event = mem.delete_memory(USER, "page:p1")

    assert event.action == "deleted" and SECRET in (event.old or "").casefold()
    assert set(event.rewrote) == quoting | traits | {f"segment:{page.segment_id}"}
    assert SECRET not in _seen(mem, tmp_path)
    # What other turns taught stays: the fact from the other page of the same segment too.
    kept = {mid: text for mid, text in facts.items() if mid not in quoting}
    assert kept and _facts(mem) == kept
    for mid in quoting:
        with pytest.raises(UnknownMemory):
            mem.get_memory(USER, mid)
        history = mem.memory_history(USER, mid)
        assert [(e.action, e.old, e.new, e.by) for e in history][-1] == (
            "deleted",
            None,
            None,
            "deletion of page:p1",
        )
    mem.close()

    again = open_mem(MemoryConfig(**CFG))  # the edit record carries what went
    assert SECRET not in _seen(again, tmp_path)
    assert _facts(again) == kept


def test_an_archived_page_takes_archived_facts_that_quote_it(open_mem, tmp_path: Path) -> None:
    # Small tiers: the page's segment and the facts learned from it reach the archive.
    cfg = MemoryConfig(**{**CFG, "mtm_capacity": 3, "kb_capacity": 2})
    mem = open_mem(cfg)
    _fill(mem, 60)
    assert mem.get_memory(USER, "page:p1").tier == "archive"
    archived = [
        m for m in mem.archived_memories(USER, "fact", limit=100).memories if m.tier == "archive"
    ]
    quoting = {m.memory_id for m in archived if SECRET in m.text.casefold()}
    assert quoting, "no archived fact quotes the page"
    others = {m.memory_id for m in archived} - quoting
    assert others, "no archived fact from other pages"

    event = mem.delete_memory(USER, "page:p1")

    assert quoting <= set(event.rewrote)
    assert SECRET not in _seen(mem, tmp_path)
    left = {m.memory_id for m in mem.archived_memories(USER, "fact", limit=100).memories}
    assert left == others  # the fact from the other page of the segment stays
    mem.close()
    again = open_mem(cfg)
    assert SECRET not in _seen(again, tmp_path)


def test_a_summary_made_after_a_deletion_is_kept_when_its_segment_is_archived(
    open_mem, tmp_path: Path
) -> None:
    # The deletion clears the summary of the page's segment and a new one is made from
    # the pages left; when the segment is evicted later, the archive keeps that one
    # (it was cleared on every read before), through a restart too.
    cfg = MemoryConfig(**{**CFG, "mtm_capacity": 6, "kb_capacity": 2})
    mem = open_mem(cfg)
    _fill(mem, 10)
    page = mem.get_memory(USER, "page:p1")
    assert page.tier == "mtm"
    seg = page.segment_id
    mem.delete_memory(USER, "page:p1")
    mem.flush()
    remade = mem.get_memory(USER, f"segment:{seg}")
    assert remade.tier == "mtm" and remade.text and SECRET not in remade.text.casefold()
    for i in range(10, 70):
        mem.add_turn(USER, *turn_text(USER, i))
    mem.flush()
    archived = mem.get_memory(USER, f"segment:{seg}")
    assert archived.tier == "archive" and archived.text == remade.text
    assert SECRET not in _seen(mem, tmp_path)
    mem.close()
    again = open_mem(cfg)
    assert again.get_memory(USER, f"segment:{seg}").text == remade.text
    assert SECRET not in _seen(again, tmp_path)


def test_a_deleted_segment_takes_everything_learned_from_it_only(open_mem, tmp_path) -> None:
    mem = open_mem(MemoryConfig(**CFG))
    _fill(mem, 10)
    seg = mem.get_memory(USER, "page:p1").segment_id
    facts = _facts(mem)
    event = mem.delete_memory(USER, f"segment:{seg}")
    gone = {mid for mid, text in facts.items() if "hiking" in text}
    assert len(gone) == 2 and gone <= set(event.rewrote)
    assert _facts(mem) == {mid: t for mid, t in facts.items() if mid not in gone}
    seen = _seen(mem, tmp_path)
    assert SECRET not in seen and "glacier lakes" not in seen


def test_a_page_deleted_before_its_segments_persona_is_asked_is_not_learned(
    open_mem, tmp_path: Path
) -> None:
    # Promoted segments wait persona_debounce_seconds to share one persona call: a page
    # deleted meanwhile must not be in it (nor in one asked before the delete and
    # answered after it).
    mem = open_mem(MemoryConfig(**{**CFG, "persona_debounce_seconds": 3600.0}))
    _write(mem, 10)
    # (Pages move from STM to MTM, where they are promoted, as the writes go on.)
    wait_until(lambda: mem.get_memory(USER, "page:p2").tier == "mtm", "p2 placed in MTM")
    assert _facts(mem) == {}  # promoted, not asked yet
    event = mem.delete_memory(USER, "page:p1")
    assert event.rewrote == (f"segment:{mem.get_memory(USER, 'page:p2').segment_id}",)
    mem.flush()  # asks every persona update owed at once
    facts = _facts(mem)
    assert any("luthier" in text for text in facts.values())  # the others were learned
    assert SECRET not in _seen(mem, tmp_path)


def test_a_persona_update_asked_before_the_delete_and_answered_after_it_is_asked_again(
    open_mem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_on_the_loop: None
) -> None:
    # The offline LLM holds its answers for the page's segment until the page is deleted.
    asked, release = _hold_secret_persona(monkeypatch)
    mem = open_mem(MemoryConfig(**CFG))
    _write(mem, 10)
    assert asked.wait(60.0), "no persona update was asked for the page's segment"
    try:
        mem.delete_memory(USER, "page:p1")
    finally:
        release.set()
    mem.flush()
    assert any("luthier" in text for text in _facts(mem).values())
    assert SECRET not in _seen(mem, tmp_path)


def test_a_flush_waiting_for_a_persona_update_dropped_by_a_delete_waits_for_its_redo(
    open_mem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_on_the_loop: None
) -> None:
    # flush asks for the persona update (the debounce window is an hour) and waits for
    # it; the offline LLM holds that answer until the page it read is deleted, so it is
    # dropped. The flush returns only once the update asked again in its place is
    # applied, not an hour later when the debounce window would have asked it.
    asked, release = _hold_secret_persona(monkeypatch)
    mem = open_mem(MemoryConfig(**{**CFG, "persona_debounce_seconds": 3600.0}))
    _write(mem, 10)
    flushed: list[BaseException | None] = []

    def flush() -> None:
        try:
            mem.flush(timeout=120.0)
            flushed.append(None)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            flushed.append(exc)

    waiter = threading.Thread(target=flush, name="test-flush")
    waiter.start()
    try:
        assert asked.wait(60.0), "flush asked for no persona update of the page's segment"
        assert not flushed  # it waits for the held answer
        mem.delete_memory(USER, "page:p1")
    finally:
        release.set()
        waiter.join(150.0)
    assert flushed == [None]
    assert any("luthier" in text for text in _facts(mem).values())
    assert SECRET not in _seen(mem, tmp_path)


def test_no_job_asked_after_a_delete_is_recorded_reads_the_page_before_mtm_drops_it(
    open_mem, monkeypatch: pytest.MonkeyPatch, offline_on_the_loop: None
) -> None:
    # The deletion is in the edit log before MTM drops the page (its ApplyEdit comes after
    # STM's, held here). An answer dropped meanwhile is asked again without the page, not
    # from the pages MTM still holds (that answer would be dropped too, and so on), and so
    # is any other job asked in that window.
    held_answer, release = threading.Event(), threading.Event()
    stm_got_edit, stm_go = threading.Event(), threading.Event()
    answer = OfflineBackend.answer

    def held(self: OfflineBackend, kind: str, payload: dict[str, Any]) -> Any:
        if kind in ("persona_update", "segment_persona") and SECRET in repr(payload).casefold():
            if not held_answer.is_set():
                held_answer.set()
                assert release.wait(60.0)
        return answer(self, kind, payload)

    stm_receive = STMActor.on_receive

    def slow_edit(self: STMActor, message: object) -> object:
        if isinstance(message, ApplyEdit):
            stm_got_edit.set()
            assert stm_go.wait(60.0)
        return stm_receive(self, message)

    asked: list[tuple[str, bool, bool]] = []  # (kind, p1 deleted at the ask, p1 read)
    ask = MTMJobs.ask

    def watched_ask(
        self: MTMJobs, kind: str, payload: Any, body: str, reads: Iterable[int] = ()
    ) -> str:
        seqs = frozenset(reads)
        asked.append((kind, self.env.store.edits.page_deleted(1), 1 in seqs))
        return ask(self, kind, payload, body, seqs)

    monkeypatch.setattr(OfflineBackend, "answer", held)
    monkeypatch.setattr(STMActor, "on_receive", slow_edit)
    monkeypatch.setattr(MTMJobs, "ask", watched_ask)
    mem = open_mem(MemoryConfig(**CFG))
    _write(mem, 10)
    assert held_answer.wait(60.0), "no persona update read the page"
    deleting = threading.Thread(target=mem.delete_memory, args=(USER, "page:p1"))
    deleting.start()
    try:
        assert stm_got_edit.wait(60.0)  # recorded; MTM has not heard of it
        release.set()  # the held answer reaches MTM: dropped, asked again
        wait_until(
            lambda: any(deleted for _kind, deleted, _read in asked), "a job asked again", 60.0
        )
    finally:
        release.set()
        stm_go.set()
        deleting.join(60.0)
    mem.flush()
    after = [(kind, read) for kind, deleted, read in asked if deleted]
    assert after and not any(read for _kind, read in after), after
    assert any("luthier" in text for text in _facts(mem).values())


def test_lpm_drops_a_persona_update_that_read_a_page_deleted_on_its_way(
    open_mem, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MTM handed it on before it learned of the deletion: LPM, where deletions are
    # decided, drops it, and MTM asks again from the pages left, at once (not after the
    # hour's debounce window); a flush after the drop waits for the new update to reach
    # LPM (its answer may come from the gateway's cache: counted where LPM gets it).
    mem = open_mem(MemoryConfig(**{**CFG, "persona_debounce_seconds": 3600.0}))
    _fill(mem, 10)
    seg = mem.get_memory(USER, "page:p1").segment_id
    mem.delete_memory(USER, "page:p1")
    before = _facts(mem)
    # LPM takes the updates only once the flush has asked MTM what it owes (nothing).
    owed_answered, lpm_go = threading.Event(), threading.Event()
    mtm_receive, lpm_receive = MTMActor.on_receive, LPMActor.on_receive

    def mtm_watched(self: MTMActor, message: object) -> object:
        out = mtm_receive(self, message)
        if isinstance(message, OwedJobs):
            owed_answered.set()
        return out

    reached: list[tuple[str, list[int]]] = []  # (job id, pages read) of MTM's updates

    def lpm_held(self: LPMActor, message: object) -> object:
        if isinstance(message, CompletionDone):
            assert lpm_go.wait(60.0)
            job = split_tag(message.tag)[0]
            if job:  # not one of the two told below
                reached.append((job, list(message.data.get("pages") or ())))
        return lpm_receive(self, message)

    monkeypatch.setattr(MTMActor, "on_receive", mtm_watched)
    monkeypatch.setattr(LPMActor, "on_receive", lpm_held)
    lpm = mem.registry.require(actor_names(USER)[2])
    for pages, fact in (([1, 2], "User's sister is Quillonby."), ([2], "User hikes a lot.")):
        data = {"traits": [], "facts": [fact], "agent_traits": [], "pages": pages}
        lpm.tell(
            CompletionDone("persona_update", f"{seg}|default", data, False, mem.user_epoch(USER))
        )
    waiter = threading.Thread(target=mem.flush, name="test-flush")
    waiter.start()
    try:
        assert owed_answered.wait(60.0)
    finally:
        lpm_go.set()
        waiter.join(120.0)
    assert not waiter.is_alive()
    assert set(_facts(mem).values()) - set(before.values()) == {"User hikes a lot."}
    assert reached and all(1 not in pages for _job, pages in reached)  # without the page


_CHILD = textwrap.dedent("""
    import json, os, signal, sys
    sys.path[:0] = [sys.argv[2]]
    from sysutil import turn_text
    from memoryos_actors import MemoryConfig, MemoryOS
    cfg = MemoryConfig(**json.loads(sys.argv[3]))
    mem = MemoryOS.open(sys.argv[1], cfg)
    for q, r in json.loads(sys.argv[4]):
        mem.add_turn("derived", q, r)
    for i in range(10):
        mem.add_turn("derived", *turn_text("derived", i))
    mem.flush()
    event = mem.delete_memory("derived", "page:p1")
    print(json.dumps(sorted(event.rewrote)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no shutdown snapshot
""")


@pytest.mark.parametrize("snapshot_every", [10_000, 12])
def test_what_a_deletion_took_stays_gone_after_kill_9(tmp_path: Path, snapshot_every: int) -> None:
    cfg = {**CFG, "fsync": "always", "snapshot_every_turns": snapshot_every}
    data = tmp_path / "data"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(data),
            str(Path(__file__).parent),
            json.dumps(cfg),
            json.dumps(TURNS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(_REPO)},
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    rewrote = json.loads(done.stdout.splitlines()[-1])
    assert any(mid.startswith("fact:") for mid in rewrote)
    with MemoryOS.open(data, MemoryConfig(**cfg), clock=ManualClock(1_800_000_000.0)) as mem:
        mem.flush()
        assert SECRET not in _seen(mem, tmp_path)
        facts = _facts(mem)
        assert facts and not set(facts) & set(rewrote)
