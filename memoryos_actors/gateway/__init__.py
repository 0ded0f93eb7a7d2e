"""The LLM gateway: structured completions and embeddings behind one resilient service.

Backends: ``offline`` (default; extractive, deterministic, no network) and ``litellm``
(any provider litellm supports; imported lazily, only when used). Embedders: hashing
(default), litellm, sentence-transformers. See :class:`GatewayService`.
"""

from __future__ import annotations

from memoryos_actors.gateway.base import (
    BackendResult,
    Completion,
    Embedder,
    LLMBackend,
    ProviderCallError,
)
from memoryos_actors.gateway.embedders import (
    HashingEmbedder,
    LiteLLMEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
)
from memoryos_actors.gateway.litellm_backend import LiteLLMBackend
from memoryos_actors.gateway.offline import OFFLINE_NAME, OfflineBackend
from memoryos_actors.gateway.prompts import KINDS, PROMPTS, MalformedOutput, PromptSpec
from memoryos_actors.gateway.redo import RedoResult
from memoryos_actors.gateway.service import GatewayService

__all__ = [
    "KINDS",
    "OFFLINE_NAME",
    "PROMPTS",
    "BackendResult",
    "Completion",
    "Embedder",
    "GatewayService",
    "HashingEmbedder",
    "LLMBackend",
    "LiteLLMBackend",
    "LiteLLMEmbedder",
    "MalformedOutput",
    "OfflineBackend",
    "PromptSpec",
    "ProviderCallError",
    "RedoResult",
    "SentenceTransformerEmbedder",
    "make_embedder",
]
