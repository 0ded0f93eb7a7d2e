"""The offline backend: deterministic, extractive, honest about what it is."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.gateway.embedders import HashingEmbedder
from memoryos_actors.gateway.offline import OFFLINE_NAME, OfflineBackend
from memoryos_actors.gateway.prompts import validate_output

OFF = OfflineBackend()


def page(q: str, r: str) -> dict[str, str]:
    return {"query": q, "response": r}


def test_facts_come_from_first_person_statements_in_third_person() -> None:
    out = OFF.complete(
        "persona_update",
        {
            "pages": [
                page(
                    "I am a nurse. My favourite food is sushi. I live in Lyon with my sister.",
                    "Lyon is lovely.",
                ),
                page(
                    "I'm from Chile and I work at the city hospital. Do I like tea?",
                    "You did not say.",
                ),
                page("I love hiking in the Alps. I'm not sure about tomorrow.", "Nice."),
            ],
            "trait_names": [],
        },
    )
    assert out["facts"] == [
        "User is a nurse.",
        "User's favourite food is sushi.",
        "User lives in Lyon with their sister.",
        "User is from Chile and they work at the city hospital.",
        "User loves hiking in the Alps.",
    ]


def test_traits_are_cued_by_keywords_and_negation_gives_low() -> None:
    out = OFF.complete(
        "persona_update",
        {
            "pages": [
                page("I play guitar in a band and go to every jazz concert.", "Cool."),
                page("I hate football and every other sport.", "Noted."),
            ],
            "trait_names": ["interest in music", "interest in sports", "interest in cooking"],
        },
    )
    levels = {t["name"]: t["level"] for t in out["traits"]}
    # Names come back in the trait table's spelling (lower case, words joined by "_").
    assert levels == {"interest_in_music": "high", "interest_in_sports": "low"}
    music = next(t for t in out["traits"] if t["name"] == "interest_in_music")
    assert "guitar" in music["evidence"]


def test_agent_traits_come_from_the_assistants_self_statements() -> None:
    out = OFF.complete(
        "persona_update",
        {
            "pages": [
                page(
                    "Who are you?",
                    "I am your travel assistant. I always answer briefly. Paris is nice.",
                )
            ],
            "trait_names": [],
        },
    )
    assert out["agent_traits"] == [
        "Assistant: I am your travel assistant.",
        "Assistant: I always answer briefly.",
    ]
    assert out["facts"] == []


def test_page_meta_detects_continuity_and_extends_the_chain() -> None:
    prev = page("Which boots should I buy for hiking the mountain trail?", "Stiff leather boots.")
    same = page(
        "Are those hiking boots good for a long mountain trail in rain?",
        "Yes, waterproof hiking boots work on wet trails.",
    )
    other = page("How do I bake sourdough bread?", "Feed your starter and bake hot.")
    cont = OFF.complete(
        "page_meta",
        {
            "page": same,
            "previous_page": prev,
            "previous_meta_chain": "User: asks about hiking boots.",
        },
    )
    assert cont["continues"] is True
    assert cont["meta_chain"].startswith("User: asks about hiking boots.")
    assert "hiking" in cont["keywords"] and "boots" in cont["keywords"]
    new = OFF.complete(
        "page_meta",
        {
            "page": other,
            "previous_page": prev,
            "previous_meta_chain": "User: asks about hiking boots.",
        },
    )
    assert new["continues"] is False
    assert "hiking" not in new["meta_chain"] and "sourdough" in new["meta_chain"]
    first = OFF.complete(
        "page_meta", {"page": other, "previous_page": None, "previous_meta_chain": ""}
    )
    assert first["continues"] is False


def test_segment_summary_is_extractive_with_keywords() -> None:
    pages = [
        page("I want to learn the violin.", "Start with open strings and a good teacher."),
        page("How long should I practise violin each day?", "Thirty minutes of violin daily."),
        page("Thanks!", "You're welcome."),
    ]
    out = OFF.complete("segment_summary", {"pages": pages})
    source = " ".join(p["query"] + " " + p["response"] for p in pages)
    sentences = out["summary"].split(". ")
    assert all(s.rstrip(".") in source for s in sentences)
    assert "violin" in out["summary"].lower() and "violin" in out["keywords"]
    assert "Thanks!" not in out["summary"]


def test_chat_reply_quotes_the_most_relevant_memory() -> None:
    ctx = "- User plays guitar in a jazz band\n- User lives in Lyon near the river\n- hi"
    out = OFF.complete("chat_reply", {"context": ctx, "query": "Where do I live?"})
    assert "Lyon" in out["reply"]
    empty = OFF.complete("chat_reply", {"context": "", "query": "Where do I live?"})
    assert empty["reply"]


def test_offline_answers_are_deterministic_and_valid() -> None:
    payload: dict[str, Any] = {
        "pages": [page("I like tea. I work nights.", "I can help.")],
        "trait_names": ["interest in food"],
    }
    a = OfflineBackend().complete("persona_update", payload)
    assert a == OfflineBackend().complete("persona_update", payload)
    assert validate_output("persona_update", a) == a
    assert OFF.name == OFFLINE_NAME == "offline (extractive, no LLM)"


class _CountingEmbedder(HashingEmbedder):
    """A hashing embedder that records every text it is asked to embed."""

    def __init__(self) -> None:
        super().__init__(256)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return super().embed(texts)


def _chained_one_by_one(backend: OfflineBackend, payload: dict[str, Any]) -> list[Any]:
    """page_meta_batch's documented meaning: each page's page_meta, chained to the last."""
    prev, chain, out = payload["previous_page"], payload["previous_meta_chain"], []
    for pg in payload["pages"]:
        meta = backend.complete(
            "page_meta", {"page": pg, "previous_page": prev, "previous_meta_chain": chain}
        )
        out.append(meta)
        prev, chain = pg, meta["meta_chain"]
    return out


_WORDS = ["I", "am", "from", "Lyon", ".", "my", "dog", "is", "Rex", "!", "tennis", "why", "?"]
_TEXT = st.lists(st.sampled_from(_WORDS), max_size=25).map(" ".join)
_PAGE = st.builds(page, _TEXT, _TEXT)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_PAGE, min_size=1, max_size=8),
    st.one_of(st.none(), _PAGE),
    st.sampled_from(["", "User: earlier words. Assistant: yes.", "A long chain. " * 60]),
)
def test_page_meta_batch_equals_page_by_page_meta(
    pages: list[dict[str, str]], prev: dict[str, str] | None, chain: str
) -> None:
    payload = {"pages": pages, "previous_page": prev, "previous_meta_chain": chain}
    assert OFF.complete("page_meta_batch", payload)["pages"] == _chained_one_by_one(
        OfflineBackend(), payload
    )


def test_page_meta_batch_embeds_each_page_once_in_one_call() -> None:
    emb = _CountingEmbedder()
    backend = OfflineBackend(embedder=emb)
    pages = [page(f"Do you like tennis number {i}", "Yes, I play tennis.") for i in range(6)]
    backend.complete(
        "page_meta_batch",
        {"pages": pages, "previous_page": page("tennis again", "sure"), "previous_meta_chain": ""},
    )
    # Single-sentence pages need no sentence centrality: only continuity embeds.
    assert len(emb.calls) == 1
    assert sorted(emb.calls[0]) == sorted(
        ["tennis again sure", *(f"{p['query']} {p['response']}" for p in pages)]
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(_PAGE, min_size=2, max_size=12), st.integers(1, 6))
def test_a_backend_that_met_the_texts_before_answers_as_a_fresh_one(
    pages: list[dict[str, str]], step: int
) -> None:
    # A segment's summary is asked for again as it grows, and each meta batch compares its
    # first page with the last one before: the features of texts met before are kept.
    warm = OfflineBackend()
    for end in range(step, len(pages) + 1, step):
        grown = {"pages": pages[:end]}
        assert warm.complete("segment_summary", grown) == OfflineBackend().complete(
            "segment_summary", grown
        )
        batch = {
            "pages": pages[end - step : end],
            "previous_page": pages[end - step - 1] if end > step else None,
            "previous_meta_chain": "earlier",
        }
        assert warm.complete("page_meta_batch", batch) == OfflineBackend().complete(
            "page_meta_batch", batch
        )


def test_a_growing_segments_summary_embeds_only_its_new_sentences() -> None:
    emb = _CountingEmbedder()
    backend = OfflineBackend(embedder=emb)
    pages = [
        page(f"I planted {kind} seeds today. They need sun.", f"Water the {kind} daily.")
        for kind in ("tomato", "basil", "pepper", "mint")
    ]
    backend.complete("segment_summary", {"pages": pages[:3]})
    backend.complete("segment_summary", {"pages": pages})
    # "They need sun." was met before too: only the texts never met are embedded.
    assert emb.calls[1] == ["I planted mint seeds today.", "Water the mint daily."]
    assert sum(len(c) for c in emb.calls) == len({t for c in emb.calls for t in c})


def test_the_memo_is_bounded_and_holds_no_text(monkeypatch: Any) -> None:
    import memoryos_actors.gateway.offline as offline

    monkeypatch.setattr(offline, "_MEMO_MAX", 8)
    backend = OfflineBackend()
    for i in range(40):
        backend.complete(
            "segment_summary",
            {"pages": [page(f"Secret plan {i}. Step one.", f"Noted {i}. Fine."), page("a", "b")]},
        )
        assert len(backend._rows) <= 8 and len(backend._counts) <= 8
    assert all(isinstance(k, bytes) and b"Secret" not in k for k in backend._rows)
