"""The MTM core's snapshot section: :class:`~memoryos_actors.tiers.mtm.MTMCore` as plain
values, and back.

:func:`save` gives msgpack-friendly values (format :data:`STATE_VERSION`): the user, the
highest turn seq placed, the next segment number, the dialogue chains, the saved hnswlib
graphs of the page and segment indexes, and per segment its pages, their embeddings
(little-endian float32 bytes), summary, summary keywords, heat counters and times.
:func:`load` rebuilds a core from them; the saved graphs load far faster than they build,
and a state without them (older snapshots) has its indexes built from the embeddings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import InvalidInput
from memoryos_actors.records import Page, normalize_keywords
from memoryos_actors.tiers._state import state_dim
from memoryos_actors.tiers.segments import Segment

if TYPE_CHECKING:
    from memoryos_actors.tiers.mtm import MTMCore

__all__ = ["STATE_VERSION", "MTMStateParts", "load", "save"]

STATE_VERSION = 1
"""Version of the state :func:`save` writes; :func:`load` reads only this one."""


@dataclass(frozen=True, slots=True)
class MTMStateParts:
    """What a snapshot of an MTM core holds besides its public properties
    (:meth:`MTMCore.state_parts <memoryos_actors.tiers.mtm.MTMCore.state_parts>`).

    Attributes:
        next_segment: the number the next new segment gets.
        chains: ``(dialogue chain id, segment id)``, oldest first.
        page_graph: the page index's hnswlib graph (None while not built).
        segment_graph: the segment index's hnswlib graph (None while not built).
        segments: the segments held, in order (the core's own objects).
    """

    next_segment: int
    chains: tuple[tuple[str, str], ...]
    page_graph: bytes | None
    segment_graph: bytes | None
    segments: tuple[Segment, ...]


def save(core: MTMCore) -> dict[str, Any]:
    """The whole state of ``core`` as msgpack-friendly values (embeddings as float32 bytes)."""
    parts = core.state_parts()
    return {
        "version": STATE_VERSION,
        "dim": core.dim,
        "user_id": core.user_id,
        "max_seq": core.max_seq,
        "next_segment": parts.next_segment,
        "chains": [[c, sid] for c, sid in parts.chains],
        "page_graph": parts.page_graph,
        "segment_graph": parts.segment_graph,
        "segments": [
            {
                "number": seg.number,
                "pages": [p.to_dict() for p in seg.pages],
                "embeddings": np.stack(seg.embs).astype("<f4").tobytes(),
                "summary": seg.summary,
                "summary_keywords": sorted(seg.summary_kw),
                "n_visit": seg.n_visit,
                "l_interaction": seg.l_interaction,
                "last_access": seg.last_access,
                "created": seg.created,
                "heat": seg.heat,
            }
            for seg in parts.segments
        ],
    }


def load(
    cls: type[MTMCore],
    state: Mapping[str, Any],
    config: MemoryConfig,
    dim: int | None,
    clock: Clock,
) -> MTMCore:
    """A ``cls`` core rebuilt from :func:`save` output (see :meth:`MTMCore.from_state`).

    Raises:
        EmbedderMismatch: ``dim`` is given and differs from the stored dimension.
        InvalidInput: the state is malformed.
    """
    try:
        stored = state_dim(state, STATE_VERSION, dim, "MTM")
        if stored is None:
            raise ValueError("no embedding dimension")  # reported as a malformed state
        stored_dim = stored
        core = cls(config, stored_dim, clock)
        user_id = state["user_id"]
        max_seq = int(state["max_seq"])
        next_segment = int(state["next_segment"])
        chains = [(str(c), str(sid)) for c, sid in state.get("chains", ())]
        page_vecs: dict[int, npt.NDArray[np.float32]] = {}
        segments: list[Segment] = []
        for s in state["segments"]:
            pages = [Page.from_dict(p) for p in s["pages"]]
            embs = np.frombuffer(s["embeddings"], dtype="<f4").reshape(len(pages), stored_dim)
            seg = Segment(int(s["number"]), float(s["created"]))
            for page, emb in zip(pages, embs, strict=True):
                e = emb.astype(np.float32)
                e.flags.writeable = False
                seg.add(page, e)
                page_vecs[page.seq] = e
            seg.summary = s["summary"]
            seg.summary_kw = normalize_keywords(s["summary_keywords"])
            seg.n_visit = int(s["n_visit"])
            seg.l_interaction = int(s["l_interaction"])
            seg.last_access = float(s["last_access"])
            seg.heat = float(s["heat"])
            seg.refresh(core.rules.segment_keyword_limit)
            segments.append(seg)
        # Saved hnswlib graphs load far faster than they build; older states have none.
        core.restore(
            user_id=user_id,
            max_seq=max_seq,
            next_segment=next_segment,
            chains=chains,
            segments=segments,
            page_vecs=page_vecs,
            page_graph=state.get("page_graph"),
            segment_graph=state.get("segment_graph"),
        )
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        if isinstance(exc, InvalidInput):
            raise
        raise InvalidInput(f"malformed MTM state: {exc!r}") from None
    return core
