"""Versioned prompt templates, one per prompt kind, with the JSON shape each must return.

Prompt kinds and their payloads (all strings are plain text):

``page_meta`` (version 1)
    payload ``{"page": {"query", "response"}, "previous_page": {"query", "response"} | None,
    "previous_meta_chain": str}`` -> ``{"continues": bool, "meta_chain": str,
    "keywords": [str]}``. One call does continuity, the dialogue-chain summary and keywords.
``page_meta_batch`` (version 1)
    payload ``{"pages": [{"query", "response"}, ...], "previous_page": {...} | None,
    "previous_meta_chain": str}`` -> ``{"pages": [page_meta answer, ...]}``, one entry per
    page in order (:func:`check_answer` checks the count): several consecutive pages of one
    user in one call, each with its own chain summary extending the one before.
``segment_summary`` (version 1)
    payload ``{"pages": [{"query", "response"}, ...]}`` -> ``{"summary": str,
    "keywords": [str]}``.
``persona_update`` (version 2)
    payload ``{"pages": [...], "current_traits": [{"name", "level"}, ...],
    "trait_names": [str] (optional)}`` -> ``{"traits": [{"name", "level", "evidence"}],
    "facts": [str], "agent_traits": [str]}``; ``level`` is one of ``low``, ``medium``,
    ``high``. The prompt lists the 90 trait names by category (the model cannot use a
    name it never saw); names are normalised to the table's spelling.
``segment_persona`` (version 1)
    payload ``{"pages": [...]}`` -> the ``segment_summary`` and ``persona_update`` answers in
    one object: a promoted segment that also owes its summary is asked once.
``chat_reply`` (version 2)
    payload ``{"context": str, "query": str}`` -> ``{"reply": str}``. The one kind the
    model answers in **plain text** (:attr:`PromptSpec.answer` is ``"text"``): the prompt
    gives the memory context and the user's message as text, asks for a plain reply, and
    never asks for JSON mode; the whole answer is the reply (a model that answers
    ``{"reply": "..."}`` anyway is unwrapped). An answer that echoes the prompt back
    (:func:`echo_reason`) is rejected.
``rerank`` (version 1)
    payload ``{"query": str, "pages": [{"id": int, "text": str}, ...]}`` -> ``{"order":
    [int]}``: the ids of the pages most useful to answer the query, best first (the
    ``rerank`` setting: retrieval's candidates reordered by the reader model). Repeats are
    dropped here; the caller ignores ids it did not ask about.

:func:`parse_answer` turns a model's text into the kind's validated dict:
:func:`validate_output` checks and normalises a parsed answer (lower-cased keywords,
stripped strings); :func:`parse_json_object` repairs the usual ways models break JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memoryos_actors.errors import InvalidInput

__all__ = [
    "KINDS",
    "PROMPTS",
    "TRAIT_LEVELS",
    "EchoedPrompt",
    "MalformedOutput",
    "check_answer",
    "PromptSpec",
    "echo_reason",
    "not_serialisable",
    "parse_answer",
    "parse_json_object",
    "render_messages",
    "trait_key",
    "validate_output",
    "validate_payload",
]

TRAIT_LEVELS: tuple[str, ...] = ("low", "medium", "high")

# Bound what a model may hand back, so one runaway answer cannot bloat stored state.
_MAX_KEYWORDS = 24
_MAX_ITEMS = 100
_MAX_TEXT = 8000


class MalformedOutput(ValueError):
    """A model's answer was not JSON of the expected shape, even after repair."""


class EchoedPrompt(MalformedOutput):
    """A model's answer repeats the prompt it was given instead of answering it (a weak
    model echoing the template back); the message says what gave it away."""


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """One prompt kind: its template version, instructions and expected JSON shape.

    ``shape`` is shown to the model verbatim; ``validate`` turns a parsed answer into the
    normalised dict or raises :class:`MalformedOutput`. ``answer`` is ``"json"`` (the
    model answers one JSON object of ``shape``; JSON mode is asked for where the provider
    has it) or ``"text"`` (the model answers in plain text, which becomes the dict's one
    field, ``shape``'s only key: ``chat_reply``). ``urgent`` kinds are waited on: a
    page's chain meta stands between the page and its placement (the user's settle lag,
    and its writers' admission, wait for it), a chat reply or a rerank between a caller and
    its answer. The provider's fair queue serves them ahead of the same user's background
    calls (summaries, persona updates).
    """

    kind: str
    version: int
    system: str
    shape: str
    payload_keys: tuple[str, ...]
    validate: Callable[[Any], dict[str, Any]]
    guide: Callable[[], str] | None = None
    answer: str = "json"
    urgent: bool = False

    def render(self, payload: dict[str, Any]) -> list[dict[str, str]]:
        """Chat messages (system + user) asking for this kind's answer for ``payload``.

        ``guide`` (when set) adds fixed reference text the model needs, such as the table
        of trait names a persona update may use.
        """
        if self.answer == "text":
            return [
                {"role": "system", "content": self.system},
                {"role": "user", "content": _chat_user_message(payload)},
            ]
        guide = f"{self.guide()}\n\n" if self.guide is not None else ""
        user = (
            f"Task: {self.kind} (prompt v{self.version}).\n"
            f"{guide}"
            f"Input (JSON):\n{json.dumps(payload, ensure_ascii=False, sort_keys=True)}\n\n"
            f"Answer with ONE JSON object of exactly this shape and nothing else:\n{self.shape}"
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------- validators


def _obj(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MalformedOutput(f"expected a JSON object, got {type(data).__name__}")
    return data


def _str(data: dict[str, Any], key: str, *, allow_empty: bool = True) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise MalformedOutput(f"field {key!r} must be a string")
    value = value.strip()[:_MAX_TEXT]
    if not allow_empty and not value:
        raise MalformedOutput(f"field {key!r} must not be empty")
    return value


def _str_list(data: dict[str, Any], key: str, limit: int, *, lower: bool = False) -> list[str]:
    value = data.get(key, [])
    if isinstance(value, str):  # a common slip: "a, b, c" instead of a list
        value = [v for v in re.split(r"[,;]", value)]
    if not isinstance(value, list):
        raise MalformedOutput(f"field {key!r} must be a list of strings")
    out: list[str] = []
    seen: set[str] = set()
    for item in value:
        if not isinstance(item, str):
            raise MalformedOutput(f"field {key!r} must contain only strings")
        item = item.strip()[:_MAX_TEXT]
        if lower:
            item = item.lower()
        if item and item not in seen:
            seen.add(item)
            out.append(item)
        if len(out) >= limit:
            break
    return out


def _validate_page_meta(data: Any) -> dict[str, Any]:
    d = _obj(data)
    continues = d.get("continues")
    if isinstance(continues, str) and continues.lower() in ("true", "false"):
        continues = continues.lower() == "true"
    if not isinstance(continues, bool):
        raise MalformedOutput("field 'continues' must be a boolean")
    return {
        "continues": continues,
        "meta_chain": _str(d, "meta_chain"),
        "keywords": _str_list(d, "keywords", _MAX_KEYWORDS, lower=True),
    }


def _validate_page_meta_batch(data: Any) -> dict[str, Any]:
    d = _obj(data)
    pages = d.get("pages")
    if not isinstance(pages, list) or not pages:
        raise MalformedOutput("field 'pages' must be a non-empty list")
    return {"pages": [_validate_page_meta(p) for p in pages[:_MAX_ITEMS]]}


def _validate_segment_summary(data: Any) -> dict[str, Any]:
    d = _obj(data)
    return {
        "summary": _str(d, "summary", allow_empty=False),
        "keywords": _str_list(d, "keywords", _MAX_KEYWORDS, lower=True),
    }


def _validate_persona_update(data: Any) -> dict[str, Any]:
    d = _obj(data)
    raw_traits = d.get("traits", [])
    if not isinstance(raw_traits, list):
        raise MalformedOutput("field 'traits' must be a list")
    traits: list[dict[str, str]] = []
    for t in raw_traits[:_MAX_ITEMS]:
        t = _obj(t)
        level = _str(t, "level").lower()
        if level not in TRAIT_LEVELS:
            raise MalformedOutput(f"trait level must be one of {TRAIT_LEVELS}, got {level!r}")
        evidence = t.get("evidence", "")
        if not isinstance(evidence, str):
            raise MalformedOutput("trait 'evidence' must be a string")
        traits.append(
            {
                "name": trait_key(_str(t, "name", allow_empty=False)),
                "level": level,
                "evidence": evidence.strip()[:_MAX_TEXT],
            }
        )
    return {
        "traits": traits,
        "facts": _str_list(d, "facts", _MAX_ITEMS),
        "agent_traits": _str_list(d, "agent_traits", _MAX_ITEMS),
    }


def trait_key(name: str) -> str:
    """A trait name as the trait table spells it: lower case, words joined by ``_``.

    Models write "Sense of humor" or "sense-of-humor" for ``sense_of_humor``.
    """
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


_TRAIT_GUIDE: str | None = None


def _trait_guide() -> str:
    """The 90 trait names the persona update may use, by category (built once)."""
    global _TRAIT_GUIDE
    if _TRAIT_GUIDE is None:
        from memoryos_actors.trait_table import TRAITS

        by_cat: dict[str, list[str]] = {}
        for t in TRAITS:
            by_cat.setdefault(t.category, []).append(t.name)
        lines = [
            "Trait names you may use (a name from this list, exactly as written; "
            "traits with any other name are ignored), by category:"
        ]
        lines.extend(f"- {cat}: {', '.join(names)}" for cat, names in by_cat.items())
        _TRAIT_GUIDE = "\n".join(lines)
    return _TRAIT_GUIDE


def _validate_segment_persona(data: Any) -> dict[str, Any]:
    return {**_validate_segment_summary(data), **_validate_persona_update(data)}


def _validate_chat_reply(data: Any) -> dict[str, Any]:
    return {"reply": _str(_obj(data), "reply", allow_empty=False)}


def _validate_rerank(data: Any) -> dict[str, Any]:
    order = _obj(data).get("order")
    if not isinstance(order, list):
        raise MalformedOutput("field 'order' must be a list of page ids")
    ids: list[int] = []
    for item in order[:_MAX_ITEMS]:
        # Models write ids as numbers or as numeric strings; anything else is no id.
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            ids.append(item)
        elif isinstance(item, str) and item.strip().isdigit():
            ids.append(int(item.strip()))
    return {"order": list(dict.fromkeys(ids))}


# ------------------------------------------------------------------------------ templates

_CHAT_SYSTEM = (
    "You are a helpful assistant with long-term memory of the user. Use what the memory "
    "context says when it is relevant to the user's message. Reply to the user directly, "
    "in plain text."
)
#: The section headers of the chat prompt: a reply that contains one echoes the prompt.
_CHAT_CONTEXT_HEADER = "Memory context:"
_CHAT_MESSAGE_HEADER = "User's message:"
_CHAT_CLOSING = "Your reply (plain text):"


def _chat_user_message(payload: dict[str, Any]) -> str:
    """The chat prompt's user message: the memory context and the user's message as text
    (not JSON: the model reads them as it would read a conversation)."""
    context = str(payload.get("context") or "").strip() or "(nothing remembered yet)"
    return (
        f"{_CHAT_CONTEXT_HEADER}\n{context}\n\n"
        f"{_CHAT_MESSAGE_HEADER}\n{payload.get('query') or ''}\n\n"
        f"{_CHAT_CLOSING}"
    )


_SYSTEM = (
    "You are the memory module of a conversational agent. You read dialogue and answer "
    "with strict JSON only: no prose, no markdown fences."
)

PROMPTS: dict[str, PromptSpec] = {
    "page_meta": PromptSpec(
        kind="page_meta",
        version=1,
        system=_SYSTEM,
        shape=(
            '{"continues": true|false  (does the new page continue the previous page\'s topic?),'
            ' "meta_chain": "one-paragraph summary of the dialogue chain including the new page'
            ' (extend previous_meta_chain if continues, else summarise the new page alone)",'
            ' "keywords": ["up to 12 lower-case topic keywords of the new page"]}'
        ),
        payload_keys=("page", "previous_page", "previous_meta_chain"),
        validate=_validate_page_meta,
        urgent=True,
    ),
    "page_meta_batch": PromptSpec(
        kind="page_meta_batch",
        version=1,
        system=_SYSTEM,
        shape=(
            '{"pages": [one object per input page, in the same order: {"continues": true|false'
            "  (does this page continue the topic of the page just before it; for the first"
            " page, previous_page),"
            ' "meta_chain": "one-paragraph summary of the dialogue chain up to and including'
            " this page (extend the chain before it if continues, else summarise this page"
            ' alone)", "keywords": ["up to 12 lower-case topic keywords of this page"]}]}'
        ),
        payload_keys=("pages", "previous_page", "previous_meta_chain"),
        validate=_validate_page_meta_batch,
        urgent=True,
    ),
    "segment_summary": PromptSpec(
        kind="segment_summary",
        version=1,
        system=_SYSTEM,
        shape=(
            '{"summary": "a few sentences summarising the pages\' shared topic",'
            ' "keywords": ["up to 12 lower-case topic keywords"]}'
        ),
        payload_keys=("pages",),
        validate=_validate_segment_summary,
    ),
    "persona_update": PromptSpec(
        kind="persona_update",
        version=2,
        system=_SYSTEM,
        shape=(
            '{"traits": [{"name": "a trait name from the list above", "level":'
            ' "low|medium|high", "evidence": "short quote from the user"}]  (only traits the'
            " pages show),"
            ' "facts": ["stable facts the user stated about themselves, third person"],'
            ' "agent_traits": ["what the assistant stated about itself"]}'
        ),
        payload_keys=("pages",),
        validate=_validate_persona_update,
        guide=_trait_guide,
    ),
    "segment_persona": PromptSpec(
        kind="segment_persona",
        version=1,
        system=_SYSTEM,
        shape=(
            '{"summary": "a few sentences summarising the pages\' shared topic",'
            ' "keywords": ["up to 12 lower-case topic keywords"],'
            ' "traits": [{"name": "a trait name from the list above", "level":'
            ' "low|medium|high", "evidence": "short quote from the user"}]  (only traits the'
            " pages show),"
            ' "facts": ["stable facts the user stated about themselves, third person"],'
            ' "agent_traits": ["what the assistant stated about itself"]}'
        ),
        payload_keys=("pages",),
        validate=_validate_segment_persona,
        guide=_trait_guide,
    ),
    "chat_reply": PromptSpec(
        kind="chat_reply",
        version=2,
        system=_CHAT_SYSTEM,
        shape='{"reply": "your reply to the query"}',
        payload_keys=("context", "query"),
        validate=_validate_chat_reply,
        answer="text",
        urgent=True,
    ),
    "rerank": PromptSpec(
        kind="rerank",
        version=1,
        system=_SYSTEM,
        shape=(
            '{"order": [the ids of the pages that help answer the query, the most useful'
            " first; leave out pages that do not help]}"
        ),
        payload_keys=("query", "pages"),
        validate=_validate_rerank,
        urgent=True,
    ),
}

KINDS: tuple[str, ...] = tuple(PROMPTS)


def _spec(kind: str) -> PromptSpec:
    try:
        return PROMPTS[kind]
    except KeyError:
        raise InvalidInput(f"unknown prompt kind {kind!r}; expected one of {KINDS}") from None


def validate_payload(kind: str, payload: Any, *, serialised: bool = False) -> None:
    """Raise :class:`InvalidInput` unless ``payload`` is a JSON-able dict for ``kind``.

    ``serialised=True`` skips the JSON check, for a caller that serialises the payload
    itself right after and reports a failure as :func:`not_serialisable` does.
    """
    spec = _spec(kind)
    if not isinstance(payload, dict):
        raise InvalidInput(f"{kind} payload must be a dict, got {type(payload).__name__}")
    missing = [k for k in spec.payload_keys if k not in payload and k != "previous_page"]
    if missing:
        raise InvalidInput(f"{kind} payload is missing {missing}")
    if serialised:
        return
    try:
        json.dumps(payload)
    except (TypeError, ValueError) as exc:
        raise not_serialisable(kind, exc) from None


def not_serialisable(kind: str, exc: Exception) -> InvalidInput:
    """The error for a ``kind`` payload that JSON cannot encode (``exc`` says why)."""
    return InvalidInput(f"{kind} payload is not JSON-serialisable: {exc}")


def check_answer(kind: str, payload: dict[str, Any], data: dict[str, Any]) -> None:
    """Checks of a validated answer that need the request: a batch answer must hold one
    entry per page asked about; a chat reply must not echo the prompt
    (:func:`echo_reason`). Raises :class:`MalformedOutput` (:class:`EchoedPrompt` for
    an echo)."""
    if kind == "page_meta_batch":
        want, got = len(payload.get("pages") or ()), len(data.get("pages") or ())
        if want != got:
            raise MalformedOutput(f"expected {want} page entries, got {got}")
    elif kind == "chat_reply":
        reason = echo_reason(str(data.get("reply") or ""), payload)
        if reason is not None:
            raise EchoedPrompt(reason)


#: Word n-grams compared by :func:`echo_reason`, the fewest words a reply needs before
#: its share of n-grams copied from the prompt is judged, and the share that is an echo.
_ECHO_GRAM = 6
_ECHO_MIN_WORDS = 24
_ECHO_SHARE = 0.7
_WORD_RE = re.compile(r"\w+")


def _flat(text: str) -> str:
    return " ".join(text.lower().split())


def echo_reason(reply: str, payload: dict[str, Any]) -> str | None:
    """Why ``reply`` is the chat prompt for ``payload`` echoed back rather than a reply,
    or None when it is a reply.

    Three signs, any one enough, each ignoring what the user's message itself contains:

    * the reply contains one of the template's own lines: its section headers
      (``Memory context:``, ``User's message:``), its closing line, or the first
      sentence of its system prompt;
    * a line of the reply is a section header of the memory context (``## Recent
      dialogue``, ``### Topic: ...``);
    * the reply is long (24 words or more), 70% or more of its 6-word runs appear word for
      word in the prompt, and they come from two lines of it or more: a reply may quote a
      memory, or say again what the assistant said before (one line of the context), but
      not be made of the prompt.
    """
    flat = _flat(reply)
    query = _flat(str(payload.get("query") or ""))
    markers = (
        _CHAT_CONTEXT_HEADER,
        _CHAT_MESSAGE_HEADER,
        _CHAT_CLOSING,
        _CHAT_SYSTEM.split(". ", 1)[0],
    )
    for marker in markers:
        line = _flat(marker)
        if line in flat and line not in query:
            return f"the reply repeats the prompt's line {marker!r}"
    prompt_lines = [
        line for m in render_messages("chat_reply", payload) for line in m["content"].splitlines()
    ]
    headers = {_flat(line) for line in prompt_lines if line.lstrip().startswith("#")}
    for line in reply.splitlines():
        if _flat(line) in headers and _flat(line) not in query:
            return f"the reply repeats the memory context's header {line.strip()!r}"
    words = _WORD_RE.findall(reply.lower())
    if len(words) < _ECHO_MIN_WORDS:
        return None
    n = _ECHO_GRAM
    known: dict[tuple[str, ...], int] = {}
    for number, line in enumerate(prompt_lines):
        line_words = _WORD_RE.findall(line.lower())
        for i in range(len(line_words) - n + 1):
            known.setdefault(tuple(line_words[i : i + n]), number)
    grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    copied = [known[g] for g in grams if g in known]
    share = len(copied) / len(grams)
    if share >= _ECHO_SHARE and len(set(copied)) >= 2:
        return f"{share:.0%} of the reply is copied word for word from the prompt"
    return None


def parse_answer(kind: str, text: str) -> dict[str, Any]:
    """A model's answer ``text`` to prompt ``kind`` as that kind's validated dict.

    A JSON kind: the first JSON object in it, repaired (:func:`parse_json_object`), then
    validated. A text kind (``chat_reply``): the whole text, stripped, is the reply; an
    answer that is nothing but a ``{"reply": "..."}`` object (fenced or not) is unwrapped,
    for a model used to answering in JSON. Raises :class:`MalformedOutput` (an empty
    answer, JSON of another shape).
    """
    spec = _spec(kind)
    if spec.answer != "text":
        return spec.validate(parse_json_object(text))
    if not isinstance(text, str) or not text.strip():
        raise MalformedOutput("empty answer")
    stripped = text.strip()
    fenced = _FENCE_RE.fullmatch(stripped)
    inner = (fenced.group(1) if fenced else stripped).strip()
    if inner.startswith("{") and inner.endswith("}"):
        try:
            obj = parse_json_object(inner)
        except MalformedOutput:
            obj = None
        if isinstance(obj, dict) and list(obj) == ["reply"]:
            return spec.validate(obj)
    return spec.validate({"reply": stripped})


def render_messages(kind: str, payload: dict[str, Any]) -> list[dict[str, str]]:
    """Chat messages for ``kind`` (see :meth:`PromptSpec.render`)."""
    return _spec(kind).render(payload)


def validate_output(kind: str, data: Any) -> dict[str, Any]:
    """Validate and normalise a parsed answer for ``kind``; raise :class:`MalformedOutput`."""
    return _spec(kind).validate(data)


_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")


def parse_json_object(text: str) -> Any:
    """Parse the first JSON object in a model's answer, repairing common damage.

    Repairs, in order: markdown code fences, prose around the object (the first balanced
    ``{...}`` is taken), trailing commas before ``}`` or ``]``. Raises
    :class:`MalformedOutput` when no object can be recovered.
    """
    if not isinstance(text, str) or not text.strip():
        raise MalformedOutput("empty answer")
    candidates: list[str] = []
    fenced = _FENCE_RE.search(text)
    if fenced:
        candidates.append(fenced.group(1))
    candidates.append(text)
    for candidate in candidates:
        obj_text = _first_object(candidate)
        if obj_text is None:
            continue
        for attempt in (obj_text, _TRAILING_COMMA_RE.sub(r"\1", obj_text)):
            try:
                return json.loads(attempt)
            except json.JSONDecodeError:
                continue
    raise MalformedOutput("no JSON object found in the answer")


def _first_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (string-literal aware), or None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        in_str = False
        escape = False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None
