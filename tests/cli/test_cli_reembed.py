"""``memoryos reembed``: every stored vector computed again by another embedder (#46 item 7).

Two hashing embedders of different dimensions stand for two embedders (offline, exact):
a data directory built with one refuses the other until it is re-embedded. The data holds
every kind of stored vector: pages of mid-term segments, archived segments and pages,
remembered facts, assistant traits, a corrected fact and a deleted page. The command runs in this process
(:mod:`inprocess`), except where a process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_cli

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.errors import EmbedderMismatch
from memoryos_actors.operations import read_export

_REPO = Path(__file__).resolve().parents[2]

#: Settings that make segments, eviction to the archive and facts happen within a few turns.
_SETTINGS = {
    "mtm_capacity": 3,
    "segment_max_pages": 4,
    "stm_capacity": 3,
    "kb_capacity": 3,
    "heat_tick_seconds": 3600.0,
    "summary_debounce_seconds": 0.01,
    "fsync": "never",
    "log_level": "error",
}
OLD = MemoryConfig(**_SETTINGS, embedding_dim=512)  # type: ignore[arg-type]
NEW = OLD.evolve(embedding_dim=96)

_TOPICS = (
    "We climbed the granite ridge above the glacier lake",
    "The risotto needs warm stock added one ladle at a time",
    "The python service leaks memory under heavy load",
    "My violin teacher wants cleaner shifts in the third position",
    "The tomato seedlings need repotting before the frost ends",
    "Our quarterly taxes are due before the fifteenth of the month",
)


def _config_file(tmp_path: Path) -> Path:
    """A TOML file of the old settings (what opens the data directory today)."""
    path = tmp_path / "memoryos.toml"
    lines = [f"{k} = {json.dumps(v)}" for k, v in {**_SETTINGS, "embedding_dim": 512}.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _build(data: Path, users: int = 2, turns: int = 24) -> None:
    """A data directory with every kind of stored vector, built with :data:`OLD`."""
    with MemoryOS.open(data, OLD) as mem:
        for u in range(users):
            user = f"user{u}"
            for i in range(turns):
                topic = _TOPICS[(i // 4 + u) % len(_TOPICS)]
                # "I always ...": a persona update takes it as an assistant trait.
                mem.add_turn(user, f"{topic}, note {i} of {user}.", f"I always keep note {i}.")
            mem.remember(user, f"{user} is allergic to peanuts.")
            fact = mem.remember(user, f"{user} lives in Lisbon.")
            mem.remember(user, f"{user} plays the cello on Sundays.")
            mem.flush()
            mem.correct_memory(user, fact, f"{user} lives in Porto.")
            mem.delete_memory(user, "page:p2")
        mem.flush()


#: The command that switches to :data:`NEW`'s embedder.
_TO_NEW = ("reembed", "--embedder", "hashing", "--embedding-dim", "96")


def _reembed(data: Path, config: Path, *extra: str) -> Any:
    return run_cli("--config", str(config), *_TO_NEW, *extra, data_dir=data)


def _picture(data: Path, config: MemoryConfig, user: str, tmp: Path) -> dict[str, Any]:
    """What a user sees of their data: memories, archived memories and the export without
    its vectors (which are the embedder's, not the user's)."""
    with MemoryOS.open(data, config) as mem:
        memories = [repr(m) for m in mem.memories(user)]
        archived = repr(mem.archived_memories(user, "page", limit=500))
        exported = read_export(mem.export_user(user, tmp / f"{user}-{config.embedding_dim}.x"))
    return {"memories": memories, "archived": archived, "export": _without_vectors(exported)}


def _without_vectors(value: Any) -> Any:
    """An export payload without what only the embedder decides: vectors, the saved graphs
    over them, the embedder's name and dimension, the configuration's fingerprint; and the
    positions in the WAL the persona's edits were logged at, which any import renumbers."""
    if isinstance(value, dict):
        return {
            k: _without_vectors(v)
            for k, v in value.items()
            if k
            not in (
                "embeddings",
                "embs",
                "emb",
                "page_graph",
                "segment_graph",
                "embedder",
                "dim",
                "config_fingerprint",
                "lsn",
            )
        }
    if isinstance(value, list):
        return [_without_vectors(v) for v in value]
    return value


def _found(mem: MemoryOS, page: Any) -> str:
    """The page retrieval ranks first (STM's recent pages aside) for the exact text of
    ``page``'s query; the page itself is in what it returns."""
    ctx = mem.retrieve("user0", page.text.splitlines()[0].removeprefix("User: "))
    assert page.memory_id.removeprefix("page:") in ctx.page_ids()
    ranked = sorted((i for i in ctx.mtm if i.kind == "page"), key=lambda i: -i.score)
    return ranked[0].item_id if ranked else ""


def _refuses(data: Path, config: MemoryConfig) -> None:
    """Opening ``data`` with ``config`` is refused as another embedder's."""
    mem = MemoryOS.open(data, config)
    try:
        with pytest.raises(EmbedderMismatch):
            mem.retrieve("user0", "anything")
    finally:
        mem.close()


def _vectors_by_holder(payload: dict[str, Any]) -> dict[str, int]:
    """How many vector bytes each kind of holder of an export carries."""
    state = payload["state"]
    found = {
        "segments": sum(len(s["embeddings"]) for s in state["mtm"]["segments"]),
        "facts": len(state["lpm"]["kb"]["embeddings"]),
        "agent_traits": sum(
            len(p["traits"]["embeddings"]) for p in state["lpm"]["personas"].values()
        ),
        "archived": sum(
            len(r.get("emb") or b"") + sum(len(e) for e in (r.get("embs") or {}).values())
            for r in payload["archive"]
        ),
        "corrections": sum(len(e.get("emb") or b"") for e in state["lpm"]["edits"]),
    }
    return found


def test_reembed_switches_the_embedder_and_keeps_every_memory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _build(data)
    config = _config_file(tmp_path)
    with MemoryOS.open(data, OLD) as mem:
        old_export = read_export(mem.export_user("user0", tmp_path / "old.x"))
        wanted = {m.tier: m for m in mem.memories("user0", kinds=["page"])}
        found_before = {t: _found(mem, m) for t, m in wanted.items()}
    assert set(wanted) == {"stm", "mtm", "archive"}
    # (Retrieval counts visits: what the user sees is taken after it, and before the next.)
    before = {u: _picture(data, OLD, u, tmp_path) for u in ("user0", "user1")}
    assert found_before["mtm"] == wanted["mtm"].memory_id.removeprefix("page:")
    # Every kind of holder is there to be converted (archived pages, a correction...).
    assert all(_vectors_by_holder(old_export).values()), _vectors_by_holder(old_export)
    _refuses(data, NEW)

    done = _reembed(data, config)
    assert done.returncode == 0, done.stderr
    assert "re-embedded 2 users" in done.stdout and "embedding_dim = 96" in done.stdout
    assert sorted(p.name for p in data.iterdir()) == ["LOCK", "users"]  # nothing left over

    # Opens with the new embedder only, the user's data is the same, it finds the same pages.
    assert {u: _picture(data, NEW, u, tmp_path) for u in ("user0", "user1")} == before
    with MemoryOS.open(data, NEW) as mem:
        found_after = {t: _found(mem, m) for t, m in wanted.items()}
        new_export = read_export(mem.export_user("user0", tmp_path / "new.x"))
    # The exact page is found wherever it lives (``_found`` checks); from the hot tiers it
    # ranks where it did (the ranks of the rest of the cold tier's hits may move).
    assert found_after["mtm"] == found_before["mtm"] and found_after["stm"] == found_before["stm"]
    assert new_export["embedder"] == ["hashing-v1-96", 96]
    sizes = _vectors_by_holder(new_export)
    assert sizes == {k: v * 96 // 512 for k, v in _vectors_by_holder(old_export).items()}
    _refuses(data, OLD)
    # The refusal names the way forward now.
    refused = run_cli("inspect", "user0", data_dir=data)
    assert refused.returncode == 2 and "memoryos reembed" in refused.stderr


def test_reembed_refuses_while_a_server_holds_the_directory_and_the_same_embedder(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _build(data, users=1, turns=4)
    config = _config_file(tmp_path)
    holder = MemoryOS.open(data, OLD)
    try:
        refused = _reembed(data, config)
    finally:
        holder.close()
    assert refused.returncode == 2 and "DataDirLocked" in refused.stderr
    assert sorted(p.name for p in data.iterdir()) == ["LOCK", "users"]
    same = run_cli("--config", str(config), "reembed", "--embedder", "hashing", data_dir=data)
    assert same.returncode == 2 and "already" in same.stderr
    assert sorted(p.name for p in data.iterdir()) == ["LOCK", "users"]


def _reembed_process(data: Path, config: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    env["PYTHONPATH"] = str(_REPO)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(data),
            "--config",
            str(config),
            *_TO_NEW,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=_REPO,
    )


def _users_done(data: Path) -> int:
    try:
        doc = json.loads(
            (data / "reembed" / "users" / ".reembed-progress.json").read_text(encoding="utf-8")
        )
    except (OSError, ValueError):
        return 0
    return len(doc["done"])


def test_a_reembed_killed_midway_keeps_the_old_data_in_use_and_a_rerun_completes_it(
    tmp_path: Path,
) -> None:
    users = 12
    killed, straight = tmp_path / "killed", tmp_path / "straight"
    _build(killed, users=users, turns=8)
    import shutil

    shutil.copytree(killed, straight)
    config = _config_file(tmp_path)
    before = _picture(killed, OLD, "user7", tmp_path)

    proc = _reembed_process(killed, config)
    try:
        deadline = time.monotonic() + 120
        while _users_done(killed) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "reembed finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.communicate()
    assert 3 <= _users_done(killed) < users
    # Interrupted before the switch: the data directory opens with the old embedder as before.
    assert _picture(killed, OLD, "user7", tmp_path) == before
    _refuses(killed, NEW)

    rerun = _reembed(killed, config)
    assert rerun.returncode == 0, rerun.stderr
    assert f"re-embedded {users} users" in rerun.stdout and "done by an earlier run" in rerun.stdout
    _ok = _reembed(straight, config)
    assert _ok.returncode == 0, _ok.stderr

    # The result equals an uninterrupted run's, vectors included.
    for user in ("user0", "user5", "user11"):
        exports = []
        for data in (killed, straight):
            with MemoryOS.open(data, NEW) as mem:
                payload = read_export(mem.export_user(user, tmp_path / f"{data.name}-{user}.x"))
            payload["state"]["mtm"].pop("page_graph")
            payload["state"]["mtm"].pop("segment_graph")
            exports.append(payload)
        assert exports[0] == exports[1], user
    assert _picture(killed, NEW, "user7", tmp_path) == before


class _Stop(Exception):
    """Stands for the process dying at a chosen point."""


def _stop(*_args: Any) -> None:
    raise _Stop


def test_a_reembed_stopped_after_the_switch_or_between_two_renames_is_finished_by_a_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors import reembed as module
    from memoryos_actors.operations import reembed

    data = tmp_path / "data"
    _build(data, users=1, turns=8)
    before = _picture(data, OLD, "user0", tmp_path)

    # Stopped after the atomic exchange, before the old users were deleted: done already.
    with monkeypatch.context() as m:
        m.setattr(module, "_clean_up", _stop)
        with pytest.raises(_Stop):
            reembed(data, OLD, NEW)
    assert (data / "reembed" / "users").is_dir()  # the old users, not deleted yet
    report = reembed(data, OLD, NEW)
    assert (report.users, report.resumed) == (1, 1)
    assert sorted(p.name for p in data.iterdir()) == ["LOCK", "users"]
    assert _picture(data, NEW, "user0", tmp_path) == before

    # Where no exchange exists, two renames: stopped between them, a rerun does the second.
    with monkeypatch.context() as m:
        m.setattr(module, "_exchange", lambda _a, _b: False)
        rename = os.rename

        def second_fails(src: Any, dst: Any) -> None:
            if Path(src) == data / "reembed" / "users":  # the new users into place
                raise _Stop
            rename(src, dst)

        m.setattr(os, "rename", second_fails)
        with pytest.raises(_Stop):
            reembed(data, NEW, OLD)
    assert not (data / "users").exists()
    reembed(data, NEW, OLD)
    assert sorted(p.name for p in data.iterdir()) == ["LOCK", "users"]
    assert _picture(data, OLD, "user0", tmp_path) == before
