"""LPM: the long-term persona memory tier of one user.

Holds, as in MemoryOS: the user's static profile, a knowledge base of user facts (a FIFO of
``kb_capacity`` entries, each with an embedding), the 90 user-trait dimensions of
:mod:`memoryos_actors.tiers.traits`, and per assistant an agent profile plus a FIFO of
``agent_traits_capacity`` agent traits. Pure state and transitions; no threads, no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryos_actors.clock import Clock, SystemClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import InvalidInput
from memoryos_actors.messages import (
    DEFAULT_ASSISTANT,
    AgentProfile,
    FactHit,
    KBEntry,
    LPMEffects,
    LPMView,
    PersonaUpdate,
    TraitLevel,
    UserProfile,
)
from memoryos_actors.tiers._state import state_dim
from memoryos_actors.tiers.traits import TRAITS_BY_NAME, empty_levels

__all__ = ["LPMCore"]

_STATE_VERSION = 1

#: Changes of one user trait kept for its history.
_TRAIT_HISTORY = 16


def _dedup_key(text: str) -> str:
    # "Exact duplicate" up to case and spacing: the LLM often restates a fact verbatim
    # with different capitalisation or a trailing space.
    return " ".join(text.split()).casefold()


class _Fifo:
    """Entries with unit-length embeddings, oldest first, at most ``capacity``."""

    __slots__ = ("_mat", "capacity", "embs", "entries")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.entries: deque[KBEntry] = deque()
        self.embs: deque[npt.NDArray[np.float32]] = deque()
        # The embeddings as one float64 matrix, made by the first search after a change
        # (a retrieve searches two FIFOs; writes change them far less often).
        self._mat: npt.NDArray[np.float64] | None = None

    def keys(self) -> set[str]:
        return {_dedup_key(e.text) for e in self.entries}

    def index(self, entry_id: str) -> int | None:
        for i, e in enumerate(self.entries):
            if e.entry_id == entry_id:
                return i
        return None

    def remove(self, entry_id: str) -> KBEntry | None:
        i = self.index(entry_id)
        if i is None:
            return None
        entry = self.entries[i]
        del self.entries[i]
        del self.embs[i]
        self._mat = None
        return entry

    def replace(self, entry_id: str, text: str, emb: npt.NDArray[np.float32]) -> KBEntry | None:
        i = self.index(entry_id)
        if i is None:
            return None
        old = self.entries[i]
        self.entries[i] = dataclasses.replace(old, text=text)
        self.embs[i] = emb
        self._mat = None
        return old

    def push(
        self, entry: KBEntry, emb: npt.NDArray[np.float32]
    ) -> list[tuple[KBEntry, npt.NDArray[np.float32]]]:
        self.entries.append(entry)
        self.embs.append(emb)
        self._mat = None
        evicted = []
        while len(self.entries) > self.capacity:
            evicted.append((self.entries.popleft(), self.embs.popleft()))
        return evicted

    def search(self, q: npt.NDArray[np.float32], k: int) -> tuple[FactHit, ...]:
        if k <= 0 or not self.entries:
            return ()
        if self._mat is None:
            self._mat = np.stack(list(self.embs)).astype(np.float64)
        cos = np.clip(self._mat @ q.astype(np.float64), -1.0, 1.0)
        n = len(self.entries)
        # Best cosine first; among equals the newer entry wins (last key first).
        order = np.lexsort((-np.arange(n), -cos))[:k].tolist()
        entries = self.entries
        return tuple(FactHit(entries[i], float(cos[i])) for i in order)

    def to_state(self) -> dict[str, Any]:
        return {
            "entries": [e.to_dict() for e in self.entries],
            "embeddings": b"".join(e.astype("<f4").tobytes() for e in self.embs),
        }

    def load(self, state: Mapping[str, Any], dim: int | None) -> None:
        entries = [KBEntry.from_dict(e) for e in state["entries"]]
        if entries:
            if dim is None:
                raise InvalidInput("LPM state has entries but no embedding dimension")
            embs = np.frombuffer(state["embeddings"], dtype="<f4").reshape(len(entries), dim)
            for entry, emb in zip(entries, embs, strict=True):
                e = emb.astype(np.float32)
                e.flags.writeable = False
                self.entries.append(entry)
                self.embs.append(e)
            self._mat = None


class _Persona:
    __slots__ = ("profile", "traits")

    def __init__(self, capacity: int) -> None:
        self.profile = AgentProfile()
        self.traits = _Fifo(capacity)


class LPMCore:
    """Long-term persona memory of one user, and of each assistant as that user sees it.

    Args:
        config: ``kb_capacity``, ``agent_traits_capacity``, ``kb_top_k``,
            ``agent_traits_top_k``.
        clock: time source for new entries' timestamps (default: the system clock).
        dim: embedding length; if None it is taken from the first embeddings given.
    """

    def __init__(
        self, config: MemoryConfig, *, clock: Clock | None = None, dim: int | None = None
    ) -> None:
        if not isinstance(config, MemoryConfig):
            raise InvalidInput(f"config must be a MemoryConfig, got {type(config).__name__}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise InvalidInput(f"dim must be an int >= 1 or None, got {dim!r}")
        self._config = config
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._dim = dim
        self._user_id: str | None = None
        self._profile = UserProfile()
        # The shared unobserved levels (see empty_levels): replaced one by one as traits
        # are observed.
        self._traits: dict[str, TraitLevel] = {t.name: t for t in empty_levels()}
        self._kb = _Fifo(config.kb_capacity)
        self._personas: dict[str, _Persona] = {}
        self._next_fact = 1
        self._evicted_embs: dict[str, npt.NDArray[np.float32]] = {}
        self._next_agent_trait = 1
        #: Each user trait's changes by persona updates, oldest first (the last
        #: ``_TRAIT_HISTORY`` per trait): ``[ts, level, evidence, source segment]``.
        self._trait_history: dict[str, list[list[Any]]] = {}

    # ------------------------------------------------------------------ profile

    @property
    def dim(self) -> int | None:
        """Embedding length, once known."""
        return self._dim

    @property
    def user_id(self) -> str | None:
        """The user this core belongs to, once an update named it."""
        return self._user_id

    def set_user_profile(self, profile: UserProfile) -> None:
        """Replace the user's static profile."""
        if not isinstance(profile, UserProfile):
            raise InvalidInput(f"profile must be a UserProfile, got {type(profile).__name__}")
        self._profile = profile

    def user_profile(self) -> UserProfile:
        """The user's static profile."""
        return self._profile

    def set_agent_profile(self, assistant_id: str, profile: AgentProfile) -> None:
        """Replace the persona of ``assistant_id`` (argument order as in SetAgentProfile)."""
        if not isinstance(profile, AgentProfile):
            raise InvalidInput(f"profile must be an AgentProfile, got {type(profile).__name__}")
        self._persona(assistant_id).profile = profile

    def agent_profile(self, assistant_id: str = DEFAULT_ASSISTANT) -> AgentProfile:
        """The persona of ``assistant_id`` (empty if never set)."""
        persona = self._personas.get(assistant_id)
        return persona.profile if persona is not None else AgentProfile()

    def _persona(self, assistant_id: str) -> _Persona:
        if not isinstance(assistant_id, str) or not assistant_id:
            raise InvalidInput(f"assistant_id must be a non-empty str, got {assistant_id!r}")
        persona = self._personas.get(assistant_id)
        if persona is None:
            persona = _Persona(self._config.agent_traits_capacity)
            self._personas[assistant_id] = persona
        return persona

    # ------------------------------------------------------------------ reads

    def traits(self) -> tuple[TraitLevel, ...]:
        """All 90 user traits in table order; unobserved ones have ``level`` None."""
        return tuple(self._traits.values())

    def known_traits(self) -> tuple[TraitLevel, ...]:
        """The user traits that have a level, in table order."""
        return tuple(t for t in self._traits.values() if t.level is not None)

    def kb(self) -> tuple[KBEntry, ...]:
        """The user's knowledge-base facts, oldest first."""
        return tuple(self._kb.entries)

    def agent_traits(self, assistant_id: str = DEFAULT_ASSISTANT) -> tuple[KBEntry, ...]:
        """The agent traits of ``assistant_id``, oldest first."""
        persona = self._personas.get(assistant_id)
        return tuple(persona.traits.entries) if persona is not None else ()

    def assistants(self) -> tuple[str, ...]:
        """Assistant ids with a stored persona, in first-seen order."""
        return tuple(self._personas)

    # ------------------------------------------------------------------ transitions

    def _embeddings(
        self, value: Any, n: int, what: str, dim: int | None
    ) -> list[npt.NDArray[np.float32]]:
        """Validated, normalised, read-only rows; ``dim`` is the required width if known."""
        if n == 0:
            return []
        if value is None:
            raise InvalidInput(f"{what} are required for {n} new entries")
        try:
            arr = np.array(value, dtype=np.float32)
        except (TypeError, ValueError):
            raise InvalidInput(f"{what} must be a numeric matrix") from None
        if arr.ndim != 2 or arr.shape[0] != n:
            raise InvalidInput(f"{what} must have shape ({n}, dim), got {arr.shape}")
        if dim is not None and arr.shape[1] != dim:
            raise InvalidInput(f"{what} must have {dim} columns, got {arr.shape[1]}")
        if arr.shape[1] < 1 or not np.all(np.isfinite(arr)):
            raise InvalidInput(f"{what} must be finite with at least one column")
        norms = np.linalg.norm(arr.astype(np.float64), axis=1, keepdims=True)
        arr = (arr / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        rows = []
        for row in arr:
            r = row.copy()
            r.flags.writeable = False
            rows.append(r)
        return rows

    def take_evicted_embeddings(self) -> dict[str, npt.NDArray[np.float32]]:
        """Embeddings of the facts and agent traits pushed out of their FIFOs since the last
        call, by entry id (the archive keeps them for the cold tier)."""
        out, self._evicted_embs = self._evicted_embs, {}
        return out

    def apply(
        self,
        update: PersonaUpdate,
        fact_embeddings: npt.ArrayLike | None = None,
        agent_trait_embeddings: npt.ArrayLike | None = None,
        *,
        now: float | None = None,
    ) -> LPMEffects:
        """Merge what the LLM learned from a promoted segment.

        User traits in the update overwrite the level (when not None) and the evidence
        (when not empty) of the named trait; names not among the 90 are ignored and
        reported. New facts and agent traits go to the end of their FIFOs; one that
        duplicates an entry already held (or an earlier one in the same update), ignoring
        case and spacing, is skipped. Entries pushed out of a full FIFO are returned.

        Args:
            update: the distilled persona update.
            fact_embeddings: shape ``(len(update.facts), dim)``, row i for fact i.
            agent_trait_embeddings: shape ``(len(update.agent_traits), dim)``.
            now: timestamp of the new entries, seconds (default: the clock).
        """
        if not isinstance(update, PersonaUpdate):
            raise InvalidInput(f"update must be a PersonaUpdate, got {type(update).__name__}")
        if self._user_id is not None and update.user_id != self._user_id:
            raise InvalidInput(
                f"update for user {update.user_id!r} applied to the LPM of {self._user_id!r}"
            )
        fact_embs = self._embeddings(
            fact_embeddings, len(update.facts), "fact_embeddings", self._dim
        )
        dim = self._dim if self._dim is not None or not fact_embs else len(fact_embs[0])
        agent_embs = self._embeddings(
            agent_trait_embeddings, len(update.agent_traits), "agent_trait_embeddings", dim
        )
        if dim is None and agent_embs:
            dim = len(agent_embs[0])
        if now is None:
            t = float(self._clock.now())
        elif isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InvalidInput(f"now must be a finite number of seconds, got {now!r}")
        else:
            t = float(now)
        persona = self._persona(update.assistant_id)
        # Everything is validated: only now does the core change.
        self._user_id = update.user_id
        self._dim = dim

        changed: list[str] = []
        unknown: list[str] = []
        for tl in update.traits:
            current = self._traits.get(tl.name)
            if current is None:
                unknown.append(tl.name)
                continue
            new = dataclasses.replace(
                current,
                level=tl.level if tl.level is not None else current.level,
                evidence=tl.evidence if tl.evidence else current.evidence,
            )
            if new != current:
                self._traits[tl.name] = new
                self._note_trait(tl.name, t, new, update.source_segment or "")
                if tl.name not in changed:
                    changed.append(tl.name)

        duplicates = 0
        facts_added: list[KBEntry] = []
        facts_evicted: list[KBEntry] = []
        seen = self._kb.keys()
        for text, emb in zip(update.facts, fact_embs, strict=True):
            key = _dedup_key(text)
            if not key or key in seen:
                duplicates += 1
                continue
            seen.add(key)
            entry = KBEntry(f"f{self._next_fact}", text.strip(), t, update.source_segment)
            self._next_fact += 1
            facts_added.append(entry)
            for old, old_emb in self._kb.push(entry, emb):
                facts_evicted.append(old)
                self._evicted_embs[old.entry_id] = old_emb

        agent_added: list[KBEntry] = []
        agent_evicted: list[KBEntry] = []
        seen = persona.traits.keys()
        for text, emb in zip(update.agent_traits, agent_embs, strict=True):
            key = _dedup_key(text)
            if not key or key in seen:
                duplicates += 1
                continue
            seen.add(key)
            entry = KBEntry(f"a{self._next_agent_trait}", text.strip(), t, update.source_segment)
            self._next_agent_trait += 1
            agent_added.append(entry)
            for old, old_emb in persona.traits.push(entry, emb):
                agent_evicted.append(old)
                self._evicted_embs[old.entry_id] = old_emb

        return LPMEffects(
            facts_added=tuple(facts_added),
            facts_evicted=tuple(facts_evicted),
            agent_traits_added=tuple(agent_added),
            agent_traits_evicted=tuple(agent_evicted),
            traits_changed=tuple(changed),
            unknown_traits=tuple(unknown),
            duplicates=duplicates,
        )

    def next_fact_id(self) -> str:
        """The entry id the next new user fact gets (``f<n>``)."""
        return f"f{self._next_fact}"

    def remember(self, entry: KBEntry, embedding: npt.ArrayLike) -> LPMEffects:
        """Add ``entry``, a fact the application gave (``remember``), at the end of the KB
        FIFO with its id as it is (later facts are numbered after it), even when another
        fact says the same: the application asked for this one. The facts pushed out of a
        full FIFO are returned (their embeddings by :meth:`take_evicted_embeddings`)."""
        if not isinstance(entry, KBEntry) or not entry.entry_id.startswith("f"):
            raise InvalidInput(f"a remembered fact must be a KBEntry f<n>, got {entry!r:.80}")
        try:
            number = int(entry.entry_id[1:])
        except ValueError:
            raise InvalidInput(f"a fact's entry id must be f<n>, got {entry.entry_id!r}") from None
        (emb,) = self._embeddings([embedding], 1, "embedding", self._dim)
        if self._kb.index(entry.entry_id) is not None:
            return LPMEffects()  # replayed over a state that holds it already
        self._dim = len(emb)
        self._next_fact = max(self._next_fact, number + 1)
        evicted: list[KBEntry] = []
        for old, old_emb in self._kb.push(entry, emb):
            evicted.append(old)
            self._evicted_embs[old.entry_id] = old_emb
        return LPMEffects(facts_added=(entry,), facts_evicted=tuple(evicted))

    # ------------------------------------------------------------------ single memories

    def _note_trait(self, name: str, ts: float, trait: TraitLevel, source: str) -> None:
        hist = self._trait_history.setdefault(name, [])
        hist.append([float(ts), trait.level, trait.evidence, source])
        del hist[:-_TRAIT_HISTORY]

    def trait_history(self, name: str) -> tuple[tuple[float, str | None, str, str], ...]:
        """How persona updates and edits changed trait ``name``: ``(time, level,
        evidence, source)`` oldest first (the last few)."""
        return tuple(
            (float(h[0]), h[1], str(h[2]), str(h[3])) for h in self._trait_history.get(name, ())
        )

    def _fifo(self, kind: str, assistant_id: str) -> _Fifo | None:
        if kind == "fact":
            return self._kb
        if kind == "agent_trait":
            persona = self._personas.get(assistant_id)
            return persona.traits if persona is not None else None
        raise InvalidInput(f"kind must be 'fact' or 'agent_trait', got {kind!r}")

    def entry(self, kind: str, entry_id: str, assistant_id: str = "") -> KBEntry | None:
        """The fact (``kind="fact"``) or agent trait with ``entry_id``, if held."""
        fifo = self._fifo(kind, assistant_id)
        i = fifo.index(entry_id) if fifo is not None else None
        return fifo.entries[i] if fifo is not None and i is not None else None

    def remove_entry(self, kind: str, entry_id: str, assistant_id: str = "") -> KBEntry | None:
        """Delete a fact or agent trait; returns it (None if not held)."""
        fifo = self._fifo(kind, assistant_id)
        return fifo.remove(entry_id) if fifo is not None else None

    def replace_entry(
        self, kind: str, entry_id: str, text: str, embedding: npt.ArrayLike, assistant_id: str = ""
    ) -> KBEntry | None:
        """Correct a fact's or agent trait's text (same id, time and source); returns the
        entry as it was (None if not held)."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("a corrected text must be a non-empty str")
        fifo = self._fifo(kind, assistant_id)
        if fifo is None:
            return None
        emb = self._embeddings(
            np.asarray(embedding, dtype=np.float32).reshape(1, -1), 1, "embedding", self._dim
        )[0]
        return fifo.replace(entry_id, text.strip(), emb)

    def set_trait(
        self,
        name: str,
        level: str | None,
        evidence: str = "",
        *,
        now: float | None = None,
        source: str = "edit",
    ) -> TraitLevel:
        """Set (or with ``level`` None, clear) user trait ``name``; returns it as it was."""
        current = self._traits.get(name)
        if current is None:
            raise InvalidInput(f"unknown trait {name!r}")
        new = TraitLevel.known(name, level, evidence if level is not None else "")
        self._traits[name] = new
        if level is None:
            self._trait_history.pop(name, None)  # a cleared trait keeps no old values
            return current
        t = float(self._clock.now()) if now is None else float(now)
        self._note_trait(name, t, new, source)
        return current

    def quoting(
        self, quotes: Callable[[str, str | None], bool], skip: Container[str] = ()
    ) -> list[tuple[str, str, tuple[int, ...]]]:
        """What of this LPM quotes deleted pages, by ``quotes(text, source)`` (see
        :mod:`memoryos_actors.tiers.quotes`), as ``EditRecord.derived`` entries: facts and
        agent traits to ``"delete"`` (but those ``skip`` names); traits whose value quotes
        them to ``"revert"``, those whose older changes only do to ``"scrub"``, with the
        positions of the changes of their history that quote them. A value the user set
        (an edit) is never one."""
        out: list[tuple[str, str, tuple[int, ...]]] = []
        for e in self._kb.entries:
            mid = f"fact:{e.entry_id}"
            if e.origin == "remembered":
                continue  # the application's own words, distilled from no page
            if mid not in skip and quotes(e.text, e.source_segment):
                out.append((mid, "delete", ()))
        for aid, persona in self._personas.items():
            for e in persona.traits.entries:
                mid = f"agent_trait:{aid}:{e.entry_id}"
                if mid not in skip and quotes(e.text, e.source_segment):
                    out.append((mid, "delete", ()))
        for name, trait in self._traits.items():
            hist = self._trait_history.get(name, ())
            at = tuple(
                i
                for i, (_ts, _level, evidence, source) in enumerate(hist)
                if source != "edit" and evidence and quotes(str(evidence), str(source))
            )
            newest = hist[-1] if hist else None
            source = (
                str(newest[3])
                if newest is not None and (newest[1], newest[2]) == (trait.level, trait.evidence)
                else None
            )
            if (
                trait.evidence
                and source != "edit"
                and ((source is not None and len(hist) - 1 in at) or quotes(trait.evidence, source))
            ):
                out.append((f"trait:{name}", "revert", at))
            elif at:
                out.append((f"trait:{name}", "scrub", at))
        return out

    def forget_trait_changes(self, name: str, at: Iterable[int], *, revert: bool) -> None:
        """Drop the changes of trait ``name``'s history at positions ``at`` (0 the oldest);
        with ``revert`` the trait takes the newest change left (cleared if none is left).
        Positions past the history are ignored."""
        if name not in self._traits:
            raise InvalidInput(f"unknown trait {name!r}")
        gone = set(at)
        kept = [h for i, h in enumerate(self._trait_history.get(name, ())) if i not in gone]
        if kept:
            self._trait_history[name] = kept
        else:
            self._trait_history.pop(name, None)
        if revert:
            level, evidence = (kept[-1][1], str(kept[-1][2])) if kept else (None, "")
            self._traits[name] = TraitLevel.known(
                name, level, evidence if level is not None else ""
            )

    # ------------------------------------------------------------------ retrieval

    def search(
        self,
        query_emb: npt.ArrayLike,
        top_k_kb: int | None = None,
        top_k_agent: int | None = None,
        *,
        assistant_id: str = DEFAULT_ASSISTANT,
    ) -> LPMView:
        """Profile, known traits, and the facts and agent traits closest to the query.

        Args:
            query_emb: query embedding.
            top_k_kb: facts returned (default ``config.kb_top_k``).
            top_k_agent: agent traits returned (default ``config.agent_traits_top_k``).
            assistant_id: whose agent persona to read.
        """
        top_k_kb = self._config.kb_top_k if top_k_kb is None else top_k_kb
        top_k_agent = self._config.agent_traits_top_k if top_k_agent is None else top_k_agent
        for name, value in (("top_k_kb", top_k_kb), ("top_k_agent", top_k_agent)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"{name} must be an int >= 0, got {value!r}")
        try:
            q = np.array(query_emb, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput("query_emb must be a numeric vector") from None
        if self._dim is not None and q.shape != (self._dim,):
            raise InvalidInput(f"query_emb must have {self._dim} values, got shape {q.shape}")
        if not np.all(np.isfinite(q)):
            raise InvalidInput("query_emb must be finite")
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        qf = q.astype(np.float32)
        persona = self._personas.get(assistant_id)
        return LPMView(
            user_profile=self._profile,
            agent_profile=persona.profile if persona is not None else AgentProfile(),
            traits=self.known_traits(),
            kb=self._kb.search(qf, top_k_kb),
            agent_traits=persona.traits.search(qf, top_k_agent) if persona is not None else (),
        )

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """The whole state as msgpack-friendly values (embeddings as float32 bytes)."""
        return {
            "version": _STATE_VERSION,
            "dim": self._dim,
            "user_id": self._user_id,
            "profile": self._profile.to_dict(),
            "traits": [t.to_dict() for t in self._traits.values() if t.level or t.evidence],
            "kb": self._kb.to_state(),
            "personas": {
                aid: {"profile": p.profile.to_dict(), "traits": p.traits.to_state()}
                for aid, p in self._personas.items()
            },
            "next_fact": self._next_fact,
            "next_agent_trait": self._next_agent_trait,
            "trait_history": {k: [list(h) for h in v] for k, v in self._trait_history.items()},
        }

    @classmethod
    def from_state(
        cls,
        state: Mapping[str, Any],
        config: MemoryConfig,
        *,
        clock: Clock | None = None,
        dim: int | None = None,
    ) -> LPMCore:
        """Rebuild a core from :meth:`to_state` output.

        FIFOs keep their stored entries even if the configured capacity is now smaller;
        the next push trims them (and reports what it pushed out).

        Raises:
            EmbedderMismatch: ``dim`` is given and differs from the stored dimension.
            InvalidInput: the state is malformed.
        """
        try:
            stored = state_dim(state, _STATE_VERSION, dim, "LPM")
            core = cls(config, clock=clock, dim=stored if stored is not None else dim)
            core._user_id = state["user_id"]
            core._profile = UserProfile.from_dict(state["profile"])
            for t in state["traits"]:
                tl = TraitLevel.from_dict(t)
                # An unobserved trait keeps the shared empty level it started with.
                if tl.name in TRAITS_BY_NAME and tl != core._traits[tl.name]:
                    core._traits[tl.name] = tl
            core._kb.load(state["kb"], core._dim)
            for aid, p in state["personas"].items():
                persona = core._persona(aid)
                persona.profile = AgentProfile.from_dict(p["profile"])
                persona.traits.load(p["traits"], core._dim)
            core._next_fact = int(state["next_fact"])
            core._next_agent_trait = int(state["next_agent_trait"])
            core._trait_history = {
                str(k): [[float(h[0]), h[1], str(h[2]), str(h[3])] for h in v]
                for k, v in (state.get("trait_history") or {}).items()
            }
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(f"malformed LPM state: {exc!r}") from None
        return core
