"""The LoCoMo recall harness on a small synthetic LoCoMo-shaped file (no real data needed)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import itertools
import json
import sys
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

# ``bench`` is a top-level folder of the repository, not part of the installed package.
_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from bench import locomo
from bench.baselines import BM25Ranker, FlatRanker, tokenize


def _utc(year: int, month: int, day: int, hour: int, minute: int) -> float:
    return dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp()


def _turn(speaker: str, dia_id: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def _sample_a() -> dict[str, Any]:
    """Ann (speaker A) and Bob (speaker B); sessions 1, 2 and 10, plus a dangling date."""
    return {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("Ann", "D1:1", "I adopted a puppy named Biscuit yesterday."),
                _turn("Bob", "D1:2", "Congratulations! What breed is Biscuit?"),
                _turn(
                    "Ann",
                    "D1:3",
                    "A corgi. Here he is.",
                    img_url=["https://example.invalid/dog.jpg"],
                    blip_caption="a photo of a small dog on a sofa",
                    query="corgi puppy",
                ),
                _turn("Bob", "D1:4", "So cute!"),
                _turn("Ann", "D1:5", "Gotta run, talk soon."),
            ],
            "session_2_date_time": "9:05 am on 10 June, 2023",
            "session_2": [
                _turn("Bob", "D2:1", "Hey Ann, how is the pottery class going?"),
                _turn("Ann", "D2:2", "Great, I glazed a blue vase for my mother."),
                _turn("Bob", "D2:3", "Lovely."),
            ],
            # A date with no session list: must be ignored, not crash the loader.
            "session_3_date_time": "4:00 pm on 12 June, 2023",
            "session_10_date_time": "12:06 am on 1 July, 2023",
            "session_10": [
                _turn("Ann", "D10:1", "I started violin lessons with a jazz teacher."),
                _turn("Bob", "D10:2", "Wonderful, practise every day!"),
            ],
        },
        "qa": [
            {
                "question": "What breed is Biscuit?",
                "answer": "corgi",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What did Ann glaze and which instrument does she learn?",
                "answer": "a vase; violin",
                "evidence": ["D2:2; D10:01"],
                "category": 1,
            },
            {
                "question": "Would Ann enjoy a museum?",
                "answer": "likely",
                "evidence": [],
                "category": 3,
            },
            {
                "question": "What did Bob adopt?",
                "adversarial_answer": "nothing",
                "evidence": ["D"],
                "category": 5,
            },
            {
                "question": "When did Ann start violin lessons?",
                "answer": "July 2023",
                "evidence": ["D:10:1"],
                "category": 2,
            },
        ],
    }


def _sample_b() -> dict[str, Any]:
    return {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Cid",
            "speaker_b": "Dee",
            "session_1_date_time": "7:31 pm on 21 January, 2022",
            "session_1": [
                _turn("Cid", "D1:1", "My sourdough starter finally bubbled today."),
                _turn("Dee", "D1:2", "Bake a loaf this weekend!"),
                _turn("Cid", "D1:3", "I also booked a trip to Lisbon in March."),
                _turn("Dee", "D1:4", "Lisbon has great tiles."),
            ],
        },
        "qa": [
            {
                "question": "Where is Cid travelling in March?",
                "answer": "Lisbon",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What did the starter do?",
                "answer": "bubbled",
                "evidence": ["D1:1", "D9:9"],
                "category": 2,
            },
        ],
    }


@pytest.fixture()
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "locomo_synthetic.json"
    path.write_text(json.dumps([_sample_a(), _sample_b()]), encoding="utf-8")
    return path


def _embedder() -> Any:
    return locomo.make_embedder(dim=64)


# ----------------------------------------------------------------------------- loading


def test_loader_pairs_each_speaker_a_turn_with_the_following_speaker_b_turn() -> None:
    conversation = locomo.load_conversation(_sample_a())
    first = conversation.pages[0]
    assert first.query == "I adopted a puppy named Biscuit yesterday."
    assert first.response == "Congratulations! What breed is Biscuit?"
    assert first.dia_ids == ("D1:1", "D1:2")
    assert [page.dia_ids for page in conversation.pages] == [
        ("D1:1", "D1:2"),
        ("D1:3", "D1:4"),
        ("D1:5",),
        ("D2:1",),
        ("D2:2", "D2:3"),
        ("D10:1", "D10:2"),
    ]
    assert [page.index for page in conversation.pages] == list(range(6))


def test_unpaired_turns_become_pages_with_the_other_side_empty() -> None:
    pages = locomo.load_conversation(_sample_a()).pages
    lone_a_at_session_end, lone_b_opening_session = pages[2], pages[3]
    assert (lone_a_at_session_end.query, lone_a_at_session_end.response) == (
        "Gotta run, talk soon.",
        "",
    )
    assert (lone_b_opening_session.query, lone_b_opening_session.response) == (
        "",
        "Hey Ann, how is the pottery class going?",
    )
    assert lone_b_opening_session.text == "Hey Ann, how is the pottery class going?"


def test_image_turns_carry_their_caption_in_the_page_text() -> None:
    page = locomo.load_conversation(_sample_a()).pages[1]
    assert page.query == "A corgi. Here he is. [image: a photo of a small dog on a sofa]"
    assert page.response == "So cute!"


def test_session_dates_parse_as_utc_including_midnight_and_noon() -> None:
    assert locomo.parse_session_datetime("1:56 pm on 8 May, 2023") == _utc(2023, 5, 8, 13, 56)
    assert locomo.parse_session_datetime("12:06 am on 11 November, 2022") == _utc(
        2022, 11, 11, 0, 6
    )
    assert locomo.parse_session_datetime("12:30 pm on 1 July, 2023") == _utc(2023, 7, 1, 12, 30)


@pytest.mark.parametrize(
    "text", ["", "yesterday", "13:05 pm on 8 May, 2023", "1:56 pm on 8 Mai, 2023"]
)
def test_unparseable_session_dates_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        locomo.parse_session_datetime(text)


def test_pages_are_stamped_at_session_start_plus_30_seconds_per_turn() -> None:
    pages = locomo.load_conversation(_sample_a()).pages
    session_1 = _utc(2023, 5, 8, 13, 56)
    session_2 = _utc(2023, 6, 10, 9, 5)
    assert [page.timestamp for page in pages[:3]] == [session_1, session_1 + 60, session_1 + 120]
    assert [page.timestamp for page in pages[3:5]] == [session_2, session_2 + 30]
    assert pages[5].timestamp == _utc(2023, 7, 1, 0, 6)
    stamps = [page.timestamp for page in pages]
    assert all(a < b for a, b in itertools.pairwise(stamps))


def test_sessions_are_taken_in_numeric_order_and_dates_without_a_list_are_skipped() -> None:
    conversation = locomo.load_conversation(_sample_a())
    assert conversation.sessions == 3
    assert conversation.turns == 10
    assert [page.session for page in conversation.pages] == [1, 1, 1, 2, 2, 10]


def test_questions_are_asked_a_day_after_the_last_page() -> None:
    conversation = locomo.load_conversation(_sample_a())
    assert conversation.question_timestamp == conversation.pages[-1].timestamp + 86_400.0


def test_a_missing_data_file_is_a_clear_bench_error(tmp_path: Path) -> None:
    with pytest.raises(locomo.BenchError, match="--data"):
        locomo.load_locomo(tmp_path / "absent.json")


def test_data_path_prefers_flag_then_environment_then_the_shared_default() -> None:
    assert locomo.resolve_data_path("x.json", {locomo.ENV_DATA_PATH: "y.json"}) == Path("x.json")
    assert locomo.resolve_data_path(None, {locomo.ENV_DATA_PATH: "y.json"}) == Path("y.json")
    default = locomo.resolve_data_path(None, {})
    assert default == _REPO_ROOT.parent / "shared" / "data" / "locomo10.json"


# ----------------------------------------------------------------------------- evidence

_KNOWN = {"D8:6", "D9:17", "D9:1", "D4:4", "D4:6", "D11:26", "D30:5", "D1:1"}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D8:6; D9:17", ("D8:6", "D9:17")),
        ("D9:1 D4:4 D4:6", ("D9:1", "D4:4", "D4:6")),
        ("D:11:26", ("D11:26",)),
        ("D30:05", ("D30:5",)),
    ],
)
def test_quirky_evidence_strings_are_repaired_into_turn_ids(
    raw: str, expected: tuple[str, ...]
) -> None:
    result = locomo.repair_evidence([raw], _KNOWN)
    assert result.ids == expected
    assert result.repaired == 1
    assert result.unresolvable == () and result.malformed == ()


def test_a_bare_d_is_dropped_and_reported_as_malformed() -> None:
    result = locomo.repair_evidence(["D1:1", "D"], _KNOWN)
    assert result.ids == ("D1:1",)
    assert result.malformed == ("D",)
    assert result.repaired == 0


def test_ids_naming_no_turn_are_dropped_and_reported_as_unresolvable() -> None:
    result = locomo.repair_evidence(["D10:19", "D1:1", "D1:01"], _KNOWN)
    assert result.ids == ("D1:1",)
    assert result.unresolvable == ("D10:19",)


def test_only_questions_with_resolved_evidence_are_asked_and_drops_are_counted() -> None:
    conversation = locomo.load_conversation(_sample_a())
    assert [q.question for q in conversation.questions] == [
        "What breed is Biscuit?",
        "What did Ann glaze and which instrument does she learn?",
        "When did Ann start violin lessons?",
    ]
    assert conversation.questions[1].evidence == ("D2:2", "D10:1")
    assert conversation.questions[2].evidence == ("D10:1",)
    assert conversation.questions_total == 5
    evidence = conversation.evidence
    assert evidence["questions_without_evidence"] == 2
    assert evidence["malformed"] == ["D"]
    assert evidence["raw_not_matching_a_turn"] == 3
    assert evidence["repaired_strings"] == 2
    other = locomo.load_conversation(_sample_b())
    assert other.evidence["unresolvable"] == ["D9:9"]
    assert other.questions[1].evidence == ("D1:1",)


# ----------------------------------------------------------------------------- metrics


def _pages(*dia_ids: tuple[str, ...]) -> list[locomo.BenchPage]:
    return [
        locomo.BenchPage(i, 1, f"q{i}", f"r{i}", float(i), ids) for i, ids in enumerate(dia_ids)
    ]


def test_metrics_match_hand_computed_any_all_and_fraction() -> None:
    pages = _pages(("D1:1", "D1:2"), ("D1:3", "D1:4"), ("D2:1",), ("D2:2", "D2:3"))
    evidence = ["D1:3", "D2:2", "D9:9"]  # D9:9 is never retrievable: all@k stays 0
    metrics = locomo.score_ranking([0, 1, 2, 3], pages, evidence, ks=(1, 2, 4))
    assert metrics == {
        "any@1": 0.0,
        "all@1": 0.0,
        "frac@1": 0.0,
        "any@2": 1.0,
        "all@2": 0.0,
        "frac@2": pytest.approx(1 / 3),
        "any@4": 1.0,
        "all@4": 0.0,
        "frac@4": pytest.approx(2 / 3),
    }
    complete = locomo.score_ranking([3, 1], pages, ["D1:3", "D2:2"], ks=(1, 2))
    assert complete == {
        "any@1": 1.0,
        "all@1": 0.0,
        "frac@1": 0.5,
        "any@2": 1.0,
        "all@2": 1.0,
        "frac@2": 1.0,
    }


def test_repeated_and_unknown_page_ids_cover_nothing_extra() -> None:
    pages = _pages(("D1:1",), ("D1:2",))
    # -1 (a page the system made up) uses a slot; the repeat of 0 does not.
    metrics = locomo.score_ranking([0, 0, -1, 1], pages, ["D1:2"], ks=(2, 3))
    assert metrics["any@2"] == 0.0
    assert metrics["any@3"] == 1.0


def test_a_question_without_evidence_cannot_be_scored() -> None:
    with pytest.raises(ValueError):
        locomo.score_ranking([0], _pages(("D1:1",)), [])


def test_accumulator_averages_overall_and_per_category() -> None:
    accumulator = locomo.RecallAccumulator(ks=(10,))
    accumulator.add(1, {"any@10": 1.0, "all@10": 0.0, "frac@10": 0.5})
    accumulator.add(1, {"any@10": 0.0, "all@10": 0.0, "frac@10": 0.0})
    accumulator.add(4, {"any@10": 1.0, "all@10": 1.0, "frac@10": 1.0})
    summary = accumulator.summary()
    assert summary["overall"]["n"] == 3
    assert summary["overall"]["any@10"] == pytest.approx(2 / 3)
    assert summary["overall"]["frac@10"] == pytest.approx(0.5)
    assert summary["per_category"]["1"] == {
        "name": "multi-hop",
        "n": 2,
        "any@10": 0.5,
        "all@10": 0.0,
        "frac@10": 0.25,
    }
    assert summary["per_category"]["2"]["n"] == 0
    assert summary["per_category"]["2"]["any@10"] is None


def test_targets_say_missed_when_hybrid_trails_bm25_in_a_category() -> None:
    def result(overall: float, per: dict[str, float]) -> dict[str, Any]:
        return {
            "overall": {"any@10": overall},
            "per_category": {c: {"name": c, "any@10": v} for c, v in per.items()},
        }

    checks = locomo.check_targets(
        {
            "memoryos-hybrid": result(0.9, {"1": 0.7, "2": 0.95}),
            "bm25": result(0.8, {"1": 0.75, "2": 0.9}),
        }
    )
    assert [c["status"] for c in checks] == ["MET", "MISSED"]
    assert "1" in checks[1]["detail"]
    not_run = locomo.check_targets({"bm25": result(0.8, {"1": 0.75})})
    assert [c["status"] for c in not_run] == ["NOT RUN", "NOT RUN"]


# ----------------------------------------------------------------------------- baselines


def test_bm25_ranks_the_page_with_the_exact_rare_term_first() -> None:
    documents = [
        "we talked about the weather and the news",
        "the weather was nice so we walked",
        "my cousin plays the theremin in a band",
        "the news was about the weather again",
    ]
    ranker = BM25Ranker(documents)
    assert ranker.rank("who plays the theremin?")[0] == 2
    assert len(ranker.rank("theremin")) == len(documents)


def test_bm25_ignores_stopwords_and_keeps_document_order_on_ties() -> None:
    ranker = BM25Ranker(["what did she do", "a violin", "a cello"], stopwords={"what", "did"})
    assert ranker.scores("what did")[0] == 0.0
    assert ranker.rank("nothing matches") == [0, 1, 2]


def test_flat_ranker_puts_the_identical_text_first() -> None:
    documents = ["sourdough starter bubbled", "booked a trip to lisbon", "tiles in lisbon"]
    ranker = FlatRanker(documents, _embedder())
    assert ranker.rank("booked a trip to lisbon")[0] == 1


# ----------------------------------------------------------------------------- end to end


def test_baseline_run_writes_results_json_and_prints_a_table(
    data_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    embedder = _embedder()
    monkeypatch.setattr(locomo, "make_embedder", lambda dim=512: embedder)
    out = tmp_path / "results"
    code = locomo.main(
        [
            "--data",
            str(data_file),
            "--systems",
            "bm25,flat",
            "--out-dir",
            str(out),
            "--no-plot",
            "--no-progress",
        ]
    )
    assert code == 0
    report = json.loads((out / "locomo.json").read_text())
    assert set(report["systems"]) == {"bm25", "flat"}
    assert report["data"]["conversations"] == 2
    assert report["data"]["pages"] == 8
    assert report["data"]["questions_asked"] == 5
    assert report["data"]["evidence"]["unresolvable"] == [["conv-b", "D9:9"]]
    assert report["data"]["evidence"]["malformed"] == [["conv-a", "D"]]
    bm25 = report["systems"]["bm25"]
    assert bm25["overall"]["n"] == 5
    assert set(bm25["overall"]) >= {f"{m}@{k}" for m in ("any", "all", "frac") for k in (5, 10, 20)}
    assert bm25["per_category"]["4"]["n"] == 2
    # Four pages per conversation at most: top 5 holds every page, so any@5 is perfect.
    assert bm25["overall"]["any@5"] == 1.0
    assert bm25["timings"]["queries"] == 5
    assert "bench/locomo.py" in report["command"]
    assert not (out / "locomo_any10.png").exists()
    printed = capsys.readouterr().out
    assert "| bm25 |" in printed and "| flat |" in printed
    assert "NOT RUN" in printed


def test_the_data_path_can_come_from_the_environment(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(locomo.ENV_DATA_PATH, str(data_file))
    out = tmp_path / "results"
    code = locomo.main(
        [
            "--systems",
            "bm25",
            "--out-dir",
            str(out),
            "--no-plot",
            "--no-progress",
            "--limit-conversations",
            "1",
        ]
    )
    assert code == 0
    report = json.loads((out / "locomo.json").read_text())
    assert report["data"]["conversations"] == 1
    assert report["systems"]["bm25"]["overall"]["n"] == 3


def test_unknown_systems_and_missing_data_exit_with_code_2(
    data_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        locomo.main(
            [
                "--data",
                str(data_file),
                "--systems",
                "grep",
                "--out-dir",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "unknown system" in capsys.readouterr().err
    assert (
        locomo.main(
            [
                "--data",
                str(tmp_path / "nope.json"),
                "--systems",
                "bm25",
                "--out-dir",
                str(tmp_path),
                "--no-progress",
            ]
        )
        == 2
    )
    assert not (tmp_path / "locomo.json").exists()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_the_any10_chart_is_written_as_png(data_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert (
        locomo.main(
            ["--data", str(data_file), "--systems", "bm25", "--out-dir", str(out), "--no-progress"]
        )
        == 0
    )
    assert (out / "locomo_any10.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_memoryos_paper_exact_is_a_system_run_only_when_named(
    data_file: Path, tmp_path: Path
) -> None:
    assert "memoryos-paper-exact" not in locomo.DEFAULT_SYSTEMS
    conversations = locomo.load_locomo(data_file)
    results = locomo.run_benchmark(
        conversations, ["memoryos-paper-exact"], work_dir=tmp_path / "work", show_progress=False
    )
    exact = results["memoryos-paper-exact"]
    assert exact["settings"]["config"]["paper_exact"] is True
    assert exact["settings"]["config"]["retrieval_mode"] == "paper"
    assert exact["overall"]["n"] == 5 and exact["settings"]["foreign_page_ids"] == 0


def test_memoryos_runs_through_the_public_api_with_one_user_per_conversation(
    data_file: Path, tmp_path: Path
) -> None:
    conversations = locomo.load_locomo(data_file)
    results = locomo.run_benchmark(
        conversations, ["memoryos-hybrid"], work_dir=tmp_path / "work", show_progress=False
    )
    hybrid = results["memoryos-hybrid"]
    assert hybrid["overall"]["n"] == 5
    # Few pages per user: everything fits in the context, and nothing leaks between users.
    assert hybrid["settings"]["foreign_page_ids"] == 0
    assert hybrid["overall"]["any@20"] == 1.0


class _FakeContext:
    def __init__(self, ids: tuple[str, ...]) -> None:
        self._ids = ids

    def page_ids(self) -> tuple[str, ...]:
        return self._ids


class _FakeMemoryOS:
    """Records how the harness drives the public API; ranks by shared words."""

    opened: ClassVar[list[_FakeMemoryOS]] = []

    #: add_turn answers Overloaded this many times (each time before storing anything).
    overloads: ClassVar[int] = 0

    def __init__(self, config: Any) -> None:
        self.config = config
        self.pages: dict[str, list[tuple[str, str, float | None]]] = {}
        self.keys: list[str | None] = []
        self.stored_keys: dict[str | None, str] = {}
        self.retrieved: list[tuple[str, str, float | None]] = []
        self.flushes = 0
        self.closed = False

    @classmethod
    def open(cls, data_dir: Any, config: Any = None) -> _FakeMemoryOS:
        instance = cls(config)
        cls.opened.append(instance)
        return instance

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True

    def add_turn(
        self,
        user_id: str,
        query: str,
        response: str,
        timestamp: float | None = None,
        *,
        turn_key: str | None = None,
    ) -> str:
        from memoryos_actors.errors import Overloaded

        self.keys.append(turn_key)
        if type(self).overloads > 0:
            type(self).overloads -= 1
            raise Overloaded("placement queue full")
        if turn_key is not None and turn_key in self.stored_keys:
            return self.stored_keys[turn_key]
        self.pages.setdefault(user_id, []).append((query, response, timestamp))
        page_id = f"p{len(self.pages[user_id])}"
        self.stored_keys[turn_key] = page_id
        return page_id

    def flush(self) -> None:
        self.flushes += 1

    def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> _FakeContext:
        self.retrieved.append((user_id, query, timestamp))
        words = set(tokenize(query))
        pages = self.pages[user_id]
        order = sorted(
            range(len(pages)),
            key=lambda i: -len(words & set(tokenize(pages[i][0] + " " + pages[i][1]))),
        )
        return _FakeContext((*(f"p{i + 1}" for i in order[:1]), "p999"))


def test_memoryos_adapter_maps_page_ids_per_user_and_asks_at_question_time(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryos_actors

    class _FakeConfig:
        def __init__(self, **fields: Any) -> None:
            self.fields = fields

    _FakeMemoryOS.opened = []
    # Straight into the module dict: getattr would trigger the package's lazy import.
    monkeypatch.setitem(vars(memoryos_actors), "MemoryOS", _FakeMemoryOS)
    monkeypatch.setitem(vars(memoryos_actors), "MemoryConfig", _FakeConfig)
    conversations = locomo.load_locomo(data_file)
    results = locomo.run_benchmark(
        conversations, ["memoryos-paper"], work_dir=tmp_path / "work", show_progress=False
    )
    (mem,) = _FakeMemoryOS.opened
    assert mem.config.fields == {"top_k_pages": 20, "retrieval_mode": "paper"}
    assert mem.closed and mem.flushes == 2
    assert sorted(mem.pages) == ["conv-a", "conv-b"]
    assert [p[2] for p in mem.pages["conv-b"]] == [c.timestamp for c in conversations[1].pages]
    assert {(user, ts) for user, _, ts in mem.retrieved} == {
        ("conv-a", conversations[0].question_timestamp),
        ("conv-b", conversations[1].question_timestamp),
    }
    paper = results["memoryos-paper"]
    # Every answer carried one id ("p999") that is no page of the user: counted, covers nothing.
    assert paper["settings"]["foreign_page_ids"] == 5
    assert paper["settings"]["question_time_passed_as"] == "timestamp"
    # The fake's single page (most shared words) holds evidence for 3 of the 5 questions:
    # both temporal ones and Cid's trip, not Biscuit's breed nor the multi-hop one.
    assert paper["overall"]["any@5"] == pytest.approx(0.6)
    assert [paper["per_category"][c]["any@5"] for c in ("1", "2", "4")] == [0.0, 1.0, 0.5]


def test_memoryos_adapter_retries_overloaded_turns_with_the_same_key(
    data_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memoryos_actors

    class _FakeConfig:
        def __init__(self, **fields: Any) -> None:
            self.fields = fields

    _FakeMemoryOS.opened = []
    monkeypatch.setattr(_FakeMemoryOS, "overloads", 3)
    monkeypatch.setattr(locomo, "_RETRY_FIRST_DELAY_S", 0.0)
    monkeypatch.setitem(vars(memoryos_actors), "MemoryOS", _FakeMemoryOS)
    monkeypatch.setitem(vars(memoryos_actors), "MemoryConfig", _FakeConfig)
    conversations = locomo.load_locomo(data_file)
    results = locomo.run_benchmark(
        conversations, ["memoryos-hybrid"], work_dir=tmp_path / "work", show_progress=False
    )
    (mem,) = _FakeMemoryOS.opened
    pages = sum(len(c.pages) for c in conversations)
    # The first page was refused three times, then stored once, under one key throughout.
    assert mem.keys[:4] == [mem.keys[0]] * 4 and mem.keys[0] is not None
    assert len(mem.keys) == pages + 3 and len(set(mem.keys)) == pages
    assert sum(len(v) for v in mem.pages.values()) == pages
    assert results["memoryos-hybrid"]["settings"]["add_turn_overloaded_retries"] == 3
