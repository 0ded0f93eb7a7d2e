"""An OpenAI Agents SDK agent whose session is a user's memory (runs offline).

    pip install ".[openai-agents]"    # from the root of a checkout
    python examples/openai_agents_session.py [DATA_DIR]

The model here is a stand-in that answers from the conversation it is given, so the
example needs no network and no key; with a real model, drop ``run_config``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from typing import Any

from agents import Agent, Model, ModelProvider, RunConfig, Runner
from agents.items import ModelResponse
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from memoryos_actors import MemoryOS
from memoryos_actors.integrations.openai_agents import MemorySession, memory_instructions


class EchoModel(Model):
    """Answers with the user messages it was given, and says whether the memory in its
    instructions mentions Tom."""

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        said = [str(i["content"]) for i in items if i.get("role") == "user"]
        tom = "Tom" in (system_instructions or "")
        text = f"(my instructions mention Tom: {tom}) you said: {' / '.join(said)}"
        out = ResponseOutputMessage(
            id="msg", role="assistant", status="completed", type="message",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        )  # fmt: skip
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class EchoProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return EchoModel()


async def main(data_dir: str) -> None:
    with MemoryOS.open(data_dir) as mem:
        agent: Agent[Any] = Agent(
            name="Assistant", instructions=memory_instructions(mem, "Answer briefly.")
        )
        config = RunConfig(model_provider=EchoProvider(), tracing_disabled=True)
        alice = MemorySession("alice", mem, prefix="acme:")
        bob = MemorySession("bob", mem, prefix="acme:")
        for session, text in [
            (alice, "My cat is called Tom."),
            (alice, "What is my cat called?"),
            (bob, "Hello, I am Bob. What is my cat called?"),
        ]:
            result = await Runner.run(
                agent, text, session=session, context=session, run_config=config
            )
            print(f"{session.session_id}> {text}\n  {result.final_output}")
        print(f"alice's session holds {len(await alice.get_items())} items")
        print(f"bob's session holds {len(await bob.get_items())} items")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(tmp))
