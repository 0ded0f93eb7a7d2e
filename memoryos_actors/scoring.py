"""Pure scoring maths of MemoryOS (Kang et al., 2025).

* ``F_score = cos(e_s, e_p) + Jaccard(K_s, K_p)`` decides whether a page joins a segment and
  ranks segments at retrieval (range [-1, 2]; [0, 2] for the non-negative embeddings of the
  hashing embedder).
* ``heat = alpha * N_visit + beta * L_interaction + gamma * exp(-dt / mu)`` ranks segments
  for eviction and promotion; ``dt`` is the time since the segment's last access, in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet

import numpy as np
import numpy.typing as npt

__all__ = ["cosine", "f_score", "heat", "jaccard", "recency"]


def cosine(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cosine similarity of two vectors, in [-1, 1]; 0.0 when either vector is all zeros.

    Embeddings in this library are already L2-normalised, but the norm is divided out anyway
    so the function is correct for any input.
    """
    va = np.asarray(a, dtype=np.float64).ravel()
    vb = np.asarray(b, dtype=np.float64).ravel()
    if va.shape != vb.shape:
        raise ValueError(f"cosine of vectors of different lengths {va.shape} and {vb.shape}")
    na = float(np.linalg.norm(va))
    nb = float(np.linalg.norm(vb))
    if na == 0.0 or nb == 0.0:
        return 0.0
    value = float(np.dot(va, vb)) / (na * nb)
    # Rounding can push |value| a hair above 1; keep the documented range exact.
    return max(-1.0, min(1.0, value))


def jaccard(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    """Jaccard index ``|a & b| / |a | b|`` of two keyword sets, in [0, 1].

    Two empty sets score 0.0: no keywords is no evidence of a shared topic.
    """
    if not a and not b:
        return 0.0
    inter = len(a & b)
    if inter == 0:
        return 0.0
    return inter / len(a | b)


def f_score(
    seg_emb: npt.ArrayLike,
    page_emb: npt.ArrayLike,
    seg_kw: AbstractSet[str],
    page_kw: AbstractSet[str],
) -> float:
    """The paper's segment/page fit ``cos(e_s, e_p) + Jaccard(K_s, K_p)``, in [-1, 2]."""
    return cosine(seg_emb, page_emb) + jaccard(seg_kw, page_kw)


def recency(dt_seconds: float, mu: float) -> float:
    """Recency ``exp(-dt/mu)`` of an access ``dt_seconds`` ago, in (0, 1].

    ``mu`` is the decay constant in seconds (> 0). A negative ``dt`` (a clock that moved
    backwards) counts as 0, so recency never exceeds 1.
    """
    if mu <= 0:
        raise ValueError(f"mu must be > 0 seconds, got {mu!r}")
    return math.exp(-max(0.0, dt_seconds) / mu)


def heat(
    n_visit: int,
    l_interaction: int,
    last_access: float,
    now: float,
    alpha: float,
    beta: float,
    gamma: float,
    mu: float,
) -> float:
    """Segment heat ``alpha*N_visit + beta*L_interaction + gamma*exp(-(now-last_access)/mu)``.

    Args:
        n_visit: times the segment was retrieved.
        l_interaction: pages (dialogue turns) the segment gathered since its last promotion.
        last_access: time of the last insert into or retrieval of the segment, seconds.
        now: current time, seconds.
        alpha, beta, gamma: coefficients.
        mu: recency decay constant, seconds.
    """
    return alpha * n_visit + beta * l_interaction + gamma * recency(now - last_access, mu)
