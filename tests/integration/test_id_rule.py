"""One rule for user ids (#46 item 6), in the library: no memory is written under an id
with ``/`` or a control character (the contract test checks every write on every
backend); a user stored under such an id before the rule stays readable, exportable and
forgettable, and moves to a new id by export and import."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from memoryos_actors import InvalidInput, MemoryOS, UserProfile
from memoryos_actors.validation import PATH_UNSAFE, check_new_id


def store_legacy_user(mem: MemoryOS, uid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Store a turn and a profile for ``uid`` as a release before the rule did."""
    import memoryos_actors.conversation as conversation

    with monkeypatch.context() as patched:
        patched.setattr(
            conversation, "_check_new_id", lambda value, what="user_id": value, raising=False
        )
        mem.add_turn(uid, "My cat Tofu sleeps on the radiator.", "Tofu sounds cosy.")
        mem.set_user_profile(uid, UserProfile(name="Old Timer"))


def test_the_rule_is_slash_and_control_characters() -> None:
    unsafe = ["a/b", "/", "x\x00", "tab\t", "nl\n", "cr\r", "esc\x1b", "del\x7f"]
    assert all(PATH_UNSAFE.search(u) for u in unsafe)
    assert not any(PATH_UNSAFE.search(u) for u in ["acme:ann", "zoë x", "a\\b", "a%2Fb", "名前"])
    for uid in unsafe:
        with pytest.raises(InvalidInput, match="URL path cannot carry"):
            check_new_id(uid)


def test_a_user_stored_before_the_rule_is_read_exported_forgotten_and_moved(
    open_mem: Callable[..., MemoryOS], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mem = open_mem()
    store_legacy_user(mem, "team/ann", monkeypatch)
    mem.close()
    mem = open_mem()  # a later release, with the rule, over the same data
    assert "team/ann" in mem.users()
    assert "Tofu" in mem.retrieve("team/ann", "What is my cat called?").render()
    assert mem.user_state("team/ann").turns == 1
    assert len(mem.memories("team/ann")) >= 1
    with pytest.raises(InvalidInput, match="export it and import it under a new id"):
        mem.add_turn("team/ann", "Another turn", "refused")
    with pytest.raises(InvalidInput, match="URL path"):
        mem.remember("team/ann", "refused too")
    exported = mem.export_user("team/ann", tmp_path / "ann.json")
    assert "Tofu" in json.dumps(json.loads(exported.read_text(encoding="utf-8")))
    with pytest.raises(InvalidInput, match="URL path"):
        mem.import_user(exported)  # under its own id: refused, nothing written
    assert mem.import_user(exported, "team-ann") == "team-ann"
    assert "Tofu" in mem.retrieve("team-ann", "What is my cat called?").render()
    mem.add_turn("team-ann", "Tofu had a vet visit.", "Hope all is well.")
    report = mem.forget_user("team/ann")
    assert report.user_id == "team/ann"
    assert "team/ann" not in mem.users() and "team-ann" in mem.users()
