from __future__ import annotations

import gc
import math
from collections import Counter

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import basis_vector, random_unit

from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import ConfigError, EmbedderMismatch, InvalidInput
from memoryos_actors.messages import Page
from memoryos_actors.scoring import f_score
from memoryos_actors.tiers.hybrid import MIN_CANDIDATES
from memoryos_actors.tiers.mtm import MTMCore
from memoryos_actors.tiers.stm import STMCore

DIM = 8


def _page(seq: int, kw=(), t: float | None = None) -> Page:
    return Page.create("u", seq, f"q{seq}", f"r{seq}", float(seq) if t is None else t, keywords=kw)


def _core(clock: ManualClock | None = None, dim: int = DIM, **cfg) -> MTMCore:
    return MTMCore(MemoryConfig(**cfg), dim, clock or ManualClock(1000.0))


def e(i: int, dim: int = DIM) -> np.ndarray:
    return basis_vector(dim, i)


# ----------------------------------------------------------------- segmenting


def test_page_with_f_score_exactly_theta_opens_a_new_segment() -> None:
    # Orthogonal embeddings (cos = 0) and Jaccard({a,b},{a,b,c,d}) = 0.5 = θ.
    mtm = _core(fscore_threshold=0.5)
    first = mtm.insert(_page(1, {"a", "b"}), e(0))
    second = mtm.insert(_page(2, {"a", "b", "c", "d"}), e(1))
    assert first.created and second.created and first.segment_id != second.segment_id
    assert len(mtm) == 2


def test_page_with_f_score_just_above_theta_joins_the_segment() -> None:
    # Jaccard({a,b},{a,b,c}) = 2/3 > 0.5 = θ.
    mtm = _core(fscore_threshold=0.5)
    first = mtm.insert(_page(1, {"a", "b"}), e(0))
    second = mtm.insert(_page(2, {"a", "b", "c"}), e(1))
    assert not second.created and second.segment_id == first.segment_id
    assert mtm.segments()[0].page_ids == ("p1", "p2")


def test_identical_embedding_at_theta_one_does_not_join() -> None:
    mtm = _core(fscore_threshold=1.0)
    mtm.insert(_page(1), e(0))
    assert mtm.insert(_page(2), e(0)).created  # F = 1.0 + 0.0, not > 1.0


def test_page_joins_the_segment_with_the_highest_f_score() -> None:
    mtm = _core(fscore_threshold=0.5)
    mtm.insert(_page(1), e(0))
    mtm.insert(_page(2), e(1))
    v = np.array([0.6, 0.8, 0, 0, 0, 0, 0, 0], dtype=np.float32)  # cos 0.6 with s1, 0.8 with s2
    assert mtm.insert(_page(3), v).segment_id == "s2"


def test_segment_embedding_and_keywords_follow_the_pages_that_join() -> None:
    mtm = _core(fscore_threshold=0.5)
    mtm.insert(_page(1, {"rome", "trip"}), e(0))
    mtm.insert(_page(2, {"rome", "trip", "food"}), e(1))
    seg = mtm.segments()[0]
    assert seg.keywords == frozenset({"rome", "trip", "food"})
    # e_s is the normalised mean of e0 and e1: a page along it has cos 1 with the segment.
    record = mtm.segment("s1")
    assert record is not None and len(record.pages) == 2
    assert mtm.segment_pages("s1") == record.pages and mtm.segment_pages("s9") == ()
    diag = (e(0) + e(1)) / math.sqrt(2)
    assert mtm.search(diag, (), top_m=1, top_k=0, mode="paper").segments[0].score == pytest.approx(
        1.0, abs=1e-6
    )


def test_interaction_length_counts_pages_and_last_access_moves_on_insert() -> None:
    clock = ManualClock(1000.0)
    mtm = _core(clock, fscore_threshold=0.5)
    mtm.insert(_page(1, {"a"}), e(0))
    clock.advance(50)
    mtm.insert(_page(2, {"a"}), e(0))
    seg = mtm.segments()[0]
    assert seg.l_interaction == 2 and seg.last_access == 1050.0 and seg.created == 1000.0
    assert seg.n_visit == 0


def test_full_segment_pushes_its_oldest_pages_out() -> None:
    mtm = _core(fscore_threshold=0.5, segment_max_pages=3)
    pushed = []
    for i in range(1, 6):
        pushed.extend(mtm.insert(_page(i, {"a"}), e(0)).evicted_pages)
    assert [p.page_id for p in pushed] == ["p1", "p2"]
    assert mtm.segments()[0].page_ids == ("p3", "p4", "p5")
    assert mtm.page_ids() == ("p3", "p4", "p5")


def test_reinserting_a_page_is_ignored() -> None:
    mtm = _core()
    mtm.insert(_page(1), e(0))
    mtm.insert(_page(2), e(1))
    before = mtm.to_state()
    again = mtm.insert(_page(1), e(5))
    assert again.duplicate and again.segment_id == "s1" and not again.created
    assert mtm.to_state() == before and mtm.max_seq == 2


def test_insert_rejects_bad_embeddings_and_other_users() -> None:
    mtm = _core()
    with pytest.raises(InvalidInput, match="8"):
        mtm.insert(_page(1), np.ones(3))
    with pytest.raises(InvalidInput, match="finite"):
        mtm.insert(_page(1), np.full(DIM, np.nan))
    mtm.insert(_page(1), e(0))
    other = Page.create("v", 2, "q", "r", 2.0)
    with pytest.raises(InvalidInput, match="user"):
        mtm.insert(other, e(0))


def test_set_summary_keeps_placement_keywords_and_reports_missing_segments() -> None:
    mtm = _core()
    mtm.insert(_page(1, {"a"}), e(0))
    assert mtm.set_summary("s1", "About A", ["Alpha"]) is True
    seg = mtm.segments()[0]
    # K_s stays the page keywords: a summary arriving late must not change placement.
    assert seg.summary == "About A" and seg.keywords == frozenset({"a"})
    assert mtm.set_summary("s99", "x", []) is False


# ----------------------------------------------------------------- heat, promotion, eviction


def test_heat_after_tick_matches_the_formula() -> None:
    clock = ManualClock(1000.0)
    mtm = _core(
        clock,
        fscore_threshold=0.5,
        heat_alpha=2.0,
        heat_beta=0.5,
        heat_gamma=3.0,
        recency_mu=100.0,
        promotion_threshold=100.0,
    )
    mtm.insert(_page(1, {"a"}), e(0))
    mtm.insert(_page(2, {"a"}), e(0))
    clock.advance(30)
    mtm.search(e(0), {"a"}, top_m=1, top_k=1, mode="paper")  # N_visit = 1, last access 1030
    mtm.tick(now=1230.0)
    seg = mtm.segments()[0]
    assert seg.heat == pytest.approx(2.0 * 1 + 0.5 * 2 + 3.0 * math.exp(-200.0 / 100.0))


def test_promotion_fires_above_tau_and_resets_interaction_length() -> None:
    # Fresh segment with L pages: heat = L + 1 (N_visit 0, recency 1).
    mtm = _core(fscore_threshold=0.5, promotion_threshold=2.5)
    assert mtm.insert(_page(1, {"a"}), e(0)).promoted == ()  # heat 2
    effects = mtm.insert(_page(2, {"a"}), e(0))  # heat 3 > 2.5
    assert [r.segment_id for r in effects.promoted] == ["s1"]
    record = effects.promoted[0]
    assert record.l_interaction == 0 and [p.page_id for p in record.pages] == ["p1", "p2"]
    assert mtm.segments()[0].l_interaction == 0
    assert mtm.segments()[0].heat == pytest.approx(1.0)


def test_heat_equal_to_tau_does_not_promote() -> None:
    mtm = _core(fscore_threshold=0.5, promotion_threshold=3.0)
    mtm.insert(_page(1, {"a"}), e(0))
    assert mtm.insert(_page(2, {"a"}), e(0)).promoted == ()  # heat exactly 3.0


def test_a_promoted_segment_is_not_promoted_again_without_new_pages() -> None:
    clock = ManualClock(0.0)
    mtm = _core(clock, fscore_threshold=0.5, promotion_threshold=2.5)
    mtm.insert(_page(1, {"a"}), e(0))
    assert mtm.insert(_page(2, {"a"}), e(0)).promoted
    for _ in range(5):  # N_visit 5: heat 6 > τ, but nothing new to learn
        mtm.search(e(0), {"a"}, mode="paper")
    assert mtm.tick().promoted == ()
    assert mtm.insert(_page(3, {"a"}), e(0)).promoted  # a new page: promoted again


def test_over_capacity_the_lowest_heat_segment_is_evicted_with_its_pages() -> None:
    clock = ManualClock(0.0)
    mtm = _core(clock, mtm_capacity=2, recency_mu=10.0, promotion_threshold=100.0)
    mtm.insert(_page(1), e(0))  # s1
    mtm.insert(_page(2), e(1))  # s2
    mtm.search(e(0), (), top_m=1, top_k=1, mode="paper")  # s1 visited: hotter
    clock.advance(100.0)
    effects = mtm.insert(_page(3), e(2))  # s3 new: heat 2; s2 coldest (~1.0)
    assert [r.segment_id for r in effects.evicted_segments] == ["s2"]
    assert [p.page_id for p in effects.evicted_segments[0].pages] == ["p2"]
    assert [s.segment_id for s in mtm.segments()] == ["s1", "s3"]
    assert mtm.page_ids() == ("p1", "p3")
    # The evicted page is gone from the page index too.
    hits = mtm.search(e(1), (), top_m=5, top_k=5, mode="hybrid")
    assert "p2" not in [h.page.page_id for h in hits.pages]


def test_lowering_capacity_evicts_on_tick() -> None:
    clock = ManualClock(0.0)
    mtm = _core(clock)
    for i in range(1, 4):
        mtm.insert(_page(i), e(i))
    small = MTMCore.from_state(mtm.to_state(), MemoryConfig(mtm_capacity=1), DIM, clock)
    evicted = small.tick().evicted_segments
    assert [r.segment_id for r in evicted] == ["s1", "s2"] and len(small) == 1


# ----------------------------------------------------------------- retrieval


def test_paper_search_takes_top_m_segments_then_top_k_pages_by_cosine() -> None:
    clock = ManualClock(0.0)
    mtm = _core(clock, fscore_threshold=0.5)
    mtm.insert(_page(1, {"x"}), e(0))
    mtm.insert(_page(2, {"x"}), np.array([0.8, 0.6, 0, 0, 0, 0, 0, 0]))
    mtm.insert(_page(3, {"y"}), e(3))
    clock.advance(5)
    hits = mtm.search(e(0), {"x"}, top_m=1, top_k=1, mode="paper")
    assert hits.mode == "paper"
    assert [h.segment.segment_id for h in hits.segments] == ["s1"]
    assert [h.page.page_id for h in hits.pages] == ["p1"]
    assert hits.pages[0].score == pytest.approx(1.0)
    assert hits.pages[0].why == "segment s1 F=1.95; page cos=1.00"
    seg = hits.segments[0].segment
    assert seg.n_visit == 1 and seg.last_access == 5.0
    assert mtm.segments()[1].n_visit == 0  # s3 was not chosen


def test_paper_search_segment_scores_are_exact_f_scores() -> None:
    rng = np.random.default_rng(3)
    mtm = _core(dim=16, fscore_threshold=1.9)
    for i in range(1, 7):
        mtm.insert(_page(i, {f"k{i % 3}"}), random_unit(rng, 16))
    q = random_unit(rng, 16)
    hits = mtm.search(q, {"k1"}, top_m=3, top_k=0, mode="paper")
    views = {s.segment_id: s for s in mtm.segments()}
    # Rescore by hand from the stored pages' embeddings (one page per segment here).
    expected = []
    for sid, _ in views.items():
        rec = mtm.segment(sid)
        assert rec is not None
        emb = mtm._pages.vectors.vector(rec.pages[0].seq)
        expected.append((f_score(emb, q, rec.keywords, frozenset({"k1"})), sid))
    expected.sort(key=lambda x: -x[0])
    assert [h.segment.segment_id for h in hits.segments] == [sid for _, sid in expected[:3]]
    for h, (f, _) in zip(hits.segments, expected, strict=False):
        assert h.score == pytest.approx(f, abs=1e-5)


def _drifted_topic_memory() -> MTMCore:
    # s1 = pages e0 and e1 (joined by a shared keyword); its mean points at the query.
    # s2 = one page with cosine 0.8 to the query, the best single page.
    mtm = _core(dim=3, fscore_threshold=0.9)
    mtm.insert(_page(1, {"a"}), basis_vector(3, 0))
    mtm.insert(_page(2, {"a"}), basis_vector(3, 1))
    q = (basis_vector(3, 0) + basis_vector(3, 1)) / math.sqrt(2)
    p = 0.8 * q + 0.6 * basis_vector(3, 2)
    assert mtm.insert(_page(3, {"b"}), p).created
    return mtm


def test_hybrid_search_finds_the_best_page_outside_the_top_segments() -> None:
    q = (basis_vector(3, 0) + basis_vector(3, 1)) / math.sqrt(2)
    paper = _drifted_topic_memory().search(q, (), top_m=1, top_k=1, mode="paper")
    assert paper.pages[0].page.page_id in ("p1", "p2")
    hybrid = _drifted_topic_memory().search(q, (), top_m=1, top_k=1, mode="hybrid")
    hit = hybrid.pages[0]
    assert hit.page.page_id == "p3" and hit.segment_id == "s2"
    # No query keywords, so no BM25 or keyword part: base = 0.3 * cos + 0.05 * F(segment),
    # here 0.3 * 0.8 + 0.05 * 0.8, plus 0.7 * the best base score of a neighbouring turn.
    assert hit.why.startswith("hybrid via dense: 0.6*bm25=0.00 + 0.3*cos=0.80")
    near = float(hit.why.rsplit("neighbour=", 1)[1])
    assert hit.score == pytest.approx(0.3 * 0.8 + 0.05 * 0.8 + 0.7 * near, abs=6e-3)
    # Only the segment that supplied a returned page counts as visited.
    assert [s.segment.segment_id for s in hybrid.segments] == ["s2"]


def test_hybrid_search_rewards_keyword_overlap_with_the_page() -> None:
    mtm = _core(fscore_threshold=1.9)
    mtm.insert(_page(1, {"rome"}), np.array([0.7, 0.71, 0, 0, 0, 0, 0, 0]))
    mtm.insert(_page(2, {"paris"}), np.array([0.72, 0.69, 0, 0, 0, 0, 0, 0]))
    hits = mtm.search(e(0), {"rome"}, top_m=2, top_k=2, mode="hybrid")
    assert [h.page.page_id for h in hits.pages] == ["p1", "p2"]
    assert "via dense+segment" in hits.pages[0].why and "kw=1.00" in hits.pages[0].why


def test_search_defaults_come_from_config_and_empty_memory_finds_nothing() -> None:
    mtm = _core(retrieval_mode="paper", top_k_pages=2)
    assert mtm.search(e(0)).pages == ()
    for i in range(1, 5):
        mtm.insert(_page(i, {"a"}), e(0))
    hits = mtm.search(e(0), {"a"})
    assert hits.mode == "paper" and len(hits.pages) == 2
    assert [h.page.page_id for h in hits.pages] == ["p4", "p3"]  # equal cosine: newer first
    with pytest.raises(InvalidInput, match="mode"):
        mtm.search(e(0), mode="fuzzy")
    with pytest.raises(InvalidInput, match="top_k"):
        mtm.search(e(0), top_k=-1)


def test_search_over_many_segments_matches_brute_force_f_score() -> None:
    # More segments than MIN_CANDIDATES, so candidates come from hnswlib.
    rng = np.random.default_rng(11)
    dim = 32
    mtm = _core(dim=dim, fscore_threshold=1.99, mtm_capacity=500, promotion_threshold=1e9)
    embs = {}
    for i in range(1, 3 * MIN_CANDIDATES + 1):
        v = random_unit(rng, dim)
        embs[f"s{i}"] = v
        mtm.insert(_page(i), v)
    assert len(mtm) == 3 * MIN_CANDIDATES
    for _ in range(10):
        q = random_unit(rng, dim)
        best = max(embs, key=lambda s: float(np.dot(embs[s], q)))
        hits = mtm.search(q, (), top_m=1, top_k=1, mode="paper")
        assert hits.segments[0].segment.segment_id == best


# ----------------------------------------------------------------- state and determinism


def _workload(mtm: MTMCore, clock: ManualClock, seed: int, n: int = 120) -> None:
    rng = np.random.default_rng(seed)
    topics = [random_unit(rng, DIM) for _ in range(6)]
    for i in range(1, n + 1):
        t = int(rng.integers(6))
        v = topics[t] + 0.3 * rng.normal(size=DIM)
        clock.advance(float(rng.integers(1, 100)))
        mtm.insert(_page(i, {f"t{t}", f"w{i % 7}"}), v)
        if i % 10 == 0:
            mtm.search(topics[int(rng.integers(6))], {f"t{t}"})
        if i % 25 == 0:
            mtm.tick()


def test_same_inputs_clock_and_seed_give_identical_segments() -> None:
    cfg = dict(mtm_capacity=5, segment_max_pages=6, recency_mu=500.0, seed=7)
    states = []
    for _ in range(2):
        clock = ManualClock(0.0)
        mtm = _core(clock, **cfg)
        _workload(mtm, clock, seed=3)
        states.append((mtm.segments(), mtm.to_state()))
    assert states[0] == states[1]


def test_state_round_trips_through_msgpack_with_the_same_segments_and_results() -> None:
    clock = ManualClock(0.0)
    cfg = MemoryConfig(mtm_capacity=5, segment_max_pages=6, recency_mu=500.0)
    mtm = MTMCore(cfg, DIM, clock)
    _workload(mtm, clock, seed=5)
    state = msgpack.unpackb(msgpack.packb(mtm.to_state(), use_bin_type=True), raw=False)
    back = MTMCore.from_state(state, cfg, None, clock)
    assert back.segments() == mtm.segments() and back.max_seq == mtm.max_seq
    assert back.page_ids() == mtm.page_ids()
    q = random_unit(np.random.default_rng(0), DIM)
    assert back.search(q, {"t1"}, now=1e6) == mtm.search(q, {"t1"}, now=1e6)
    assert back.insert(_page(mtm.max_seq + 1), q) == mtm.insert(_page(mtm.max_seq + 1), q)


def test_restoring_with_another_dimension_is_an_embedder_mismatch() -> None:
    mtm = _core()
    mtm.insert(_page(1), e(0))
    with pytest.raises(EmbedderMismatch):
        MTMCore.from_state(mtm.to_state(), MemoryConfig(), DIM * 2, ManualClock())


# ----------------------------------------------------------------- no page lost


def _drain(stm: STMCore, mtm: MTMCore, pages, embs, archived: list[Page]) -> None:
    for page in pages:
        out = stm.push(page)
        if out is not None:
            eff = mtm.insert(out, embs[out.seq])
            archived.extend(eff.evicted_pages)
            for rec in eff.evicted_segments:
                archived.extend(rec.pages)


def _assert_every_page_once(stm, mtm, archived, n) -> None:
    seen = Counter(
        [p.seq for p in archived]
        + [p.seq for p in stm.pages()]
        + [int(pid[1:]) for pid in mtm.page_ids()]
    )
    assert sorted(seen) == list(range(1, n + 1))
    assert all(count == 1 for count in seen.values())


def test_a_thousand_pages_through_stm_and_mtm_are_neither_lost_nor_duplicated() -> None:
    rng = np.random.default_rng(1)
    dim = 16
    topics = [random_unit(rng, dim) for _ in range(40)]
    clock = ManualClock(0.0)
    mtm = MTMCore(MemoryConfig(mtm_capacity=20, segment_max_pages=8, recency_mu=3600.0), dim, clock)
    stm = STMCore(7)
    pages, embs = [], {}
    for i in range(1, 1001):
        t = int(rng.integers(len(topics)))
        pages.append(_page(i, {f"t{t}"}, t=float(i)))
        embs[i] = topics[t] + 0.2 * rng.normal(size=dim)
    archived: list[Page] = []
    for chunk in range(0, 1000, 100):
        _drain(stm, mtm, pages[chunk : chunk + 100], embs, archived)
        clock.advance(60.0)
        for rec in mtm.tick().evicted_segments:
            archived.extend(rec.pages)
    assert len(mtm) <= 20
    assert all(len(s.page_ids) <= 8 for s in mtm.segments())
    _assert_every_page_once(stm, mtm, archived, 1000)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 5),
    st.integers(1, 4),
    st.floats(0.0, 1.5),
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["insert", "search", "tick"])),
        min_size=1,
        max_size=60,
    ),
)
def test_random_operations_keep_capacities_and_every_page(cap, max_pages, theta, ops) -> None:
    clock = ManualClock(0.0)
    mtm = MTMCore(
        MemoryConfig(
            mtm_capacity=cap,
            segment_max_pages=max_pages,
            fscore_threshold=theta,
            promotion_threshold=3.0,
        ),
        4,
        clock,
    )
    archived: list[Page] = []
    seq = 0
    for topic, op in ops:
        clock.advance(10.0)
        if op == "insert":
            seq += 1
            eff = mtm.insert(_page(seq, {f"t{topic}"}), basis_vector(4, topic) + 0.1)
            archived.extend(eff.evicted_pages)
        elif op == "search":
            mtm.search(basis_vector(4, topic), {f"t{topic}"}, top_m=2, top_k=3)
            continue
        else:
            eff = mtm.tick()
        for rec in eff.evicted_segments:
            archived.extend(rec.pages)
        for rec in eff.promoted:
            assert rec.l_interaction == 0
        assert len(mtm) <= cap
        assert all(len(s.page_ids) <= max_pages for s in mtm.segments())
    _assert_every_page_once(STMCore(1), mtm, archived, seq)


def test_restored_core_loads_saved_graphs_and_searches_like_the_live_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memoryos_actors.tiers import _ann

    monkeypatch.setattr(_ann, "_BUILD_AT", 64)  # graphs past 64 vectors, reached cheaply
    rng = np.random.default_rng(5)
    dim = 16
    cfg = MemoryConfig(fscore_threshold=1.99)  # every page opens its own segment
    live = MTMCore(cfg, dim, ManualClock(0.0))
    for i in range(1, 151):  # more than the graph threshold, fewer than mtm_capacity
        v = rng.normal(size=dim)
        live.insert(
            Page.create("u", i, f"q{i}", f"r{i}", float(i)), v / np.linalg.norm(v), now=float(i)
        )
    state = live.to_state()
    assert state["page_graph"] and state["segment_graph"]
    restored = MTMCore.from_state(state, cfg, dim, ManualClock(0.0))
    for _ in range(10):
        q = rng.normal(size=dim)
        q /= np.linalg.norm(q)
        a = live.search(q, (), top_m=5, top_k=10, now=500.0, mode="paper")
        b = restored.search(q, (), top_m=5, top_k=10, now=500.0, mode="paper")
        assert [h.page.page_id for h in a.pages] == [h.page.page_id for h in b.pages]


# ----------------------------------------------------------------- cold tier


def _cold_item(seq: int, text: str, emb: np.ndarray | None, sid: str = "s9"):
    from memoryos_actors.cold_items import ColdItem
    from memoryos_actors.lexicon import terms

    page = Page.create("u", seq, text, "ok", 500.0 + seq)
    return ColdItem(
        f"p{seq}",
        "page",
        seq,
        sid,
        page.timestamp,
        7,
        text,
        frozenset(),
        tuple(terms(f"{text} ok")),
        emb,
        page.to_dict(),
    )


def _cold(items, hot_docs: int = 0):
    from memoryos_actors.cold_items import ColdCandidates

    df: Counter[str] = Counter()
    for it in items:
        df.update(set(it.terms))
    return ColdCandidates(
        tuple(items), len(items), sum(len(i.terms) for i in items), tuple(df.items())
    )


def test_archived_candidates_are_ranked_with_hot_pages_and_marked_archive() -> None:
    mtm = _core()
    for seq in range(20, 25):
        mtm.insert(Page.create("u", seq, f"ordinary chatter {seq}", "ok", float(seq)), e(seq % DIM))
    cold = _cold([_cold_item(3, "my quokka is named zanzibar", e(0))])
    hits = mtm.search(e(0), frozenset({"quokka", "named"}), mode="hybrid", cold=cold)
    top = hits.pages[0]
    assert (top.page.page_id, top.tier, top.segment_id) == ("p3", "archive", "s9")
    assert "archive record 7" in top.why
    assert all(h.tier == "mtm" for h in hits.pages[1:])
    # Archived pages are not MTM's: no segment is visited for them.
    assert all(s.segment.segment_id != "s9" for s in hits.segments)


def test_the_turn_next_to_a_hot_hit_is_fetched_from_the_archive() -> None:
    mtm = _core()
    mtm.insert(Page.create("u", 5, "what is the quokka called", "guess", 5.0), e(1))
    asked: list[set[int]] = []

    def lookup(seqs):
        asked.append(set(seqs))
        return {4: _cold_item(4, "it is zanzibar", e(2))} if 4 in seqs else {}

    hits = mtm.search(e(1), frozenset({"quokka"}), mode="hybrid", cold=_cold([]), cold_pages=lookup)
    assert {4, 6} <= asked[0]
    assert [(h.page.page_id, h.tier) for h in hits.pages] == [("p5", "mtm"), ("p4", "archive")]


def test_paper_mode_ignores_the_cold_tier() -> None:
    mtm = _core()
    mtm.insert(_page(20), e(1))

    def lookup(seqs):
        raise AssertionError("paper mode must not read the cold tier")

    cold = _cold([_cold_item(3, "my quokka is named zanzibar", e(0))])
    hits = mtm.search(e(0), frozenset({"quokka"}), mode="paper", cold=cold, cold_pages=lookup)
    assert [h.tier for h in hits.pages] == ["mtm"]


def test_evicted_pages_hand_their_embeddings_to_the_archive() -> None:
    mtm = _core(segment_max_pages=2, fscore_threshold=0.5)
    effects = [mtm.insert(_page(i, {"a", "b"}), e(0)) for i in range(1, 4)]
    assert [p.seq for p in effects[-1].evicted_pages] == [1]
    embs = mtm.take_evicted_embeddings()
    assert list(embs) == [1] and np.allclose(embs[1], e(0))
    assert mtm.take_evicted_embeddings() == {}


# ----------------------------------------------------------------- time-aware ranking


def _says(seq: int, text: str, t: float) -> Page:
    return Page.create("u", seq, text, "I see.", t)


def test_a_newer_statement_of_a_change_ranks_above_the_one_it_supersedes() -> None:
    mtm = _core()
    mtm.insert(_says(1, "I live in Paris near the old canal", 1000.0), e(0))
    mtm.insert(_says(2, "The weather was grey all week", 2000.0), e(1))
    mtm.insert(_says(3, "I moved, now I live in Berlin", 3000.0), e(2))
    query = "where do I live"
    hits = mtm.search(e(0), frozenset({"live"}), mode="hybrid", query_text=query, now=4000.0)
    ids = [h.page.page_id for h in hits.pages]
    assert ids.index("p3") < ids.index("p1")
    assert "supersedes p1" in hits.pages[ids.index("p3")].why


def test_a_question_about_the_past_keeps_the_older_statement_first() -> None:
    mtm = _core()
    mtm.insert(_says(1, "I live in Paris near the old canal", 1000.0), e(0))
    mtm.insert(_says(3, "I moved, now I live in Berlin", 3000.0), e(2))
    hits = mtm.search(
        e(0), frozenset({"live"}), mode="hybrid", query_text="where did I live before", now=4000.0
    )
    assert hits.pages[0].page.page_id == "p1"
    assert all("supersedes" not in h.why for h in hits.pages)


def test_a_newer_page_without_a_change_cue_supersedes_nothing() -> None:
    mtm = _core()
    mtm.insert(_says(1, "I live in Paris near the old canal", 1000.0), e(0))
    mtm.insert(_says(3, "I live a quiet life", 3000.0), e(2))
    hits = mtm.search(
        e(0), frozenset({"live"}), mode="hybrid", query_text="where do I live", now=4000.0
    )
    assert hits.pages[0].page.page_id == "p1"


def test_pages_in_the_time_window_a_query_names_rank_first() -> None:
    day = 86_400.0
    now = 100 * day
    mtm = _core()
    mtm.insert(_says(1, "We went hiking in the hills", now - 60 * day), e(0))
    mtm.insert(_says(2, "We went hiking by the lake", now - 1 * day), e(0))
    mtm.insert(_says(3, "We went hiking on the coast", now - 30 * day), e(0))
    hits = mtm.search(
        e(0),
        frozenset({"hiking"}),
        mode="hybrid",
        query_text="where did we go hiking yesterday",
        now=now,
    )
    assert hits.pages[0].page.page_id == "p2"
    assert "time window" in hits.pages[0].why
    month = mtm.search(
        e(0),
        frozenset({"hiking"}),
        mode="hybrid",
        query_text="where did we go hiking a month ago",
        now=now,
    )
    assert month.pages[0].page.page_id == "p3"


# ----------------------------------------------------------------- paper_exact


def _keyword_only_target(**cfg) -> tuple[MTMCore, frozenset[str]]:
    """100 segments at cos 0.3 to the query e0 with no shared keyword (F = 0.3), and one,
    s1, orthogonal to e0 but with exactly the query's keywords (F = 0 + 1 = 1.0).

    The hnswlib prefilter takes the 32 nearest segments by cosine: s1 is not among them.
    """
    dim = 64
    rng = np.random.default_rng(7)
    mtm = _core(dim=dim, fscore_threshold=0.6, **cfg)
    target_kw = frozenset({"lighthouse", "keeper", "storm"})
    mtm.insert(_page(1, target_kw), e(1, dim))
    for i in range(100):
        noise = rng.standard_normal(dim)
        noise[:2] = 0.0  # orthogonal to e0 and e1
        noise /= np.linalg.norm(noise)
        v = 0.3 * e(0, dim) + math.sqrt(1 - 0.09) * noise
        assert mtm.insert(_page(i + 2, {f"filler{i}"}), v).created
    assert len(mtm) == 101
    return mtm, target_kw


def test_paper_exact_places_a_page_in_the_f1_segment_among_more_than_64_segments() -> None:
    exact, kw = _keyword_only_target(retrieval_mode="paper", paper_exact=True)
    query = e(0, 64)
    assert f_score(e(1, 64), query, kw, kw) == pytest.approx(1.0)
    effects = exact.insert(_page(200, kw), query)
    assert not effects.created and effects.segment_id == "s1"
    # The default's cosine prefilter never scores s1, so the same page opens a segment.
    approx, _ = _keyword_only_target(retrieval_mode="paper")
    assert approx.insert(_page(200, kw), query).created


def test_paper_exact_top_5_segments_include_the_f1_segment_among_more_than_64() -> None:
    exact, kw = _keyword_only_target(retrieval_mode="paper", paper_exact=True)
    hits = exact.search(e(0, 64), kw, top_m=5, top_k=10)
    assert hits.segments[0].segment.segment_id == "s1"
    assert hits.segments[0].score == pytest.approx(1.0)
    assert "p1" in [h.page.page_id for h in hits.pages]
    approx, _ = _keyword_only_target(retrieval_mode="paper")
    assert "s1" not in [h.segment.segment_id for h in approx.search(e(0, 64), kw, 5, 10).segments]


def test_paper_exact_turns_every_extension_off_and_needs_paper_mode() -> None:
    rules = MemoryConfig(retrieval_mode="paper", paper_exact=True).mtm_rules()
    assert rules.exact_segment_scoring and rules.promote_on_retrieval
    assert not rules.chain_affinity and not rules.promotion_needs_new_page
    assert rules.segment_max_pages is None and rules.segment_keyword_limit is None
    default = MemoryConfig().mtm_rules()
    assert not default.exact_segment_scoring and not default.promote_on_retrieval
    assert default.chain_affinity and default.promotion_needs_new_page
    assert (default.segment_max_pages, default.segment_keyword_limit) == (64, 24)
    with pytest.raises(ConfigError, match="paper_exact"):
        MemoryConfig(paper_exact=True)


def test_paper_exact_segments_are_unbounded() -> None:
    mtm = _core(retrieval_mode="paper", paper_exact=True, segment_max_pages=2, fscore_threshold=0.5)
    for seq in range(1, 6):
        assert mtm.insert(_page(seq, {"a"}), e(0)).evicted_pages == ()
    assert mtm.segments()[0].page_ids == ("p1", "p2", "p3", "p4", "p5")


def test_segment_keyword_limit_zero_keeps_the_union_of_page_keywords() -> None:
    words = [frozenset({f"w{seq}a", f"w{seq}b", "shared"}) for seq in range(1, 21)]
    capped = _core(fscore_threshold=-1.0, segment_keyword_limit=5)
    union = _core(fscore_threshold=-1.0, segment_keyword_limit=0)
    for seq, kw in enumerate(words, start=1):
        capped.insert(_page(seq, kw), e(0))
        union.insert(_page(seq, kw), e(0))
    assert len(capped.segments()[0].keywords) == 5 and "shared" in capped.segments()[0].keywords
    assert union.segments()[0].keywords == frozenset().union(*words)


def test_without_promotion_needs_new_page_a_hot_read_segment_is_promoted_again() -> None:
    clock = ManualClock(0.0)
    mtm = _core(
        clock, fscore_threshold=0.5, promotion_threshold=2.5, promotion_needs_new_page=False
    )
    mtm.insert(_page(1, {"a"}), e(0))
    assert mtm.insert(_page(2, {"a"}), e(0)).promoted
    for _ in range(5):  # N_visit 5: heat 6 > τ with no new page
        mtm.search(e(0), {"a"}, mode="paper")
    assert [r.segment_id for r in mtm.tick().promoted] == ["s1"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), top_m=st.integers(1, 8))
def test_paper_exact_top_m_segments_are_the_brute_force_f_score_top_m(seed, top_m) -> None:
    # 80 one-page segments (more than the 64 below which search is exhaustive anyway) with
    # random embeddings and keyword sets drawn from a small vocabulary, so keywords matter.
    rng = np.random.default_rng(seed)
    dim = 16
    vocab = [f"k{i}" for i in range(12)]
    mtm = _core(
        dim=dim,
        retrieval_mode="paper",
        paper_exact=True,
        fscore_threshold=2.0,
        mtm_capacity=500,
        promotion_threshold=1e9,
    )
    segs = {}
    for i in range(1, 81):
        v = random_unit(rng, dim)
        kw = frozenset(rng.choice(vocab, size=3, replace=False).tolist())
        segs[mtm.insert(_page(i, kw), v).segment_id] = (v, kw)
    q = random_unit(rng, dim)
    q_kw = frozenset(rng.choice(vocab, size=3, replace=False).tolist())
    scores = {sid: f_score(v, q, kw, q_kw) for sid, (v, kw) in segs.items()}
    expected = sorted(scores, key=lambda s: (-scores[s], int(s[1:])))[:top_m]
    hits = mtm.search(q, q_kw, top_m=top_m, top_k=1)
    assert [h.segment.segment_id for h in hits.segments] == expected
    assert [h.score for h in hits.segments] == pytest.approx([scores[s] for s in expected])


def test_a_held_pages_index_entries_leave_the_collector_nothing_to_walk() -> None:
    # Every full garbage collection walks each tracked container: an index entry per
    # held page that held the page's keyword set was one more for every page. Numbers
    # only: the collector stops tracking such a tuple after its first pass.
    mtm = _core()
    pages = [_page(seq, {f"k{seq}", "shared"}) for seq in range(1, 51)]
    for i, page in enumerate(pages):
        mtm.insert(page, e(i % DIM))
    gc.collect()
    held = mtm._pages  # noqa: SLF001 - the indexes' entries are the point here
    assert len(held.info) == 50
    assert not any(gc.is_tracked(entry) for entry in held.info.values())
    assert all(held.keywords[p.seq] is p.keywords for p in pages)
