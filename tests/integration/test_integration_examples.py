"""The examples under ``examples/`` of the agent-runtime adapters run as written (offline),
each in a process of its own, and print what they are there to show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(name: str, data: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_openai_agents_example_shows_continuity_and_isolation(tmp_path: Path) -> None:
    pytest.importorskip("agents")
    out = _run("openai_agents_session.py", tmp_path)
    lines = out.splitlines()
    # alice's second run sees her first message; bob's run sees only his own.
    assert "you said: My cat is called Tom. / What is my cat called?" in out
    bob = lines[lines.index("bob> Hello, I am Bob. What is my cat called?") + 1]
    assert "mention Tom: False" in bob and "you said: Hello, I am Bob." in bob
    assert "alice's session holds 4 items" in out


def test_the_llamaindex_example_shows_the_fact_in_the_memory_block(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    out = _run("llamaindex_memory.py", tmp_path)
    block = out.split("<memoryos>", 1)[1].split("</memoryos>", 1)[0]
    assert "Ines lives in Lisbon" in block


def test_the_langgraph_example_hands_alice_s_memory_to_the_model_and_not_bob_s(
    tmp_path: Path,
) -> None:
    pytest.importorskip("langgraph.store.base")
    out = _run("langgraph_store.py", tmp_path)
    alice, bob = out.split("alice> What is my cat called?")[0], out.split("alice> What is")[1]
    assert "- my cat is called Tom (fact cos=" in alice.split("alice> Remember")[1]
    assert "[bob] the model is given:\nWhat you remember about the user:\n- nothing" in bob
    assert "alice's memory fact:f1: my cat is called Tom" in out
