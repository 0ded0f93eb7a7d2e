"""The LongMemEval global-haystack harness on a tiny hand-made file (no real data)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from bench import longmemeval as lme


def _t(role: str, content: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": role, "content": content, "has_answer": has_answer}


def _items() -> list[dict[str, Any]]:
    """Four items: two whole ones (even positions) and two distractors (odd positions)."""
    return [
        {  # 0: the evidence is the user's turn of the second pair
            "question_id": "q-dog",
            "question_type": "single-session-user",
            "question": "What is the name of my dog?",
            "answer": "Biscuit",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_dates": ["2023/05/20 (Sat) 09:00"],
            "haystack_sessions": [
                [
                    _t("user", "Any tips for a rainy weekend?"),
                    _t("assistant", "Board games and soup."),
                    _t("user", "My dog Biscuit hates the rain.", True),
                    _t("assistant", "Biscuit might like a raincoat."),
                ]
            ],
        },
        {  # 1: a distractor; its session opens with the assistant (left out) and ends
            # with a lone user turn (left out)
            "question_id": None,
            "question_type": None,
            "question": None,
            "answer": None,
            "question_date": None,
            "haystack_dates": ["2023/04/01 (Sat) 08:00"],
            "haystack_sessions": [
                [
                    _t("assistant", "Welcome back!"),
                    _t("user", "Thanks."),
                    _t("user", "What is a good pasta recipe?"),
                    _t("assistant", "Try cacio e pepe."),
                    _t("user", "Bye."),
                ]
            ],
        },
        {  # 2: an abstention question (no has_answer turn): not scored
            "question_id": "q-cat_abs",
            "question_type": "single-session-user",
            "question": "What is the name of my cat?",
            "answer": "unknown",
            "question_date": "2023/05/30 (Tue) 10:00",
            "haystack_dates": ["2023/05/21 (Sun) 09:00", "2023/05/22 (Mon) 09:00"],
            "haystack_sessions": [
                [_t("user", "I like jazz."), _t("assistant", "Jazz is great.")],
                [_t("user", "I bought a red bike."), _t("assistant", "Enjoy the rides!")],
            ],
        },
        {  # 3: another distractor
            "question_id": None,
            "question_type": None,
            "question": None,
            "answer": None,
            "question_date": None,
            "haystack_dates": ["2023/05/23 (Tue) 09:00"],
            "haystack_sessions": [
                [_t("user", "Where is Lisbon?"), _t("assistant", "In Portugal.")]
            ],
        },
    ]


@pytest.fixture()
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "lme_tiny.json"
    path.write_text(json.dumps(_items()), encoding="utf-8")
    return path


def test_pages_are_user_assistant_pairs_in_file_order_and_other_turns_are_left_out() -> None:
    hay = lme.build_haystack(_items())
    assert [(p.query, p.response) for p in hay.pages] == [
        ("Any tips for a rainy weekend?", "Board games and soup."),
        ("My dog Biscuit hates the rain.", "Biscuit might like a raincoat."),
        ("What is a good pasta recipe?", "Try cacio e pepe."),
        ("I like jazz.", "Jazz is great."),
        ("I bought a red bike.", "Enjoy the rides!"),
        ("Where is Lisbon?", "In Portugal."),
    ]
    # (assistant, user) at positions 0-1 and the lone last user turn of item 1.
    assert hay.left_out_turns == 3
    assert [p.item for p in hay.pages] == [0, 0, 1, 2, 2, 3]


def test_pages_are_stamped_at_their_session_date_plus_30_seconds_per_pair() -> None:
    hay = lme.build_haystack(_items())
    start = lme.parse_date("2023/05/20 (Sat) 09:00")
    assert hay.pages[0].timestamp == start
    assert hay.pages[1].timestamp == start + lme.TURN_SPACING_SECONDS
    assert lme.parse_date("2023/05/20 (Sat) 09:00") == 1684573200.0


def test_only_even_items_with_an_evidence_page_are_scored() -> None:
    hay = lme.build_haystack(_items())
    assert [(q.question_id, sorted(q.pages)) for q in hay.questions] == [("q-dog", [1])]
    assert hay.questions[0].timestamp == lme.parse_date("2023/05/30 (Tue) 10:00")
    assert hay.skipped == {"no_has_answer_turn": 1, "evidence_only_in_left_out_turns": 0}


def test_a_history_length_keeps_the_first_items_only() -> None:
    hay = lme.build_haystack(_items(), 2)
    assert hay.items == 2 and len(hay.pages) == 3 and len(hay.questions) == 1


def test_dates_that_are_not_longmemeval_dates_are_refused() -> None:
    with pytest.raises(ValueError):
        lme.parse_date("30 May 2023")
    items = _items()
    items[0]["haystack_dates"] = ["yesterday"]
    with pytest.raises(lme.BenchError, match="item 0"):
        lme.build_haystack(items)


def test_data_path_prefers_flag_then_environment_then_the_shared_default() -> None:
    assert lme.resolve_data_path("x.json", {lme.ENV_DATA_PATH: "y.json"}) == Path("x.json")
    assert lme.resolve_data_path(None, {lme.ENV_DATA_PATH: "y.json"}) == Path("y.json")
    default = lme.resolve_data_path(None, {})
    assert default.parts[-3:] == ("shared", "data", "longmemeval_oracle_dev.json")


def test_bm25_context_is_its_top_10_plus_the_7_newest_pages_and_hits_are_counted(
    data_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = lme.main(
        [
            "--data",
            str(data_file),
            "--lengths",
            "2,4",
            "--systems",
            "bm25",
            "--out-dir",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    report = json.loads((out / "longmemeval.json").read_text())
    assert report["haystacks"]["4"] == {
        "pages": 6,
        "questions": 1,
        "left_out_turns": 3,
        "skipped": {"no_has_answer_turn": 1, "evidence_only_in_left_out_turns": 0},
    }
    result = report["results"]["4"]["bm25"]
    assert result["overall"] == {"n": 1, "hits": 1, "recall": 1.0}
    assert result["per_type"]["single-session-user"]["hits"] == 1
    assert str(tmp_path) not in report["command"]  # no path of this machine in results
    table = capsys.readouterr().out
    assert "| 4 items, 6 pages, all |" in table and "| bm25 | 100.0 | 100.0 |" in table
    # Two questions of one type in the file (one an abstention): both tune (the 3rd is not).
    assert report["split"] == {"tune": 2, "validation": 0}
    assert result["splits"]["tune"]["overall"]["hits"] == 1
    assert result["official"]["turn"]["tune"]["overall"]["recall_all@5"] == 1.0


def test_the_split_is_stratified_by_type_deterministic_and_one_in_three_validation() -> None:
    items = []
    for i in range(60):
        qtype = "temporal-reasoning" if i < 30 else "multi-session"
        items.append({"question_id": f"q{i}", "question_type": qtype, "question": "?"})
        items.append({"question": None})  # a distractor at an odd position: no question
    split = lme.split_of(items)
    assert len(split) == 60
    for qtype in ("temporal-reasoning", "multi-session"):
        ids = [it["question_id"] for it in items if it.get("question_type") == qtype]
        assert sum(split[i] == "validation" for i in ids) == 10
    # The same ids give the same split whatever else is in the file.
    assert lme.split_of(items[:60]) == {k: v for k, v in split.items() if int(k[1:]) < 30}


def test_official_metrics_count_every_evidence_unit_and_discount_by_rank() -> None:
    m = lme.official_metrics([7, 3, 9, 3, 1], frozenset({3, 1}))
    assert m["recall_any@5"] == 1.0 and m["recall_all@5"] == 1.0
    # Duplicates are dropped: 3 and 1 at positions 1 and 3 (from 0) of [7, 3, 9, 1],
    # discounted by log2(position + 1) as the official DCG does; ideal: [1, 1].
    assert m["ndcg_any@5"] == pytest.approx((1 / math.log2(2) + 1 / math.log2(4)) / (1 + 1))
    half = lme.official_metrics([3, 8], frozenset({3, 1}))
    assert half["recall_any@10"] == 1.0 and half["recall_all@10"] == 0.0
    assert lme.official_metrics([], frozenset({3}))["ndcg_any@10"] == 0.0


def test_abstention_questions_are_left_out_of_the_official_metrics(tmp_path: Path) -> None:
    items = _items()
    items[0]["question_id"] = "q-dog_abs"
    hay = lme.build_haystack(items)
    results = lme.run_length(hay, ["bm25"], work_dir=tmp_path / "w", split={})
    bm25 = results["bm25"]
    assert bm25["overall"]["n"] == 1  # ours scores it
    assert bm25["official"]["turn"]["all"]["overall"] == {"n": 0} | {
        f"{m}@{k}": None for m in ("recall_any", "recall_all", "ndcg_any") for k in (5, 10)
    }
    assert hay.questions[0].sessions == frozenset({"0:0"})


def test_the_dense_anchor_is_left_out_with_a_note_when_it_cannot_run(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(lme.ENV_MODEL_DIR, raising=False)
    code = lme.main(
        ["--data", str(data_file), "--lengths", "4", "--systems", "bm25,minilm-flat"]
        + ["--out-dir", str(tmp_path), "--quiet", "--model-dir", ""]
    )
    assert code == 0
    report = json.loads((tmp_path / "longmemeval.json").read_text())
    assert "no MiniLM model directory" in report["skipped_systems"]["minilm-flat"]
    assert list(report["results"]["4"]) == ["bm25"]


def test_the_memory_system_runs_through_its_public_api_as_one_user(tmp_path: Path) -> None:
    hay = lme.build_haystack(_items())
    results = lme.run_length(hay, ["memoryos-hybrid", "bm25"], work_dir=tmp_path / "work")
    ours = results["memoryos-hybrid"]
    # Six pages and a context of top 10 + STM: every page is in it.
    assert ours["overall"]["hits"] == 1
    assert ours["settings"]["foreign_page_ids"] == 0
    assert ours["settings"]["config"]["top_k_pages"] == lme.TOP_K
    assert ours["missed"] == []


def test_targets_compare_with_bm25_per_type_in_questions() -> None:
    def result(hits_by_type: dict[str, tuple[int, int]]) -> dict[str, Any]:
        per_type = {t: {"n": n, "hits": h, "recall": h / n} for t, (h, n) in hits_by_type.items()}
        hits = sum(h for h, _ in hits_by_type.values())
        n = sum(n for _, n in hits_by_type.values())
        return {"overall": {"n": n, "hits": hits, "recall": hits / n}, "per_type": per_type}

    ours = result({"a": (90, 100), "b": (9, 10)})
    bm25 = result({"a": (70, 100), "b": (10, 10)})
    checks = {
        c["target"]: c for c in lme.check_targets({"500": {"memoryos-hybrid": ours, "bm25": bm25}})
    }
    where = "500 items (all questions)"
    assert checks[f"{where}: >= 85%"]["status"] == "MET"
    assert checks[f"{where}: >= BM25 + 10 points"]["status"] == "MET"
    behind = checks[f"{where}: behind BM25 in no question type"]
    assert behind["status"] == "MISSED" and "b 9 < 10" in behind["detail"]
    # With a split, the targets are checked on the validation questions.
    ours["splits"] = {"tune": ours, "validation": result({"a": (9, 10), "b": (3, 3)})}
    bm25["splits"] = {"tune": bm25, "validation": result({"a": (8, 10), "b": (3, 3)})}
    checks = {
        c["target"]: c for c in lme.check_targets({"500": {"memoryos-hybrid": ours, "bm25": bm25}})
    }
    where = "500 items (validation questions)"
    assert checks[f"{where}: >= 85%"]["status"] == "MET"  # 12 of 13
    assert checks[f"{where}: >= BM25 + 10 points"]["status"] == "MISSED"
    assert checks[f"{where}: behind BM25 in no question type"]["status"] == "MET"
    assert checks["200 items: >= 92%"]["status"] == "NOT RUN"


def test_unknown_systems_and_missing_data_exit_with_code_2(
    data_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        lme.main(
            ["--data", str(data_file), "--systems", "grep", "--out-dir", str(tmp_path), "--quiet"]
        )
        == 2
    )
    assert "unknown system" in capsys.readouterr().err
    assert (
        lme.main(["--data", str(tmp_path / "nope.json"), "--out-dir", str(tmp_path), "--quiet"])
        == 2
    )
    assert not (tmp_path / "longmemeval.json").exists()


def test_kept_data_is_reused_with_the_same_answers_and_refused_for_other_settings(
    data_file: Path, tmp_path: Path
) -> None:
    hay = lme.build_haystack(lme.load_items(data_file), 4)
    kept = tmp_path / "kept"
    first = lme.run_length(hay, ["memoryos-hybrid"], work_dir=tmp_path / "w1", keep_data=kept)
    assert (kept / "4" / "memoryos-hybrid" / lme.KEPT_MARKER).is_file()
    again = lme.run_length(hay, ["memoryos-hybrid"], work_dir=tmp_path / "w2", keep_data=kept)
    settings = again["memoryos-hybrid"]["settings"]
    assert settings["ingest_reused_from_kept_data"] is True
    assert not first["memoryos-hybrid"]["settings"]["ingest_reused_from_kept_data"]
    for key in ("overall", "per_type", "missed"):
        assert again["memoryos-hybrid"][key] == first["memoryos-hybrid"][key]
    with pytest.raises(lme.BenchError, match="other pages or settings"):
        lme.run_length(
            hay,
            ["memoryos-hybrid"],
            work_dir=tmp_path / "w3",
            keep_data=kept,
            memory_config={"stm_capacity": 3},
        )


def test_the_as_of_bm25_anchor_leaves_out_pages_stamped_after_the_question(
    tmp_path: Path,
) -> None:
    items = _items()
    # The last distractor's session is written two weeks after the question is asked.
    items[3]["haystack_dates"] = ["2023/06/13 (Tue) 09:00"]
    items[3]["haystack_sessions"][0][0]["content"] = "My dog Biscuit learned the name game."
    hay = lme.build_haystack(items)
    late = hay.pages[-1].index
    plain = lme._make_system("bm25", tmp_path, {})
    as_of = lme._make_system("bm25-asof", tmp_path, {})
    for system in (plain, as_of):
        system.ingest(hay)
    question = hay.questions[0]
    assert late in plain.context(question)[1]
    assert late not in as_of.context(question)[1]
    assert as_of.describe()["as_of_slack_seconds"] == 2 * 86_400.0
