"""Adapters into agent runtimes, each behind its own extra and imported on its own.

* :mod:`memoryos_actors.integrations.openai_agents` (extra ``openai-agents``): an OpenAI
  Agents SDK ``Session`` backed by a user's memory, and instructions that carry what the
  memory retrieves for the latest input.
* :mod:`memoryos_actors.integrations.llamaindex` (extra ``llamaindex``): a LlamaIndex
  memory block for ``Memory.from_defaults(memory_blocks=[...])``.
* :mod:`memoryos_actors.integrations.langgraph` (extra ``langgraph``): a LangGraph
  ``BaseStore`` whose items are free-text memories of the users their namespaces map to,
  for ``StateGraph(...).compile(store=...)``.

Importing this package (or :mod:`memoryos_actors`) imports none of the frameworks. The
adapters stand on the public API only (:class:`~memoryos_actors.api.MemoryAPI` or
:class:`~memoryos_actors.api.AsyncMemoryAPI`, the errors and the records it returns).
"""

from __future__ import annotations

__all__: list[str] = []
