"""The offline backend: deterministic, extractive answers for every prompt kind, no network.

It is the default (so the library works with no API key) and the fallback when a provider
is down. It does not pretend to be a language model: summaries are sentences picked from
the dialogue, facts are first-person statements rewritten in the third person, traits come
from keyword cues. Its :attr:`name` says so.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from memoryos_actors import smallvec
from memoryos_actors.gateway.base import BackendResult
from memoryos_actors.gateway.embedders import HashingEmbedder
from memoryos_actors.gateway.prompts import validate_output, validate_payload
from memoryos_actors.text import (
    STOPWORDS,
    keyword_counts,
    keywords,
    split_sentences,
    tokenize,
    top_keywords,
)

__all__ = ["OFFLINE_NAME", "OfflineBackend"]

OFFLINE_NAME = "offline (extractive, no LLM)"

_CHAIN_MAX_CHARS = 600
_SNIPPET_CHARS = 200
_SUMMARY_SENTENCES = 3
#: Texts whose features (embedding row, token count, keyword counts) the backend keeps: a
#: segment's summary is asked for again as it grows, over the same sentences, and each
#: batch of page meta compares its first page with the last one of the batch before.
_MEMO_MAX = 4096

_T = TypeVar("_T")

# First-person statement openers -> third-person rewrite. Order matters: longer first.
_FACT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), r)
    for p, r in (
        (r"^(?:and |but |so |well,? |also,? )?i(?:'m| am) from\b", "User is from"),
        (r"^(?:and |but |so |well,? |also,? )?i(?:'m| am)\b", "User is"),
        (r"^(?:and |but |so |well,? |also,? )?i was born\b", "User was born"),
        (r"^(?:and |but |so |well,? |also,? )?i(?: really)? like\b", "User likes"),
        (r"^(?:and |but |so |well,? |also,? )?i(?: really)? love\b", "User loves"),
        (r"^(?:and |but |so |well,? |also,? )?i(?: really)? enjoy\b", "User enjoys"),
        (r"^(?:and |but |so |well,? |also,? )?i(?: really)? hate\b", "User hates"),
        (r"^(?:and |but |so |well,? |also,? )?i dislike\b", "User dislikes"),
        (r"^(?:and |but |so |well,? |also,? )?i prefer\b", "User prefers"),
        (r"^(?:and |but |so |well,? |also,? )?i work\b", "User works"),
        (r"^(?:and |but |so |well,? |also,? )?i live\b", "User lives"),
        (r"^(?:and |but |so |well,? |also,? )?i study\b", "User studies"),
        (r"^(?:and |but |so |well,? |also,? )?i(?:'ve| have)\b", "User has"),
        (
            r"^(?:and |but |so |well,? |also,? )?my (?P<what>[\w' -]{1,40}?) (?P<verb>is|are)\b",
            "User's {what} {verb}",
        ),
    )
)
# "I'm <word>" where <word> is a passing state, not a fact about the person.
_TRANSIENT = frozenset(
    [
        "sure",
        "not",
        "wondering",
        "curious",
        "asking",
        "thinking",
        "looking",
        "trying",
        "going",
        "just",
        "here",
        "back",
        "fine",
        "good",
        "glad",
        "sorry",
        "afraid",
        "okay",
        "ok",
        "ready",
        "done",
        "busy",
        "tired",
        "bored",
        "confused",
        "happy",
        "sad",
        "excited",
    ]
)
# Assistant self-statements that describe the assistant's persona.
_AGENT_RE = re.compile(
    r"^(?:as (?:an?|your) [\w -]{1,40},? i\b|i(?:'m| am) (?:an?|your)\b|i (?:always|usually|"
    r"try|prefer|like|love|enjoy|can|will)\b|i'll always\b)",
    re.IGNORECASE,
)
_NEGATIVE_RE = re.compile(
    r"\b(?:hate|hates|dislike|dislikes|can't stand|don't like|do not like|not into|never)\b",
    re.IGNORECASE,
)
# Concept word -> cue tokens. A trait whose name contains the concept (by 5-letter prefix)
# is cued by these tokens as well as by the words of its own name.
_CUE_LEXICON: dict[str, tuple[str, ...]] = {
    "music": ("guitar", "piano", "song", "songs", "band", "concert", "sing", "singing", "jazz"),
    "sport": (
        "football",
        "soccer",
        "basketball",
        "tennis",
        "running",
        "gym",
        "marathon",
        "swimming",
        "cycling",
        "workout",
    ),
    "travel": ("trip", "flight", "vacation", "abroad", "hiking", "journey", "tourism"),
    "food": ("cook", "cooking", "recipe", "restaurant", "pizza", "sushi", "baking", "cuisine"),
    "technology": (
        "computer",
        "programming",
        "code",
        "coding",
        "software",
        "python",
        "ai",
        "robot",
        "gadget",
        "tech",
    ),
    "science": ("physics", "chemistry", "biology", "research", "experiment", "astronomy"),
    "art": ("painting", "drawing", "museum", "sculpture", "design", "sketch"),
    "reading": ("book", "books", "novel", "novels", "reading", "literature", "poetry"),
    "film": ("movie", "movies", "cinema", "film", "films", "series", "netflix"),
    "game": ("gaming", "games", "videogame", "chess", "console"),
    "health": ("doctor", "medicine", "diet", "exercise", "sleep", "fitness"),
    "finance": ("money", "invest", "investing", "stock", "stocks", "budget", "savings"),
    "education": ("school", "university", "study", "studying", "exam", "course", "learn"),
    "family": (
        "mother",
        "father",
        "mom",
        "dad",
        "sister",
        "brother",
        "kids",
        "children",
        "wife",
        "husband",
    ),
    "social": ("friends", "party", "parties", "meetup", "people"),
    "pet": ("dog", "dogs", "cat", "cats", "puppy", "kitten"),
    "nature": ("garden", "gardening", "forest", "mountains", "ocean", "camping"),
    "fashion": ("clothes", "style", "outfit", "shoes"),
    "career": ("job", "work", "career", "promotion", "boss", "office"),
    "anxiety": ("anxious", "worried", "nervous", "stress", "stressed"),
    "curiosity": ("curious", "wonder", "why", "learn", "explore"),
    "extraversion": ("party", "friends", "outgoing", "talk", "social"),
    "humor": ("funny", "joke", "jokes", "laugh", "lol"),
}


def _stem(tok: str) -> str:
    """A very light English stemmer, enough to match "lives" with "live"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(tok) > len(suffix) + 3 and tok.endswith(suffix):
            return tok[: -len(suffix)]
    return tok


def _prefix(tok: str) -> str:
    return tok[:5]


def _load_trait_names() -> list[str]:
    """The 90 trait names of :data:`memoryos_actors.trait_table.TRAITS`, in table order."""
    from memoryos_actors.trait_table import TRAITS

    return [t.name for t in TRAITS]


def _page_text(page: Any) -> tuple[str, str]:
    if not isinstance(page, dict):
        return "", ""
    return str(page.get("query", "") or ""), str(page.get("response", "") or "")


def _digest(text: str) -> bytes:
    """A memo key for ``text`` (the text itself is not kept)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _memoised(table: dict[bytes, _T], text: str, compute: Callable[[str], _T]) -> _T:
    """``compute(text)``, kept in ``table`` under the text's digest (cleared when full)."""
    key = _digest(text)
    value = table.get(key)
    if value is None:
        value = compute(text)
        if len(table) >= _MEMO_MAX:
            table.clear()
        table[key] = value
    return value


def _token_count(text: str) -> int:
    return len(tokenize(text))


def _snip(text: str, limit: int = _SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


class OfflineBackend:
    """Extractive, deterministic answers for all prompt kinds (see the module docstring).

    ``continuity_threshold`` is the cosine + keyword-Jaccard score above which a page is
    taken to continue the previous page's topic. ``embedder`` is used for sentence
    centrality and continuity; it defaults to a local :class:`HashingEmbedder` so the
    backend never touches the network.
    """

    name = OFFLINE_NAME

    def __init__(
        self, *, embedder: HashingEmbedder | None = None, continuity_threshold: float = 0.3
    ) -> None:
        self._emb = embedder or HashingEmbedder(256)
        self.continuity_threshold = continuity_threshold
        self._trait_names: list[str] | None = None
        # Keyed by a digest of the text (no text is kept), bounded by clearing when full.
        # Each value depends on its text only, so an answer is the one computed afresh.
        self._rows: dict[bytes, np.ndarray] = {}
        self._counts: dict[bytes, dict[str, int]] = {}
        self._lengths: dict[bytes, int] = {}

    # -- protocol ---------------------------------------------------------------------

    def complete(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Answer ``kind`` for ``payload``; the result passes the kind's validator."""
        return self.call(kind, payload).data

    def call(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        """Like :meth:`complete`, wrapped as a zero-token :class:`BackendResult`."""
        validate_payload(kind, payload)
        return self.answer(kind, payload)

    def answer(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        """Like :meth:`call` for a payload the caller has validated already (the gateway
        service validates each one when it is submitted)."""
        handler = getattr(self, f"_{kind}")
        return BackendResult(validate_output(kind, handler(payload)))

    # -- kinds --------------------------------------------------------------------------

    def _page_meta(self, payload: dict[str, Any]) -> dict[str, Any]:
        return self._page_metas(
            [payload.get("page")],
            payload.get("previous_page"),
            str(payload.get("previous_meta_chain") or ""),
        )[0]

    def _page_meta_batch(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "pages": self._page_metas(
                list(payload.get("pages") or []),
                payload.get("previous_page"),
                str(payload.get("previous_meta_chain") or ""),
            )
        }

    def _page_metas(self, pages: list[Any], prev: Any, prev_chain: str) -> list[dict[str, Any]]:
        """The meta of each page of ``pages`` in order, each continuing the one before it
        (the first continues ``prev``, whose chain is ``prev_chain``).

        Each page's text is tokenised into keywords and embedded once, all in one
        embedding call: a page is compared with the page before it, so computing both per
        comparison did every page twice. Each row of an embedding depends only on its own
        text, so the answer is the one a page-by-page computation gives.
        """
        texts = [" ".join(_page_text(p)).strip() for p in pages]
        prev_text = " ".join(_page_text(prev)).strip() if prev else ""
        kws = [self._keywords(t) for t in texts]
        # Embeddings are needed only where a page and the page before it both have text.
        owners = [prev, *pages[:-1]]
        befores = [prev_text, *texts[:-1]]
        need = [bool(owners[i]) and bool(befores[i]) and bool(texts[i]) for i in range(len(texts))]
        rows: dict[int, int] = {}  # index into [prev_text, *texts] -> embedding row
        wanted: list[str] = []
        for i, ok in enumerate(need):
            if ok:
                for j in (i, i + 1):  # the page before it, and the page itself
                    if j not in rows:
                        rows[j] = len(wanted)
                        wanted.append(befores[i] if j == i else texts[i])
        emb = self._embed(wanted) if wanted else None
        out: list[dict[str, Any]] = []
        chain = prev_chain
        prev_kws = self._keywords(prev_text) if need and need[0] else frozenset()
        for i, page in enumerate(pages):
            q, r = _page_text(page)
            continues = False
            if need[i] and emb is not None:
                cos = smallvec.dot(emb[rows[i]], emb[rows[i + 1]])
                pk = prev_kws if i == 0 else kws[i - 1]
                union = kws[i] | pk
                jac = len(kws[i] & pk) / len(union) if union else 0.0
                continues = cos + jac > self.continuity_threshold
            entry = self._page_gist(q, r)
            chain = f"{chain} {entry}".strip() if continues and chain else entry
            if len(chain) > _CHAIN_MAX_CHARS:
                # Keep the most recent part of the chain: drop whole sentences from the front.
                sents = split_sentences(chain)
                while len(sents) > 1 and len(" ".join(sents)) > _CHAIN_MAX_CHARS:
                    sents.pop(0)
                chain = _snip(" ".join(sents), _CHAIN_MAX_CHARS)
            out.append({"continues": continues, "meta_chain": chain, "keywords": sorted(kws[i])})
        return out

    def _rerank(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Pages by the share of the query's keywords they hold, best first; equal shares
        keep the order they were given in (retrieval's own ranking)."""
        qk = {_stem(t) for t in keywords(str(payload.get("query") or ""))}
        pages = [p for p in payload.get("pages") or [] if isinstance(p, dict)]
        shares = []
        for position, page in enumerate(pages):
            pk = {_stem(t) for t in keywords(str(page.get("text") or ""))}
            shares.append((-len(qk & pk), position, page.get("id")))
        return {"order": [pid for _, _, pid in sorted(shares)]}

    def _page_gist(self, query: str, response: str) -> str:
        parts = []
        if query.strip():
            parts.append(f"User: {_snip(self._central(split_sentences(query), 1)[0])}")
        if response.strip():
            parts.append(f"Assistant: {_snip(self._central(split_sentences(response), 1)[0])}")
        return " ".join(parts)

    def _segment_summary(self, payload: dict[str, Any]) -> dict[str, Any]:
        pages = payload.get("pages") or []
        sentences: list[str] = []
        texts: list[str] = []
        for p in pages:
            q, r = _page_text(p)
            texts.append(f"{q} {r}")
            sentences.extend(split_sentences(q))
            sentences.extend(split_sentences(r))
        summary = " ".join(_snip(s) for s in self._central(sentences, _SUMMARY_SENTENCES))
        # The keywords of the texts joined by spaces, from each text's counts.
        counts: dict[str, int] = {}
        for text in texts:
            for tok, n in self._keyword_counts(text).items():
                counts[tok] = counts.get(tok, 0) + n
        return {
            "summary": summary or "(empty segment)",
            "keywords": sorted(top_keywords(counts)),
        }

    def _persona_update(self, payload: dict[str, Any]) -> dict[str, Any]:
        pages = payload.get("pages") or []
        user_sentences: list[str] = []
        agent_sentences: list[str] = []
        for p in pages:
            q, r = _page_text(p)
            user_sentences.extend(split_sentences(q))
            agent_sentences.extend(split_sentences(r))
        facts = _dedupe(f for s in user_sentences if (f := _fact(s)) is not None)
        agent = _dedupe(a for s in agent_sentences if (a := _agent_trait(s)) is not None)
        names = payload.get("trait_names") or [
            t.get("name") for t in payload.get("current_traits") or [] if isinstance(t, dict)
        ]
        names = [n for n in names if isinstance(n, str) and n]
        if not names:
            if self._trait_names is None:
                self._trait_names = _load_trait_names()
            names = self._trait_names
        return {
            "traits": _trait_levels(names, user_sentences),
            "facts": facts,
            "agent_traits": agent,
        }

    def _segment_persona(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {**self._segment_summary(payload), **self._persona_update(payload)}

    def _chat_reply(self, payload: dict[str, Any]) -> dict[str, Any]:
        query = str(payload.get("query") or "")
        lines = _memory_statements(str(payload.get("context") or ""), query)
        if not lines:
            return {"reply": _NOTHING_REPLY}
        e = self._emb.embed([query, *lines])
        qk = {_stem(t) for t in keywords(query)}
        overlap = [len(qk & {_stem(t) for t in keywords(ln)}) / max(1, len(qk)) for ln in lines]
        scores = e[1:] @ e[0] + np.array(overlap, dtype=np.float32)
        best = lines[int(np.argmax(scores))]
        return {"reply": f"{_QUOTE_OPENER} \u201c{_snip(best, 300)}\u201d"}

    # -- helpers ------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """The embedding of ``texts`` (a row each, as one embedder call gives), the rows of
        texts met lately taken from the memo."""
        memo = self._rows
        keys = [_digest(t) for t in texts]
        rows: list[np.ndarray | None] = [memo.get(k) for k in keys]
        # Each text not met yet once (a segment repeats its "Thanks!"s), in first order.
        missing: dict[bytes, str] = {}
        for key, text, row in zip(keys, texts, rows, strict=True):
            if row is None:
                missing.setdefault(key, text)
        if missing:
            fresh = self._emb.embed(list(missing.values()))
            found = {k: smallvec.cast(fresh[j], np.float32) for j, k in enumerate(missing)}
            if len(memo) + len(found) > _MEMO_MAX:
                memo.clear()
            if len(found) <= _MEMO_MAX:
                memo.update(found)
            rows = [found[k] if row is None else row for k, row in zip(keys, rows, strict=True)]
        # np.stack(rows), row by row: a few embeddings' copy is not worth letting go of
        # the interpreter lock for (see memoryos_actors.smallvec).
        out = np.empty((len(rows), self._emb.dim), dtype=np.float32)
        for i, row in enumerate(rows):
            smallvec.set_row(out, i, row)  # type: ignore[arg-type]
        return out

    def _keyword_counts(self, text: str) -> dict[str, int]:
        """:func:`~memoryos_actors.text.keyword_counts` of ``text`` (memoised; not to be
        changed by the caller)."""
        return _memoised(self._counts, text, keyword_counts)

    def _keywords(self, text: str) -> frozenset[str]:
        return top_keywords(self._keyword_counts(text))

    def _length(self, text: str) -> int:
        """How many tokens ``text`` has (memoised)."""
        return _memoised(self._lengths, text, _token_count)

    def _central(self, sentences: Sequence[str], n: int) -> list[str]:
        """The ``n`` sentences closest to the centroid, in their original order."""
        sentences = [s for s in sentences if s.strip()]
        if len(sentences) <= n:
            return list(sentences) or [""]
        e = self._embed(sentences)
        centroid = e.mean(axis=0)
        scores = e @ centroid
        # Prefer informative sentences: a one-word "Thanks!" can sit near any centroid.
        lengths = np.array([self._length(s) for s in sentences], dtype=np.float32)
        scores = scores * np.minimum(1.0, lengths / 6.0)
        top = sorted(np.argsort(-scores, kind="stable")[:n].tolist())
        return [sentences[i] for i in top]


_NOTHING_REPLY = "I don't have anything in memory about that yet."
_QUOTE_OPENER = "From what I remember:"
# A rendered context line may start with its time, "[2026-11-23 19:41] ", and may hold
# several "User: ... Assistant: ..." statements (a thread summary puts them on one line).
_STAMP = re.compile(r"^\[[^\]]{1,40}\]\s*")
_SPEAKER = re.compile(r"\b(?:User|Assistant):\s*")


def _memory_statements(context: str, query: str) -> list[str]:
    """What a reply may quote from a rendered memory context: each stored statement on its
    own, without the context's markdown headings, time stamps or speaker labels, and
    without earlier offline replies (quoting one would nest quotes of quotes) or questions
    (the user's own question is no memory of an answer)."""
    out: list[str] = []
    asked = " ".join(query.split()).casefold()
    for raw in context.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = _STAMP.sub("", line).strip(" -*\t")
        for part in _SPEAKER.split(line):
            text = part.strip(" -*\t")
            if (
                len(tokenize(text)) < 3
                or text.startswith((_QUOTE_OPENER, _NOTHING_REPLY))
                or text.endswith("?")
                or " ".join(text.split()).casefold() == asked
            ):
                continue
            out.append(text)
    return _dedupe(out)


def _dedupe(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for it in items:
        key = it.lower()
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _third_person(rest: str) -> str:
    rest = re.sub(r"\bmy\b", "their", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bmyself\b", "themselves", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bme\b", "them", rest, flags=re.IGNORECASE)
    rest = re.sub(r"\bI(?:'m| am)\b", "they are", rest)
    rest = re.sub(r"\bI\b", "they", rest)
    return rest


def _fact(sentence: str) -> str | None:
    """A third-person fact from a first-person statement, or None."""
    s = sentence.strip().strip("\"'")
    if not s or s.endswith("?"):
        return None
    for pattern, repl in _FACT_PATTERNS:
        m = pattern.match(s)
        if not m:
            continue
        rest = s[m.end() :].strip().rstrip(".!\u3002")
        words = tokenize(rest)
        if not words or words[0] in _TRANSIENT:
            return None
        head = repl.format(**m.groupdict()) if "{" in repl else repl
        return _snip(f"{head} {_third_person(rest)}".strip() + ".")
    return None


def _agent_trait(sentence: str) -> str | None:
    s = sentence.strip()
    if not s or s.endswith("?") or not _AGENT_RE.match(s):
        return None
    return _snip("Assistant: " + s.rstrip(".!") + ".")


@functools.lru_cache(maxsize=1024)
def _trait_cues(name: str) -> frozenset[str]:
    """The token prefixes that cue the trait ``name``: its own words' and, for a word that
    names a concept of the cue lexicon, that concept's cue words' (a pure function of the
    name, so each persona update does not work it out again for all 90 traits)."""
    name_toks = [t for t in tokenize(name) if t not in STOPWORDS and len(t) > 2]
    cues = {_prefix(t) for t in name_toks}
    for concept, extra in _CUE_LEXICON.items():
        if any(_prefix(t) == _prefix(concept) for t in name_toks):
            cues.update(_prefix(c) for c in extra)
    return frozenset(cues)


def _trait_levels(names: Sequence[str], user_sentences: Sequence[str]) -> list[dict[str, str]]:
    """Levels for traits cued in the user's sentences; traits with no cue are left out."""
    sent_tokens = [(s, {_prefix(t) for t in tokenize(s)}) for s in user_sentences]
    out: list[dict[str, str]] = []
    for name in names:
        cues = _trait_cues(name)
        if not cues:
            continue
        hits = [(s, len(cues & toks)) for s, toks in sent_tokens if cues & toks]
        if not hits:
            continue
        strength = sum(h for _, h in hits)
        negative = sum(h for s, h in hits if _NEGATIVE_RE.search(s))
        if negative * 2 > strength:
            level = "low"  # mostly mentioned to reject it: "I hate football"
        else:
            level = "high" if strength >= 3 else "medium"
        evidence = max(hits, key=lambda x: x[1])[0]
        out.append({"name": name, "level": level, "evidence": _snip(evidence)})
    return out
