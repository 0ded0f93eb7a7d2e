"""A LangGraph graph whose long-term memory is a user's memory (runs offline).

    pip install ".[langgraph]"
    python examples/langgraph_store.py [DATA_DIR]

The graph's one node remembers what the user asks it to (``store.put``), searches the
user's memories for the message (``store.search``) and hands what it found to a chat
model. The model is LangChain's scripted fake, so no LLM is called: the example prints
what the model was given, which is what a real one would answer from.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from memoryos_actors import MemoryOS
from memoryos_actors.integrations.langgraph import MemoryStore


@dataclass
class Context:
    user_id: str


class State(TypedDict):
    messages: list[AnyMessage]


model = GenericFakeChatModel(
    messages=iter([AIMessage("Noted."), AIMessage("Tom."), AIMessage("I don't know.")])
)


def chat(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
    store = runtime.store
    assert store is not None
    namespace = (runtime.context.user_id, "memories")  # the first label is the user
    text = str(state["messages"][-1].content)
    if text.lower().startswith("remember:"):
        store.put(namespace, "cat", {"text": text.split(":", 1)[1].strip()})
    found = store.search(namespace, query=text, limit=3)
    # Each result says why retrieve chose it (MemorySearchItem.why).
    notes = "\n".join(f"- {item.value['text']} ({getattr(item, 'why', '')})" for item in found)
    system = SystemMessage(f"What you remember about the user:\n{notes or '- nothing'}")
    print(f"[{runtime.context.user_id}] the model is given:\n{system.content}")
    reply = model.invoke([system, *state["messages"]])
    return {"messages": [*state["messages"], reply]}


def main(data_dir: str) -> None:
    with MemoryOS.open(data_dir) as mem:
        builder = StateGraph(State, context_schema=Context)
        builder.add_node("chat", chat)
        builder.add_edge(START, "chat")
        builder.add_edge("chat", END)
        graph = builder.compile(store=MemoryStore(mem))
        for user, text in [
            ("alice", "Remember: my cat is called Tom"),
            ("alice", "What is my cat called?"),
            ("bob", "What is my cat called?"),
        ]:
            out = graph.invoke({"messages": [HumanMessage(text)]}, context=Context(user))
            print(f"{user}> {text}\n{out['messages'][-1].content}\n")
        [fact] = mem.memories("alice", kinds=["fact"])
        print(f"alice's memory {fact.memory_id}: {fact.text.splitlines()[0]}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
