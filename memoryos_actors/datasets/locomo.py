"""Read the LoCoMo conversation data set into pages and evidence-labelled questions.

LoCoMo (Maharana et al., ACL 2024) is a JSON list of samples, each a long conversation
between two speakers split into sessions (``session_<n>``, a list of turns with
``speaker``, ``dia_id``, ``text`` and optionally ``blip_caption``; ``session_<n>_date_time``
such as ``"1:56 pm on 8 May, 2023"``) plus questions (``qa``) that name the turns answering
them (``evidence``, ``D<session>:<turn>``). The data set is not shipped with this package.

Pages. Speaker A plays the user and speaker B the assistant. Within a session, an A turn
followed by a B turn becomes one page (query = A's text, response = B's text). A turn that
cannot be paired that way still becomes a page with the other side empty: a B turn that
opens a session (or follows another B turn) gives ``query=""``, an A turn at a session's end
(or followed by another A turn) gives ``response=""``. Image turns get
``" [image: <blip_caption>]"`` appended to their text. A page covers the dia_ids of its
turns. Pages are timestamped at their session's start plus
:data:`TURN_SPACING_SECONDS` per turn, so order is strict.

Everything here is pure (no memory system, no clock): ``memoryos ingest`` and the recall
benchmark in the repository's ``bench/`` folder share it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import DatasetError

__all__ = [
    "CATEGORY_NAMES",
    "QUESTION_DELAY_SECONDS",
    "TURN_SPACING_SECONDS",
    "Conversation",
    "DatasetError",
    "EvidenceRepair",
    "LoCoMoPage",
    "Question",
    "build_pages",
    "load_conversation",
    "load_locomo",
    "parse_session_datetime",
    "repair_evidence",
]

CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""LoCoMo question categories, as numbered in the data set."""

TURN_SPACING_SECONDS = 30.0
"""Seconds between consecutive turns of a session (turns carry no time of their own)."""

QUESTION_DELAY_SECONDS = 86_400.0
"""Questions are asked this long (seconds) after a conversation's last page."""

_MONTHS = {
    name: number
    for number, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
_DATE_RE = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE,
)
_SESSION_KEY_RE = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT_RE = re.compile(r"[;,\s]+")
_EVIDENCE_ID_RE = re.compile(r"^D:?(\d+):(\d+)$")


@dataclass(frozen=True, slots=True)
class LoCoMoPage:
    """One page: a speaker-A turn and the speaker-B turn answering it.

    ``index`` is the page's position in its conversation (from 0); ``timestamp`` is seconds
    since the Unix epoch (UTC); ``dia_ids`` are the LoCoMo turn ids the page covers.
    """

    index: int
    session: int
    query: str
    response: str
    timestamp: float
    dia_ids: tuple[str, ...]

    @property
    def text(self) -> str:
        """Query and response as one text (newline-separated; an empty side is left out)."""
        return "\n".join(part for part in (self.query, self.response) if part)


@dataclass(frozen=True, slots=True)
class EvidenceRepair:
    """The result of repairing one question's raw evidence list.

    ``ids`` are the resolved turn ids in first-seen order without duplicates.
    ``repaired`` counts raw strings that were not a turn id as given but yielded one after
    repair. ``unresolvable`` are well-formed ids naming no turn of the conversation;
    ``malformed`` are fragments that are not ids at all (such as ``"D"``). Both are dropped.
    """

    ids: tuple[str, ...]
    repaired: int
    unresolvable: tuple[str, ...]
    malformed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Question:
    """One question that is asked: it has at least one resolved evidence turn."""

    question: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo sample turned into pages and askable questions.

    ``question_timestamp`` (seconds since the epoch) is when the questions are asked.
    ``evidence`` holds the repair counts for this conversation (see :func:`load_conversation`).
    """

    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: int
    turns: int
    pages: tuple[LoCoMoPage, ...]
    questions: tuple[Question, ...]
    questions_total: int
    question_timestamp: float
    evidence: Mapping[str, Any] = field(default_factory=dict)


def parse_session_datetime(text: str) -> float:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` (UTC) to epoch seconds.

    Month names are matched in English regardless of the process locale.

    Raises:
        ValueError: the text is not in that form or names no real date.
    """
    match = _DATE_RE.match(text)
    if match is None:
        raise ValueError(f"unrecognised session date/time {text!r}")
    hour, minute, half, day, month_name, year = match.groups()
    month = _MONTHS.get(month_name.lower())
    if month is None:
        raise ValueError(f"unknown month {month_name!r} in {text!r}")
    hour_12 = int(hour)
    if not 1 <= hour_12 <= 12:
        raise ValueError(f"hour out of range in {text!r}")
    hour_24 = hour_12 % 12 + (12 if half.lower() == "p" else 0)
    moment = _dt.datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=_dt.UTC)
    return moment.timestamp()


def repair_evidence(raw: Iterable[str], known_ids: Iterable[str]) -> EvidenceRepair:
    """Turn a question's raw evidence strings into turn ids of the conversation.

    Each raw string is split on ``;``, ``,`` and whitespace (``"D8:6; D9:17"`` holds two
    ids); ``"D:11:26"`` becomes ``"D11:26"``; leading zeros go (``"D30:05"`` -> ``"D30:5"``).
    Empty fragments are skipped silently; fragments that are not ids and ids naming no turn
    are dropped and reported.
    """
    known = known_ids if isinstance(known_ids, (set, frozenset)) else set(known_ids)
    ids: list[str] = []
    repaired = 0
    unresolvable: list[str] = []
    malformed: list[str] = []
    for raw_string in raw:
        if raw_string in known:
            if raw_string not in ids:
                ids.append(raw_string)
            continue
        found_any = False
        for fragment in _EVIDENCE_SPLIT_RE.split(str(raw_string)):
            if not fragment:
                continue
            match = _EVIDENCE_ID_RE.match(fragment)
            if match is None:
                malformed.append(fragment)
                continue
            turn_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if turn_id not in known:
                unresolvable.append(turn_id)
                continue
            found_any = True
            if turn_id not in ids:
                ids.append(turn_id)
        if found_any:
            repaired += 1
    return EvidenceRepair(tuple(ids), repaired, tuple(unresolvable), tuple(malformed))


def _turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text", ""))
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [image: {caption.strip()}]"
    return text


def build_pages(
    sessions: Sequence[tuple[int, float, Sequence[Mapping[str, Any]]]],
    speaker_a: str,
    speaker_b: str,
    *,
    turn_spacing: float = TURN_SPACING_SECONDS,
) -> list[LoCoMoPage]:
    """Pair the turns of ``sessions`` (``(number, start_seconds, turns)``, in order) into pages.

    See the module docstring for the pairing rule. A page's timestamp is its session start
    plus ``turn_spacing`` seconds per turn before its first turn; if a session would start
    at or before the previous page (clock skew in the data), it is pushed just after it so
    page timestamps always increase.
    """
    pages: list[LoCoMoPage] = []
    last_timestamp = float("-inf")
    for number, start, turns in sessions:
        position = 0
        while position < len(turns):
            turn = turns[position]
            timestamp = max(start + turn_spacing * position, last_timestamp + turn_spacing)
            speaker = turn.get("speaker")
            following = turns[position + 1] if position + 1 < len(turns) else None
            dia_ids: tuple[str, ...]
            if (
                speaker == speaker_a
                and following is not None
                and following.get("speaker") == speaker_b
            ):
                query, response = _turn_text(turn), _turn_text(following)
                dia_ids = (str(turn["dia_id"]), str(following["dia_id"]))
                position += 2
            elif speaker == speaker_a:
                query, response = _turn_text(turn), ""
                dia_ids = (str(turn["dia_id"]),)
                position += 1
            else:
                # Speaker B without a preceding A turn (or an unknown speaker): the words
                # were said, so they are memory too; only the user side is empty.
                query, response = "", _turn_text(turn)
                dia_ids = (str(turn["dia_id"]),)
                position += 1
            pages.append(LoCoMoPage(len(pages), number, query, response, timestamp, dia_ids))
            last_timestamp = timestamp
    return pages


def load_conversation(sample: Mapping[str, Any]) -> Conversation:
    """Build a :class:`Conversation` from one LoCoMo sample (one element of the JSON list).

    Sessions are the ``session_<n>`` keys whose value is a list, in numeric order; a
    ``session_<n>_date_time`` without such a list is ignored. Questions keep their order;
    those with no resolvable evidence are not asked (counted in ``evidence``).

    Raises:
        DatasetError: a required field is missing or a session date cannot be parsed.
    """
    try:
        sample_id = str(sample["sample_id"])
        body = sample["conversation"]
        speaker_a = str(body["speaker_a"])
        speaker_b = str(body["speaker_b"])
    except (KeyError, TypeError) as exc:
        raise DatasetError(f"LoCoMo sample lacks a required field: {exc}") from exc
    numbers = sorted(
        int(match.group(1))
        for key, value in body.items()
        if (match := _SESSION_KEY_RE.match(key)) and isinstance(value, list)
    )
    sessions: list[tuple[int, float, Sequence[Mapping[str, Any]]]] = []
    for number in numbers:
        date_key = f"session_{number}_date_time"
        try:
            start = parse_session_datetime(str(body[date_key]))
        except (KeyError, ValueError) as exc:
            raise DatasetError(
                f"{sample_id}: session {number} has no usable {date_key}: {exc}"
            ) from exc
        sessions.append((number, start, body[f"session_{number}"]))
    pages = build_pages(sessions, speaker_a, speaker_b)
    known = {dia_id for page in pages for dia_id in page.dia_ids}
    known_raw = set(known)
    raw_ids = raw_not_matching = repaired = ids_after = no_evidence = 0
    unresolvable: list[str] = []
    malformed: list[str] = []
    questions: list[Question] = []
    qa = sample.get("qa", [])
    for item in qa:
        raw = [str(value) for value in item.get("evidence", [])]
        raw_ids += len(raw)
        raw_not_matching += sum(1 for value in raw if value not in known_raw)
        result = repair_evidence(raw, known)
        repaired += result.repaired
        ids_after += len(result.ids)
        unresolvable.extend(result.unresolvable)
        malformed.extend(result.malformed)
        if not result.ids:
            no_evidence += 1
            continue
        questions.append(Question(str(item["question"]), int(item["category"]), result.ids))
    last = pages[-1].timestamp if pages else 0.0
    return Conversation(
        sample_id=sample_id,
        speaker_a=speaker_a,
        speaker_b=speaker_b,
        sessions=len(sessions),
        turns=sum(len(turns) for _, _, turns in sessions),
        pages=tuple(pages),
        questions=tuple(questions),
        questions_total=len(qa),
        question_timestamp=last + QUESTION_DELAY_SECONDS,
        evidence={
            "raw_ids": raw_ids,
            "raw_not_matching_a_turn": raw_not_matching,
            "repaired_strings": repaired,
            "ids_after_repair": ids_after,
            "unresolvable": unresolvable,
            "malformed": malformed,
            "questions_without_evidence": no_evidence,
        },
    )


def load_locomo(path: str | os.PathLike[str], limit: int | None = None) -> list[Conversation]:
    """Load the LoCoMo JSON at ``path``; ``limit`` keeps only the first N conversations.

    Raises:
        DatasetError: the file is missing, not valid JSON (the message gives the line and
            column), or not a LoCoMo-shaped list of samples (the message names the sample).
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{file}: no such file")
    try:
        samples = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{file}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise DatasetError(f"{file}: nested too deeply to be LoCoMo samples") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{file}: cannot read: {exc}") from exc
    if not isinstance(samples, list):
        raise DatasetError(
            f"{file}: expected a JSON list of LoCoMo samples, got a {type(samples).__name__}"
        )
    if limit is not None:
        samples = samples[: max(limit, 0)]
    conversations: list[Conversation] = []
    for number, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise DatasetError(
                f"{file}: sample {number} is a {type(sample).__name__}, not an object"
            )
        try:
            conversations.append(load_conversation(sample))
        except DatasetError as exc:
            raise DatasetError(f"{file}: sample {number}: {exc}") from None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A turn or question of the wrong shape deep inside the sample.
            raise DatasetError(
                f"{file}: sample {number}: malformed ({type(exc).__name__}: {exc})"
            ) from None
    return conversations
