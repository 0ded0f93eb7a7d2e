"""text.py helpers and prompts.py: templates, JSON repair, validation."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import InvalidInput
from memoryos_actors.gateway.prompts import (
    KINDS,
    PROMPTS,
    EchoedPrompt,
    MalformedOutput,
    check_answer,
    echo_reason,
    parse_answer,
    parse_json_object,
    render_messages,
    validate_output,
    validate_payload,
)
from memoryos_actors.text import STOPWORDS, keywords, split_sentences, tokenize


def test_tokenize_lowercases_and_keeps_contractions_and_unicode_words() -> None:
    assert tokenize("I’m in Zürich, I'M happy! 42 café_au") == [
        "i'm",
        "in",
        "zürich",
        "i'm",
        "happy",
        "42",
        "café",
        "au",
    ]


_WORDISH = st.text(
    alphabet=st.sampled_from(list("abcXYZ09_ '\u2019.\n-éÜ\u0130\u03a3")), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(_WORDISH)
def test_tokenize_is_each_word_match_with_its_apostrophe_folded(text: str) -> None:
    """The definition, match by match: runs of letters and digits (no underscore), joined
    by an apostrophe, of the lower-cased text, each typographic apostrophe folded."""
    word = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
    want = [m.group(0).replace("\u2019", "'") for m in word.finditer(text.lower())]
    assert tokenize(text) == want


def test_keywords_drop_stopwords_and_rank_by_frequency() -> None:
    kws = keywords("The guitar, the guitar and the jazz band. I love jazz guitar.", limit=2)
    assert kws == frozenset({"guitar", "jazz"})
    assert not (keywords("I am what I am and you are too") - STOPWORDS) - {"too"}


def test_keywords_limit_zero_is_empty() -> None:
    assert keywords("anything here", limit=0) == frozenset()


def test_split_sentences_keeps_punctuation_and_drops_blanks() -> None:
    assert split_sentences("One. Two!  Three?\n\nFour") == ["One.", "Two!", "Three?", "Four"]


def test_every_kind_has_a_versioned_template_that_shows_the_shape() -> None:
    assert set(KINDS) == {
        "page_meta",
        "page_meta_batch",
        "segment_summary",
        "persona_update",
        "segment_persona",
        "chat_reply",
        "rerank",
    }
    for kind, spec in PROMPTS.items():
        assert spec.version >= 1
        msgs = render_messages(kind, {k: "x" for k in spec.payload_keys})
        assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
        if spec.answer == "text":  # a chat reply: plain text, asked for in plain words
            assert kind == "chat_reply" and "JSON" not in msgs[0]["content"] + msgs[1]["content"]
            continue
        assert spec.shape in msgs[1]["content"] and f"Task: {kind}" in msgs[1]["content"]


@pytest.mark.parametrize(
    "raw",
    [
        '{"reply": "hi"}',
        '```json\n{"reply": "hi"}\n```',
        'Sure! Here you go: {"reply": "hi"} hope it helps',
        '{"reply": "hi",}',
        '```\n{"reply": "hi", }\n```',
    ],
)
def test_damaged_json_is_repaired(raw: str) -> None:
    assert validate_output("chat_reply", parse_json_object(raw)) == {"reply": "hi"}


def test_braces_inside_strings_do_not_confuse_the_extractor() -> None:
    assert parse_json_object('x {"reply": "a } b {"} y') == {"reply": "a } b {"}


@pytest.mark.parametrize("raw", ["", "no json here", "{broken", '["a list"]'])
def test_unrecoverable_answers_raise_malformed(raw: str) -> None:
    with pytest.raises(MalformedOutput):
        validate_output("chat_reply", parse_json_object(raw))


@pytest.mark.parametrize(
    "kind,data",
    [
        ("page_meta", {"continues": "maybe", "meta_chain": "", "keywords": []}),
        ("page_meta", {"meta_chain": "x", "keywords": []}),
        ("segment_summary", {"summary": "", "keywords": []}),
        ("persona_update", {"traits": [{"name": "x", "level": "extreme"}]}),
        ("persona_update", {"traits": "none"}),
        ("chat_reply", {"reply": 3}),
    ],
)
def test_answers_of_the_wrong_shape_are_rejected(kind: str, data: object) -> None:
    with pytest.raises(MalformedOutput):
        validate_output(kind, data)


def test_validation_normalises_keywords_and_levels() -> None:
    out = validate_output(
        "page_meta", {"continues": "true", "meta_chain": " c ", "keywords": ["Jazz", "jazz", " X "]}
    )
    assert out == {"continues": True, "meta_chain": "c", "keywords": ["jazz", "x"]}
    p = validate_output("persona_update", {"traits": [{"name": "n", "level": "HIGH"}]})
    assert p["traits"] == [{"name": "n", "level": "high", "evidence": ""}]
    assert p["facts"] == [] and p["agent_traits"] == []


def test_bad_payloads_are_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        validate_payload("nope", {})
    with pytest.raises(InvalidInput):
        validate_payload("chat_reply", {"query": "q"})
    with pytest.raises(InvalidInput):
        validate_payload("chat_reply", {"query": "q", "context": object()})
    validate_payload("page_meta", {"page": {}, "previous_meta_chain": ""})  # previous_page optional
    json.dumps(PROMPTS["page_meta"].shape)


def test_the_persona_prompt_lists_every_trait_name_with_its_category() -> None:
    from memoryos_actors.tiers.traits import TRAITS

    text = render_messages("persona_update", {"pages": []})[1]["content"]
    for t in TRAITS:
        assert t.name in text
    for category in {t.category for t in TRAITS}:
        assert f"- {category}: " in text


def test_trait_names_are_normalised_to_the_table_spelling() -> None:
    out = validate_output(
        "persona_update",
        {
            "traits": [
                {"name": "Sense of Humor", "level": "HIGH", "evidence": "jokes"},
                {"name": "food-and-cooking", "level": "low"},
            ]
        },
    )
    assert [(t["name"], t["level"]) for t in out["traits"]] == [
        ("sense_of_humor", "high"),
        ("food_and_cooking", "low"),
    ]


def test_a_batch_answer_with_the_wrong_number_of_pages_is_malformed() -> None:
    from memoryos_actors.gateway.prompts import check_answer

    payload = {
        "pages": [{"query": "a", "response": "b"}] * 3,
        "previous_page": None,
        "previous_meta_chain": "",
    }
    one = {"continues": False, "meta_chain": "c", "keywords": []}
    good = validate_output("page_meta_batch", {"pages": [one, one, one]})
    check_answer("page_meta_batch", payload, good)
    with pytest.raises(MalformedOutput):
        check_answer(
            "page_meta_batch", payload, validate_output("page_meta_batch", {"pages": [one, one]})
        )
    with pytest.raises(MalformedOutput):
        validate_output("page_meta_batch", {"pages": []})


# -- chat replies: plain text, echoes ------------------------------------------------------

CONTEXT = (
    "Facts about the user:\n- User lives in Lyon and works as a baker in the old town.\n"
    "- User has a red kite and flies it on Sundays at the beach with a sister called Anna."
)
CHAT = {"context": CONTEXT, "query": "Where do I fly my kite?"}


@pytest.mark.parametrize(
    ("raw", "reply"),
    [
        ("  You fly it at the beach, on Sundays.\n", "You fly it at the beach, on Sundays."),
        ('{"reply": "At the beach."}', "At the beach."),
        ('```json\n{"reply": "At the beach."}\n```', "At the beach."),
        # Braces in prose, or JSON with other keys, are the reply as written.
        ("Use {name} as a placeholder.", "Use {name} as a placeholder."),
        ('{"answer": "x"}', '{"answer": "x"}'),
    ],
)
def test_a_chat_reply_is_the_answers_plain_text_or_its_reply_field(raw: str, reply: str) -> None:
    assert parse_answer("chat_reply", raw) == {"reply": reply}


@pytest.mark.parametrize("raw", ["", "   \n", '{"reply": ""}', '{"reply": 3}'])
def test_an_empty_chat_reply_is_malformed(raw: str) -> None:
    with pytest.raises(MalformedOutput):
        parse_answer("chat_reply", raw)


def test_json_kinds_still_need_their_json() -> None:
    with pytest.raises(MalformedOutput):
        parse_answer("segment_summary", "A summary in prose.")
    assert parse_answer("segment_summary", '{"summary": "S", "keywords": ["K"]}') == {
        "summary": "S",
        "keywords": ["k"],
    }


def test_the_prompt_echoed_back_is_caught_by_its_lines_or_its_words() -> None:
    system, user = (m["content"] for m in render_messages("chat_reply", CHAT))
    for echo in (user, system, f"{system}\n\n{user}", "Memory context:\nnothing"):
        assert echo_reason(echo, CHAT) is not None, echo
        with pytest.raises(EchoedPrompt):
            check_answer("chat_reply", CHAT, {"reply": echo})
    # The memory context copied out word for word, without any header: most of it is
    # the prompt's own words, from several of its lines.
    copied = echo_reason(CONTEXT.replace("Facts about the user:", ""), CHAT)
    assert copied is not None and "word for word" in copied
    # A header of the memory context is the prompt's, not a reply's.
    with_header = {"context": "## Recent dialogue\nUser: hi", "query": "hello"}
    assert echo_reason("## Recent dialogue\nUser: hi", with_header) is not None


def test_a_reply_that_quotes_a_memory_or_the_users_words_is_no_echo() -> None:
    quoting = (
        "You told me you have a red kite and fly it on Sundays at the beach with a "
        "sister called Anna, so I would say the beach, weather permitting, as usual."
    )
    assert echo_reason(quoting, CHAT) is None
    # Saying again, word for word, what the assistant answered before (one line of the
    # recent dialogue) is a reply, if a repetitive one.
    before = (
        "Your kite is red and you fly it on Sundays at the beach near Brest with your "
        "sister Anna whenever the wind is strong enough to lift it."
    )
    again = {"context": f"## Recent dialogue\nUser: Where is my kite?\nAssistant: {before}"}
    assert echo_reason(before, {**again, "query": "Where is my kite?"}) is None
    assert echo_reason("At the beach.", CHAT) is None
    # A line of the prompt the user wrote in their own message is theirs to hear back.
    asks = {"context": "", "query": "What does 'Memory context:' mean?"}
    assert echo_reason("'Memory context:' is what I remember of you.", asks) is None
