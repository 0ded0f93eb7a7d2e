"""Request and response bodies of the HTTP API (pydantic models).

Their docstrings and field descriptions are the API's published documentation
(``/openapi.json``, ``/docs``): written for API users, in Markdown.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AddTurnRequest",
    "AddTurnResponse",
    "AddTurnsRequest",
    "AddTurnsResponse",
    "MAX_BATCH_TURNS",
    "AgentMemory",
    "AgentProfileBody",
    "ChatRequest",
    "ChatResponse",
    "ContextItemOut",
    "ErrorBody",
    "ErrorDetail",
    "FactOut",
    "ForgetResponse",
    "HealthResponse",
    "LLMHealth",
    "MemoriesResponse",
    "MemoryCorrection",
    "MemoryEventOut",
    "MemoryHistoryResponse",
    "MemoryOut",
    "PageOut",
    "ReadyResponse",
    "RememberRequest",
    "RememberResponse",
    "ShardState",
    "RetrieveRequest",
    "RetrieveResponse",
    "SegmentOut",
    "TraitOut",
    "UserProfileBody",
    "UsersResponse",
]

#: Largest ``top_k`` a retrieve request may ask for, items per tier.
MAX_TOP_K = 100
_NEXT = "Pass it as `cursor` to get the next page of the listing; null on the last page."
_USER = "The user, as named in the request."
_ASSISTANT = "The assistant (default: `default`)."
_SECONDS = "Seconds since the epoch."
_EXTRAS = "Further free-form fields, name to text."


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AddTurnRequest(_In):
    """One turn: what the user said and what the assistant answered."""

    query: str = Field("", description="The user's message (UTF-8, at most max_text_bytes).")
    response: str = Field(
        "",
        description="The assistant's answer (UTF-8, at most "
        "max_text_bytes). A turn needs a query or a response.",
    )
    timestamp: float | None = Field(
        None, description="When the turn happened, seconds since the epoch; default: now."
    )
    assistant_id: str = Field("default", description="Which assistant answered.")
    turn_key: str | None = Field(
        None,
        description="Idempotency key (at most 200 bytes of UTF-8): a "
        "turn sent again with the key of one of the user's recent "
        "turns is stored once; the reply names the first page.",
    )


class AddTurnResponse(BaseModel):
    """The turn is stored: it is in the user's write-ahead log and survives a crash."""

    user_id: str = Field(description=_USER)
    page_id: str = Field(
        description="Id of the stored page: `p` and the turn's sequence "
        "number for this user, e.g. `p12` (its memory id is `page:p12`)."
    )


#: Most turns one batch may carry (the body's byte limit applies as well).
MAX_BATCH_TURNS = 1000


class AddTurnsRequest(_In):
    """Several turns of one user, stored in order."""

    turns: list[AddTurnRequest] = Field(
        min_length=1,
        max_length=MAX_BATCH_TURNS,
        description=f"The turns, oldest first (1..{MAX_BATCH_TURNS}; each as in Add a turn).",
    )


class AddTurnsResponse(BaseModel):
    """Every turn of the batch is stored (in the user's write-ahead log)."""

    user_id: str = Field(description=_USER)
    page_ids: list[str] = Field(description="The stored pages' ids, in the batch's order.")


class RetrieveRequest(_In):
    """What to look up in the user's memory."""

    query: str = Field(description="The text to retrieve memory for.")
    assistant_id: str = Field(
        "default", description="The assistant whose persona and traits to include."
    )
    top_k: int = Field(
        10,
        ge=1,
        le=MAX_TOP_K,
        description=f"At most this many items per section of the answer (1..{MAX_TOP_K}).",
    )


class ContextItemOut(BaseModel):
    """One retrieved item with its provenance."""

    tier: Literal["stm", "mtm", "lpm", "archive"] = Field(
        description="Where it was found: stm (recent dialogue), mtm (mid-term topic "
        "segments), lpm (long-term persona: facts and traits) or archive."
    )
    kind: str = Field(description="page, segment, fact or agent_trait.")
    item_id: str = Field(description="Its id within its kind, e.g. `p12`, `s3`, `f7`.")
    text: str = Field(description="Its content as shown to the LLM.")
    score: float = Field(
        description="Relevance to the query (higher is closer; recent dialogue scores 1)."
    )
    segment_id: str | None = Field(None, description="The topic segment holding a page.")
    timestamp: float | None = Field(None, description=_SECONDS)
    why: str = Field("", description="How the item was chosen.")


class TraitOut(BaseModel):
    """A user trait that has a level."""

    name: str = Field(description="The trait's name, one of 90 (e.g. `sense_of_humor`).")
    category: str = Field(description="Its group of traits.")
    level: str | None = Field(description="low, medium or high.")
    evidence: str = Field(description="What the level is based on.")
    memory_id: str | None = Field(None, description="`trait:<name>` (in memory listings).")


class RetrieveResponse(BaseModel):
    """Everything retrieved for one query, and the same as prompt text."""

    user_id: str = Field(description=_USER)
    assistant_id: str = Field(description=_ASSISTANT)
    query: str = Field(description="The query, as sent.")
    stm: list[ContextItemOut] = Field(description="The most recent turns, oldest first.")
    mtm: list[ContextItemOut] = Field(
        description="Earlier turns relevant to the query, best first."
    )
    segments: list[ContextItemOut] = Field(
        description="Summaries of the topic segments those turns belong to."
    )
    kb: list[ContextItemOut] = Field(description="Facts learned about the user, best first.")
    agent_traits: list[ContextItemOut] = Field(
        description="What the assistant learned about itself with this user."
    )
    traits: list[TraitOut] = Field(description="The user's traits that have a level.")
    profile: dict[str, Any] = Field(description="The user's static profile.")
    agent_profile: dict[str, Any] = Field(description="The assistant's static persona.")
    rendered: str = Field(description="The context as prompt text, in sections.")
    elapsed_ms: float = Field(description="Time retrieval took, milliseconds.")


class ChatRequest(_In):
    """A message to answer from memory."""

    query: str = Field(description="The user's message.")
    assistant_id: str = Field("default", description="The assistant that answers.")


class ChatResponse(BaseModel):
    """The reply; the turn (query and reply) is stored."""

    user_id: str = Field(description=_USER)
    reply: str = Field(description="The assistant's answer (stored with the query as a turn).")
    degraded: bool = Field(
        False,
        description="True when the configured LLM was unavailable (5xx answers, "
        "timeouts, its circuit breaker open) and the offline fallback wrote the reply.",
    )
    reason: str | None = Field(
        None,
        description='Why the reply is degraded, e.g. "provider unavailable: '
        'InternalServerError (HTTP 500)"; null when it is not.',
    )


class UserProfileBody(_In):
    """Static facts about the user."""

    name: str | None = Field(None, description="The user's name.")
    gender: str | None = Field(None, description="The user's gender, as the user gives it.")
    birth_year: int | None = Field(None, ge=1, le=9999, description="Year of birth.")
    extras: dict[str, str] = Field(default_factory=dict, description=_EXTRAS)


class AgentProfileBody(_In):
    """The assistant's persona as this user sees it."""

    role: str = Field(default="", description='What the assistant is, e.g. "a patient tutor".')
    character: str = Field(default="", description="How it behaves and talks.")
    extras: dict[str, str] = Field(default_factory=dict, description=_EXTRAS)


class PageOut(BaseModel):
    """A stored turn and where it is now."""

    page_id: str = Field(description="`p` and the turn's sequence number, e.g. `p12`.")
    memory_id: str = Field(description="`page:<page id>`: for the per-memory routes.")
    location: Literal["stm", "mtm", "archive"] = Field(
        description="Where the turn is now: stm (recent dialogue), mtm (a topic segment) "
        "or archive (evicted from mid-term memory, still listed and searchable)."
    )
    segment_id: str | None = Field(description="The topic segment holding it (mtm, archive).")
    assistant_id: str = Field(description="The assistant of the turn.")
    timestamp: float = Field(description=_SECONDS)
    query: str = Field(description="What the user said.")
    response: str = Field(description="What the assistant answered.")


class SegmentOut(BaseModel):
    """A topic segment (in MTM or evicted to the archive)."""

    segment_id: str = Field(description="e.g. `s3`.")
    memory_id: str = Field(description="`segment:<segment id>`.")
    location: Literal["mtm", "archive"] = Field(description="mtm, or archive once evicted.")
    heat: float = Field(
        description="How often and how recently the segment was used; "
        "the coldest segments are evicted to the archive first."
    )
    summary: str = Field(description="A summary of its turns.")
    keywords: list[str] = Field(description="Its keywords.")
    page_ids: list[str] = Field(description="Its turns, oldest first.")


class FactOut(BaseModel):
    """A fact in the user's knowledge base, or a trait of an assistant."""

    entry_id: str = Field(description="e.g. `f7` (a fact) or `a2` (an assistant trait).")
    memory_id: str = Field(description="`fact:<entry id>` or `agent_trait:<assistant>:<entry id>`.")
    text: str = Field(description="The fact or trait, one sentence.")
    timestamp: float = Field(description="When it was learned, " + _SECONDS.lower())
    source_segment: str | None = Field(None, description="The topic segment it was learned from.")
    origin: str = Field(
        "", description="`remembered` for a fact sent to be remembered, else empty."
    )
    metadata: dict[str, Any] | None = Field(
        None, description="The metadata a remembered fact was sent with (null: none)."
    )


class AgentMemory(BaseModel):
    """What the user's memory holds about one assistant."""

    profile: dict[str, Any] = Field(description="The assistant's persona for this user.")
    traits: list[FactOut] = Field(
        description="What the assistant learned about itself "
        "with this user (those in this page of the listing)."
    )


class MemoriesResponse(BaseModel):
    """One page of a user's memories, with ids and provenance."""

    user_id: str = Field(description=_USER)
    turns: int = Field(description="Turns stored so far.")
    pages: list[PageOut] = Field(description="Stored turns, oldest first.")
    segments: list[SegmentOut] = Field(description="Topic segments, oldest first.")
    kb: list[FactOut] = Field(description="Facts learned about the user, oldest first.")
    traits: list[TraitOut] = Field(description="The user's traits that have a level.")
    agents: dict[str, AgentMemory] = Field(description="Per assistant id: its persona and traits.")
    next_cursor: str | None = Field(None, description=_NEXT)


class UsersResponse(BaseModel):
    """One page of the tenant's users with stored data, sorted by id."""

    users: list[str] = Field(description="User ids.")
    next_cursor: str | None = Field(None, description=_NEXT)


class ForgetResponse(BaseModel):
    """What deleting a user removed."""

    user_id: str = Field(description=_USER)
    removed_files: int = Field(description="Files deleted.")
    was_active: bool = Field(
        description="Whether the user's memory was loaded when it was deleted."
    )


class LLMHealth(BaseModel):
    """How the configured LLM and embedder are doing (readiness only)."""

    state: Literal["offline", "ok", "degraded", "misconfigured"] = Field(
        description="offline: the offline backend, no provider; degraded: a circuit breaker "
        "is not closed, replies come from the offline fallback; misconfigured: a "
        "configuration error (key, model, base URL) since the last successful call."
    )
    backend: str = Field(
        description="The configured LLM, e.g. `offline` or a provider's model name."
    )
    breaker: dict[str, str] = Field(
        description="Circuit breaker state per operation (completion, embedding): closed, "
        "open or half_open."
    )
    last_error: str | None = Field(None, description="The last provider failure's reason.")
    last_error_age_seconds: float | None = Field(
        None, description="How long ago that failure was, seconds."
    )


class HealthResponse(BaseModel):
    """Liveness or readiness."""

    status: Literal["ok", "starting", "stopping"] = Field(
        description="ok: serving; starting or stopping: not accepting memory calls."
    )


class ShardState(BaseModel):
    """One shard of a server whose users are spread over shard processes."""

    shard: int = Field(description="The shard number.")
    state: Literal["up", "down", "not answering", "failed"] = Field(
        description="up: answering; down: its process died or is not running (it is being "
        "restarted); not answering: no answer within a second (starting, restarting or too "
        "busy); failed: it runs but cannot open its data directory."
    )
    pid: int | None = Field(None, description="Its process id, when it answered.")
    incarnation: int | None = Field(
        None, description="0 for its first start, 1 once it was restarted."
    )
    error: str | None = Field(None, description="Why it failed, for failed.")


class ReadyResponse(HealthResponse):
    """Readiness, with how the LLM provider and, over shards, each shard is doing."""

    status: Literal["ok", "starting", "stopping", "unavailable", "layout_changed"] = Field(  # type: ignore[assignment]
        description="ok: serving; starting or stopping: not accepting memory calls; "
        "unavailable: a shard is not up (see shards); layout_changed: the data directory "
        "was rebalanced while this front door ran: it routes nothing until restarted."
    )
    message: str | None = Field(None, description="For layout_changed: what changed.")
    shards: list[ShardState] | None = Field(
        None,
        description="Over shards only: each shard's state (asked at most once a second). "
        "A shard that is not up makes the server unready: its users' calls wait for it "
        "or answer 503.",
    )

    llm: LLMHealth | None = Field(
        None,
        description="The provider's state, while ready. A degraded or misconfigured "
        "provider does not make the server unready (memory calls still work).",
    )


class ErrorDetail(BaseModel):
    """What went wrong."""

    type: str = Field(description="Error class, e.g. InvalidInput, Unauthorized, RateLimited.")
    message: str = Field(description="What went wrong and, where it helps, what to do.")
    details: list[dict[str, Any]] | None = Field(
        None,
        description="For invalid input: one entry per problem, with the field "
        "(`loc`) and the `message`.",
    )


class ErrorBody(BaseModel):
    """Body of every error response."""

    error: ErrorDetail = Field(description="The error.")


class MemoryOut(BaseModel):
    """One memory of a user, where it is now and where it came from."""

    memory_id: str = Field(
        description="`page:p12`, `segment:s3`, `fact:f7`, "
        "`agent_trait:<assistant>:a2` or `trait:<name>`."
    )
    kind: Literal["page", "segment", "fact", "agent_trait", "trait"] = Field(
        description="What it is: a stored turn (page), a topic segment, a fact about the "
        "user, an assistant's trait, or a user trait."
    )
    tier: Literal["stm", "mtm", "archive", "lpm"] = Field(
        description="Where it is now: stm, mtm, archive or lpm (long-term persona)."
    )
    text: str = Field(
        description="A page's query and response on two lines, a segment's "
        "summary, a fact's or agent trait's sentence, a trait's level."
    )
    timestamp: float = Field(
        description="When it was stored or learned, seconds since the epoch (0 for a trait)."
    )
    assistant_id: str | None = Field(
        None, description="The assistant of a page or assistant trait."
    )
    segment_id: str | None = Field(None, description="The topic segment holding a page.")
    source_segment: str | None = Field(
        None, description="The segment a fact or assistant trait was learned from."
    )
    page_ids: list[str] = Field(
        default_factory=list, description="A segment's pages, oldest first."
    )
    evidence: str = Field("", description="A trait's evidence.")
    edited: bool = Field(False, description="Whether it was corrected since it was learned.")
    chain_id: str | None = Field(
        None, description="The dialogue chain of a page (turns that continue one conversation)."
    )
    origin: str = Field(
        "",
        description="How a fact came: `remembered` (sent to `POST /v1/users/{user_id}/memories`)"
        ", or empty (learned from the conversation).",
    )
    metadata: dict[str, Any] | None = Field(
        None, description="The metadata a remembered fact was sent with (null: none)."
    )


class RememberRequest(_In):
    """A free-text memory: a note or fact about the user, not taken from a turn."""

    text: str = Field(description="The memory (UTF-8, not blank, at most max_text_bytes).")
    metadata: dict[str, Any] | None = Field(
        None,
        description="Your data about it, a JSON object (at most 4 KB as JSON, nested at "
        "most 8 deep), returned with it.",
    )


class RememberResponse(BaseModel):
    """The memory is stored: it is in the user's write-ahead log and survives a crash."""

    user_id: str = Field(description=_USER)
    memory_id: str = Field(
        description="Its memory id, `fact:f<n>`: read, correct or delete it under "
        "`/v1/users/{user_id}/memories/{memory_id}`."
    )


class MemoryCorrection(_In):
    """A corrected value: a fact's or agent trait's sentence, or a trait's level."""

    value: str = Field(description="The new sentence; for a trait: low, medium or high.")
    evidence: str = Field("", description="A trait's evidence (optional).")


class MemoryEventOut(BaseModel):
    """One change of a memory."""

    memory_id: str = Field(description="The memory.")
    action: Literal["created", "changed", "corrected", "deleted"] = Field(
        description="created; changed (a persona update changed a trait); corrected (by "
        "this API); deleted."
    )
    at: float = Field(description="When, " + _SECONDS.lower())
    old: str | None = Field(
        description="The value before (null when created; the deleted "
        "text only in the answer to the delete itself)."
    )
    new: str | None = Field(description="The value after (null when deleted).")
    by: str = Field(
        description="What made the change: turn, segmentation, persona update "
        "of <segment>, edit (a call of this API), or deletion of <memory id> (the memory "
        "quoted a deleted turn and went with it)."
    )
    rewrote: list[str] = Field(
        default_factory=list,
        description="A deletion of a turn or segment: the memories that quoted it and went "
        "with it (facts and assistant traits deleted, traits set back or cleared, a "
        "corrected fact's old values erased, the segment whose summary was cleared and, "
        "in mid-term memory, asked for again). Empty otherwise.",
    )


class MemoryHistoryResponse(BaseModel):
    """One page of what changed a memory and when, oldest first."""

    user_id: str = Field(description=_USER)
    memory_id: str = Field(description="The memory.")
    events: list[MemoryEventOut] = Field(description="The changes, oldest first.")
    next_cursor: str | None = Field(None, description=_NEXT)
