"""Request and response bodies of the HTTP API (pydantic models; they make the OpenAPI page)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AddTurnRequest", "AddTurnResponse", "AgentMemory", "AgentProfileBody", "ChatRequest",
    "ChatResponse", "ContextItemOut", "ErrorBody", "ErrorDetail", "FactOut", "ForgetResponse",
    "HealthResponse", "LLMHealth", "MemoriesResponse", "MemoryCorrection", "MemoryEventOut",
    "MemoryHistoryResponse", "MemoryOut", "PageOut", "ReadyResponse", "RetrieveRequest",
    "RetrieveResponse",
    "SegmentOut", "TraitOut", "UserProfileBody", "UsersResponse",
]

#: Largest ``top_k`` a retrieve request may ask for, items per tier.
MAX_TOP_K = 100
_NEXT = ("Pass it as `cursor` to get the next page of the listing; null on the last page.")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AddTurnRequest(_In):
    """One turn: what the user said and what the assistant answered."""

    query: str = Field("", description="The user's message (UTF-8, at most max_text_bytes).")
    response: str = Field("", description="The assistant's answer (UTF-8, at most "
                          "max_text_bytes). A turn needs a query or a response.")
    timestamp: float | None = Field(None, description="When the turn happened, seconds since "
                                    "the epoch; default: now.")
    assistant_id: str = Field("default", description="Which assistant answered.")
    turn_key: str | None = Field(None, description="Idempotency key (at most 200 bytes of UTF-8): a "
                                 "turn sent again with the key of one of the user's recent "
                                 "turns is stored once; the reply names the first page.")


class AddTurnResponse(BaseModel):
    """The turn is in the user's write-ahead log."""

    user_id: str
    page_id: str = Field(description="Id of the stored page (p<seq>).")


class RetrieveRequest(_In):
    """What to look up in the user's memory."""

    query: str = Field(description="The text to retrieve memory for.")
    assistant_id: str = "default"
    top_k: int = Field(10, ge=1, le=MAX_TOP_K, description="At most this many items per "
                       f"section of the answer (1..{MAX_TOP_K}).")


class ContextItemOut(BaseModel):
    """One retrieved item with its provenance."""

    tier: Literal["stm", "mtm", "lpm", "archive"]
    kind: str = Field(description="page, segment, fact or agent_trait.")
    item_id: str
    text: str
    score: float
    segment_id: str | None = None
    timestamp: float | None = Field(None, description="Seconds since the epoch.")
    why: str = Field("", description="How the item was chosen.")


class TraitOut(BaseModel):
    """A user trait that has a level."""

    name: str
    category: str
    level: str | None
    evidence: str
    memory_id: str | None = Field(None, description="``trait:<name>`` (memory listings).")


class RetrieveResponse(BaseModel):
    """Everything retrieved for one query, and the same as prompt text."""

    user_id: str
    assistant_id: str
    query: str
    stm: list[ContextItemOut]
    mtm: list[ContextItemOut]
    segments: list[ContextItemOut]
    kb: list[ContextItemOut]
    agent_traits: list[ContextItemOut]
    traits: list[TraitOut]
    profile: dict[str, Any]
    agent_profile: dict[str, Any]
    rendered: str = Field(description="The context as prompt text, in sections.")
    elapsed_ms: float = Field(description="Time retrieval took, milliseconds.")


class ChatRequest(_In):
    """A message to answer from memory."""

    query: str
    assistant_id: str = "default"


class ChatResponse(BaseModel):
    """The reply; the turn (query and reply) is stored."""

    user_id: str
    reply: str
    degraded: bool = Field(
        False, description="True when the configured LLM was unavailable (5xx answers, "
        "timeouts, its circuit breaker open) and the offline fallback wrote the reply.")
    reason: str | None = Field(
        None, description="Why the reply is degraded, e.g. \"provider unavailable: "
        "InternalServerError (HTTP 500)\"; null when it is not.")


class UserProfileBody(_In):
    """Static facts about the user."""

    name: str | None = None
    gender: str | None = None
    birth_year: int | None = Field(None, ge=1, le=9999)
    extras: dict[str, str] = Field(default_factory=dict)


class AgentProfileBody(_In):
    """The assistant's persona as this user sees it."""

    role: str = ""
    character: str = ""
    extras: dict[str, str] = Field(default_factory=dict)


class PageOut(BaseModel):
    """A stored turn and where it is now."""

    page_id: str
    memory_id: str = Field(description="``page:<page id>``: for the per-memory routes.")
    location: Literal["stm", "mtm", "archive"]
    segment_id: str | None
    assistant_id: str
    timestamp: float
    query: str
    response: str


class SegmentOut(BaseModel):
    """A topic segment (in MTM or evicted to the archive)."""

    segment_id: str
    memory_id: str = Field(description="``segment:<segment id>``.")
    location: Literal["mtm", "archive"]
    heat: float
    summary: str
    keywords: list[str]
    page_ids: list[str]


class FactOut(BaseModel):
    """A fact in the user's knowledge base, or a trait of an assistant."""

    entry_id: str
    memory_id: str = Field(description="``fact:<entry id>`` or "
                           "``agent_trait:<assistant>:<entry id>``.")
    text: str
    timestamp: float
    source_segment: str | None = None


class AgentMemory(BaseModel):
    """What the user's memory holds about one assistant."""

    profile: dict[str, Any]
    traits: list[FactOut]


class MemoriesResponse(BaseModel):
    """Every memory of a user, with ids and provenance."""

    user_id: str
    turns: int = Field(description="Turns stored so far.")
    pages: list[PageOut]
    segments: list[SegmentOut]
    kb: list[FactOut]
    traits: list[TraitOut]
    agents: dict[str, AgentMemory]
    next_cursor: str | None = Field(None, description=_NEXT)


class UsersResponse(BaseModel):
    """The tenant's users with stored data."""

    users: list[str]
    next_cursor: str | None = Field(None, description=_NEXT)


class ForgetResponse(BaseModel):
    """What deleting a user removed."""

    user_id: str
    removed_files: int
    was_active: bool


class LLMHealth(BaseModel):
    """How the configured LLM and embedder are doing (readiness only)."""

    state: Literal["offline", "ok", "degraded", "misconfigured"] = Field(
        description="offline: the offline backend, no provider; degraded: a circuit breaker "
        "is not closed, replies come from the offline fallback; misconfigured: a "
        "configuration error (key, model, base URL) since the last successful call.")
    backend: str
    breaker: dict[str, str] = Field(
        description="Circuit breaker state per operation (completion, embedding): closed, "
        "open or half_open.")
    last_error: str | None = Field(None, description="The last provider failure's reason.")
    last_error_age_seconds: float | None = Field(
        None, description="How long ago that failure was, seconds.")


class HealthResponse(BaseModel):
    """Liveness or readiness."""

    status: Literal["ok", "starting", "stopping"]


class ReadyResponse(HealthResponse):
    """Readiness, with how the LLM provider is doing."""

    llm: LLMHealth | None = Field(
        None, description="The provider's state, while ready. A degraded or misconfigured "
        "provider does not make the server unready (memory calls still work).")


class ErrorDetail(BaseModel):
    """What went wrong."""

    type: str = Field(description="Error class, e.g. InvalidInput, Unauthorized, RateLimited.")
    message: str
    details: list[dict[str, Any]] | None = None


class ErrorBody(BaseModel):
    """Body of every error response."""

    error: ErrorDetail


class MemoryOut(BaseModel):
    """One memory of a user (see the library's ``Memory``)."""

    memory_id: str
    kind: Literal["page", "segment", "fact", "agent_trait", "trait"]
    tier: Literal["stm", "mtm", "archive", "lpm"]
    text: str = Field(description="A page's query and response on two lines, a segment's "
                      "summary, a fact's or agent trait's sentence, a trait's level.")
    timestamp: float
    assistant_id: str | None = None
    segment_id: str | None = None
    source_segment: str | None = None
    page_ids: list[str] = Field(default_factory=list)
    evidence: str = ""
    edited: bool = False
    chain_id: str | None = None


class MemoryCorrection(_In):
    """A corrected value: a fact's or agent trait's sentence, or a trait's level."""

    value: str = Field(description="The new sentence; for a trait: low, medium or high.")
    evidence: str = Field("", description="A trait's evidence (optional).")


class MemoryEventOut(BaseModel):
    """One change of a memory (see the library's ``MemoryEvent``)."""

    memory_id: str
    action: Literal["created", "changed", "corrected", "deleted"]
    at: float
    old: str | None
    new: str | None
    by: str


class MemoryHistoryResponse(BaseModel):
    """What changed a memory and when, oldest first."""

    user_id: str
    memory_id: str
    events: list[MemoryEventOut]
    next_cursor: str | None = Field(None, description=_NEXT)
