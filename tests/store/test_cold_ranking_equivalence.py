"""Hybrid retrieval over a real cold index ranks exactly as over plainly split candidates.

The cold index hands MTM its candidates with their terms as the stored string
(:class:`~memoryos_actors.lexicon.TermString`), counted without splitting, or as
narrow scoring rows (:class:`~memoryos_actors.cold_items.ColdRow`: terms as vocabulary ids,
no text, the returned pages read in full afterwards); the straightforward reference gives
the same candidates with their terms split into a tuple.
On a hand-made history whose pages mostly left the hot tiers, every question (first person
or not, naming a day or not, about a fact that changed) gets the same pages, in the same
order, with the same scores to the last bit and the same ``why``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.clock import ManualClock
from memoryos_actors.cold_items import ColdCandidates, ColdItem, ColdRow
from memoryos_actors.gateway.embedders import make_embedder
from memoryos_actors.lexicon import TermString, stem
from memoryos_actors.store.userstore import UserStore
from memoryos_actors.text import keywords
from memoryos_actors.tiers.hybrid import LEXICAL_CANDIDATES
from memoryos_actors.tiers.mtm import MTMCore

USER = "ada"
DAY = 86_400.0
T0 = 1_685_000_000.0  # 2023-05-25
CONFIG = MemoryConfig(
    stm_capacity=3, mtm_capacity=3, segment_max_pages=4, fsync="never", log_level="error"
)

TOPICS = [
    ("My sister Clara lives in Porto and works as a nurse there.", "Porto is lovely."),
    ("I adopted a beagle called Rufus; Rufus Rufus barks at every bike.", "Classic beagle."),
    ("We went hiking near Sintra, the hikes were long and the hiking boots hurt.", "Ouch."),
    ("I'm learning O'Neil's recipe for sourdough bread, bread every weekend.", "Yum."),
    ("The quarterly budget review at work is on Thursday with Malik.", "Good luck."),
    ("I moved, now I live in Lisbon near the river, no longer in Porto.", "Big change!"),
    ("Rufus ate my left running shoe, the shoe was new new new.", "Oh no."),
    ("My favourite band played in Köln last spring; the concert was loud.", "Fun!"),
]

QUESTIONS = [
    "Where do I live now?",
    "What is my dog called?",
    "Who is Clara and where does she work?",
    "what happened with the shoe",
    "When is the budget review with Malik?",
    "What did I do on May 27?",
    "bread recipe O'Neil",
    "Tell me about the concert in Köln.",
    "Did Rufus chew my new shoe?",  # terms repeated side by side in the pages
]


def _plain(item: ColdItem) -> ColdItem:
    """The straightforward candidate: its terms split into a tuple."""
    return dataclasses.replace(item, terms=tuple(item.terms))


def _history(root: Path) -> None:
    with MemoryOS.open(root, CONFIG) as mem:
        for i in range(48):
            query, response = TOPICS[i % len(TOPICS)]
            mem.add_turn(USER, f"{query} (note {i})", response, timestamp=T0 + i * DAY / 4)
        mem.flush()


def _searches(root: Path, plain: bool, light: bool = False) -> list[list[tuple[Any, ...]]]:
    """Every question's hits from a core restored from the stored state, with the cold
    index's candidates as it returns them, split into tuples (``plain``) or as narrow rows
    (``light``, as the MTM actor asks for them)."""
    embedder = make_embedder(CONFIG)
    store = UserStore(root, USER, CONFIG)
    try:
        state = store.load().state
        assert state is not None
        core = MTMCore.from_state(state["mtm"], CONFIG, None, ManualClock(T0))
        cold = store.cold

        def pages(seqs: Iterable[int]) -> Mapping[int, ColdItem]:
            found = cold.pages_by_seq(seqs)
            return {s: _plain(i) for s, i in found.items()} if plain else found

        def window(start: float, end: float, limit: int) -> tuple[int, Mapping[int, ColdItem]]:
            n, found = cold.pages_between(start, end, limit, light=light)
            return n, ({s: _plain(i) for s, i in found.items()} if plain else found)

        out = []
        for question, emb in zip(QUESTIONS, embedder.embed(QUESTIONS), strict=True):
            kw = keywords(question)
            found = cold.search([stem(k) for k in kw], LEXICAL_CANDIDATES, light=light)
            if light:
                assert all(isinstance(i, ColdRow) for i in found.items)
            elif plain:
                found = ColdCandidates(
                    tuple(_plain(i) for i in found.items), found.n_docs, found.total_len, found.df
                )
            else:
                assert all(isinstance(i.terms, TermString) for i in found.items)
            hits = core.search(
                emb,
                kw,
                now=T0 + 14 * DAY,
                cold=found,
                cold_pages=pages,
                query_text=question,
                cold_window=window,
                cold_rows=functools.partial(cold.pages_by_seq, light=True) if light else None,
            )
            out.append([(h.page.page_id, h.tier, h.segment_id, h.score, h.why) for h in hits.pages])
        return out
    finally:
        store.close()


def test_retrieval_ranks_archived_pages_as_plainly_split_candidates(tmp_path: Path) -> None:
    _history(tmp_path)
    fast = _searches(tmp_path, plain=False)
    plain = _searches(tmp_path, plain=True)
    # The history reached the archive, and the questions found archived pages.
    assert any(tier == "archive" for hits in fast for _, tier, *_ in hits)
    assert fast == plain


def test_retrieval_over_narrow_rows_ranks_as_over_full_candidates(tmp_path: Path) -> None:
    _history(tmp_path)
    light = _searches(tmp_path, plain=False, light=True)
    plain = _searches(tmp_path, plain=True)
    assert any(tier == "archive" for hits in light for _, tier, *_ in hits)
    assert light == plain
