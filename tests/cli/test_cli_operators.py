"""The ``memoryos`` command as an operator meets it (issue #25): one namespace with the
server, re-runnable ingest, sharded data directories, and the small frictions. The commands run
in this process through the entry function (:mod:`inprocess`), except where a terminal
is what is tested."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from inprocess import Ran, run_cli

import memoryos_actors

_REPO = Path(__file__).resolve().parents[2]


def _run(
    *args: str,
    data_dir: Path | None = None,
    stdin: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Ran:
    return run_cli(*args, data_dir=data_dir, stdin=stdin, env=env, cwd=cwd or _REPO)


def _ok(proc: Ran | subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def _turns(data: Path, user: str, *tenant: str) -> int:
    return int(json.loads(_ok(_run(*tenant, "inspect", user, "--json", data_dir=data)))["turns"])


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- small frictions -----------------------------------------------------------------------


def test_version_flag_and_bare_command_print_and_exit_0() -> None:
    version = _run("--version")
    assert version.returncode == 0 and memoryos_actors.__version__ in version.stdout
    bare = _run()
    assert bare.returncode == 0, bare.stderr
    assert "usage: memoryos" in bare.stdout and "ingest" in bare.stdout
    assert bare.stderr == ""


def test_export_keeps_an_existing_file_unless_forced_and_dash_is_stdout(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _ok(
        _run(
            "ingest",
            str(
                _jsonl(
                    tmp_path / "t.jsonl",
                    [{"user_id": "ann", "query": "My cat is called Miso.", "response": "Cute!"}],
                )
            ),
            data_dir=data,
        )
    )
    target = tmp_path / "ann.json"
    target.write_text("precious", encoding="utf-8")
    refused = _run("export", "ann", str(target), data_dir=data)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == "precious"
    _ok(_run("export", "ann", str(target), "--force", data_dir=data))
    assert "Miso" in target.read_text(encoding="utf-8")
    out = _run("export", "ann", "-", data_dir=data, cwd=tmp_path)
    assert "Miso" in json.dumps(json.loads(_ok(out)))  # the whole of stdout is the export
    assert not (tmp_path / "-").exists()
    # The file on stdout imports like any export.
    copy = tmp_path / "copy.json"
    copy.write_text(out.stdout, encoding="utf-8")
    _ok(_run("import", str(copy), "--as", "ann2", data_dir=data))
    assert _turns(data, "ann2") == 1


def test_export_force_writes_through_a_symlink_and_a_fifo_never_over_them(
    tmp_path: Path,
) -> None:
    # `export ann /dev/stdout --force` as root must not replace the device node: a link, a
    # FIFO or a device is written through; only a regular file is replaced (#41 item 13).
    import stat

    from fifo_reader import FifoReader

    data = tmp_path / "data"
    turns = [{"user_id": "ann", "query": "My cat is called Miso.", "response": "Cute!"}]
    _ok(_run("ingest", str(_jsonl(tmp_path / "t.jsonl", turns)), data_dir=data))
    _ok(_run("--tenant", "acme", "ingest", str(_jsonl(tmp_path / "t.jsonl", turns)), data_dir=data))

    real = tmp_path / "kept" / "ann.json"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    _ok(_run("export", "ann", str(link), "--force", data_dir=data))
    assert link.is_symlink() and "Miso" in real.read_text(encoding="utf-8")

    for tenant in ((), ("--tenant", "acme")):
        fifo = tmp_path / f"pipe{len(tenant)}"
        os.mkfifo(fifo)
        reader = FifoReader(fifo)
        done = _run(*tenant, "export", "ann", str(fifo), "--force", data_dir=data)
        got = reader.join()
        _ok(done)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a file"
        assert got[:8] == b"MOSEXP\0\0" and b"Miso" in got  # the whole export, through it
        assert (b"acme" in got) is False

    (tmp_path / "adir").mkdir()
    refused = _run("export", "ann", str(tmp_path / "adir"), "--force", data_dir=data)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "is a directory: an export is written to a regular file" in refused.stderr


def test_export_refuses_a_missing_folder_naming_it_and_how_to_make_it(tmp_path: Path) -> None:
    # A typo in the path used to become new folders silently (#46 item 7).
    data = tmp_path / "data"
    turns = [{"user_id": "ann", "query": "My cat is called Miso.", "response": "Cute!"}]
    _ok(_run("ingest", str(_jsonl(tmp_path / "t.jsonl", turns)), data_dir=data))
    for tenant in ((), ("--tenant", "acme")):
        target = tmp_path / "no such" / "deeper" / "ann.json"
        refused = _run(*tenant, "export", "ann", str(target), data_dir=data)
        assert refused.returncode == 2, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in refused.stderr
        assert str(target.parent) in lines[0] and "mkdir -p" in lines[0]
        assert not (tmp_path / "no such").exists()
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    refused = _run("export", "ann", str(tmp_path / "afile" / "ann.json"), data_dir=data)
    assert refused.returncode == 2 and "is not a folder" in refused.stderr
    (tmp_path / "made").mkdir()
    _ok(_run("export", "ann", str(tmp_path / "made" / "ann.json"), data_dir=data))
    assert "Miso" in (tmp_path / "made" / "ann.json").read_text(encoding="utf-8")


def test_forget_without_a_terminal_refuses_unless_yes(tmp_path: Path) -> None:
    # Piped or scripted, there is no one to ask: deleting anyway was the bug (#46 item 7).
    data = tmp_path / "data"
    turns = [{"user_id": "ann", "query": "I like kites.", "response": "Nice."}]
    _ok(_run("ingest", str(_jsonl(tmp_path / "t.jsonl", turns)), data_dir=data))
    refused = _run("forget", "ann", data_dir=data, stdin="y\n")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "--yes" in lines[0] and "'ann'" in lines[0]
    assert _turns(data, "ann") == 1
    assert "forgot 'ann'" in _ok(_run("forget", "ann", "--yes", data_dir=data))
    assert _run("inspect", "ann", data_dir=data).returncode == 2


def test_forget_asks_on_a_terminal_and_yes_skips_the_question(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _ok(
        _run(
            "ingest",
            str(
                _jsonl(
                    tmp_path / "t.jsonl",
                    [
                        {"user_id": u, "query": "I like kites.", "response": "Nice."}
                        for u in ("ann", "bo")
                    ],
                )
            ),
            data_dir=data,
        )
    )

    def forget_on_a_tty(answer: str) -> subprocess.CompletedProcess[str]:
        leader, follower = os.openpty()
        try:
            os.write(leader, answer.encode())  # typed ahead: the terminal keeps it
            base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
            return subprocess.run(
                [sys.executable, "-m", "memoryos_actors", "--data-dir", str(data), "forget", "ann"],
                stdin=follower,
                capture_output=True,
                text=True,
                timeout=120,
                env={**base, "PYTHONPATH": str(_REPO)},
                cwd=_REPO,
                check=False,
            )
        finally:
            os.close(follower)
            os.close(leader)

    kept = forget_on_a_tty("n\n")
    assert kept.returncode == 1 and "[y/N]" in kept.stdout, kept.stdout + kept.stderr
    assert _turns(data, "ann") == 1
    gone = forget_on_a_tty("y\n")
    assert gone.returncode == 0 and "forgot 'ann'" in gone.stdout
    assert _run("inspect", "ann", data_dir=data).returncode == 2
    assert "forgot 'bo'" in _ok(_run("forget", "bo", "--yes", data_dir=data))


def test_chat_slash_commands_are_never_stored_and_replies_do_not_nest(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = _ok(
        _run(
            "chat",
            "--user",
            "sam",
            "--skip-provider-check",
            data_dir=data,
            stdin=(
                "I adopted a beagle called Rufus last week\n/help\n"
                "what is my dog called?\n/nonsense\nwhat is my dog called again?\n"
                "and what was my dog called once more?\n"
            ),
        )
    )
    assert "/quit" in out  # the help was shown
    state = json.loads(_ok(_run("inspect", "sam", "--json", data_dir=data)))
    stored = [p["query"] for p in state["stm"]]
    assert state["turns"] == 4 and not any(q.startswith("/") for q in stored), stored
    replies = [line for line in out.splitlines() if line.startswith("assistant:")]
    assert len(replies) == 4
    for reply in replies[1:]:
        # The offline backend quotes what was said, once: no quoted reply inside a reply,
        # no speaker labels, times or markdown headings of the rendered context.
        assert reply.count("From what I remember") == 1, reply
        for noise in ("User:", "Assistant:", "##", "[20"):
            assert noise not in reply, reply
        assert "Rufus" in reply, reply


# -- one namespace -------------------------------------------------------------------------


def test_tenant_option_maps_ids_as_the_server_does_and_a_miss_names_the_tenant(
    tmp_path: Path,
) -> None:
    from memoryos_actors.server.tenancy import internal_id
    from memoryos_actors.store.userstore import list_users

    data = tmp_path / "data"
    turns = _jsonl(
        tmp_path / "t.jsonl",
        [{"user_id": "zoe", "query": "I live in Lyon.", "response": "Lovely city."}],
    )
    _ok(_run("ingest", str(turns), data_dir=data, env={"MEMORYOS_TENANT": "me"}))
    assert list_users(data) == [internal_id("me", "zoe")]
    assert _turns(data, "zoe", "--tenant", "me") == 1
    for args in (("inspect", "zoe"), ("--tenant", "other", "stats", "--user", "zoe")):
        miss = _run(*args, data_dir=data)
        assert miss.returncode == 2 and "Traceback" not in miss.stderr
        assert "tenant 'me'" in miss.stderr and "--tenant me" in miss.stderr, miss.stderr
    stats = json.loads(_ok(_run("--tenant", "other", "stats", data_dir=data)))
    assert stats["stored"]["users"] == 0
    _ok(_run("--tenant", "me", "export", "zoe", str(tmp_path / "zoe.json"), data_dir=data))
    _ok(_run("--tenant", "other", "import", str(tmp_path / "zoe.json"), data_dir=data))
    assert _turns(data, "zoe", "--tenant", "other") == 1
    assert sorted(list_users(data)) == [internal_id("me", "zoe"), internal_id("other", "zoe")]


# -- ingest you can re-run -----------------------------------------------------------------


def test_ingest_run_twice_stores_each_turn_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    records = [
        {"user_id": "ann", "query": "My cat is called Miso.", "response": "Cute!"},
        {"user_id": "ann", "query": "ok", "response": "ok", "turn_key": "msg-2"},
        {"user_id": "bo", "query": "I play the cello.", "response": "Lovely."},
        # The same words again later are another turn.
        {"user_id": "ann", "query": "My cat is called Miso.", "response": "Cute!"},
    ]
    path = _jsonl(tmp_path / "turns.jsonl", records)
    _ok(_run("ingest", str(path), data_dir=data))
    again = _ok(_run("ingest", str(path), data_dir=data))
    assert "0 turns were new" in again
    assert _turns(data, "ann") == 3 and _turns(data, "bo") == 1
    # A record's own key wins: the same key with other words is the turn stored before.
    _jsonl(
        path,
        [
            *records,
            {"user_id": "ann", "query": "other words", "response": "x", "turn_key": "msg-2"},
        ],
    )
    _ok(_run("ingest", str(path), data_dir=data))
    assert _turns(data, "ann") == 3
    bad = _jsonl(tmp_path / "bad.jsonl", [{"user_id": "a", "query": "q", "turn_key": 7}])
    refused = _run("ingest", str(bad), data_dir=data)
    assert refused.returncode == 2 and "bad.jsonl:1: 'turn_key'" in refused.stderr


def test_ingest_locomo_run_twice_stores_each_page_once(tmp_path: Path) -> None:
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I started pottery."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "How is it going?"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "My teacher is patient."},
                {"speaker": "Bo", "dia_id": "D1:4", "text": "That helps."},
            ],
        },
        "qa": [],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    data = tmp_path / "data"
    _ok(_run("ingest", str(path), data_dir=data))
    first = _turns(data, "conv-1")
    _ok(_run("ingest", str(path), data_dir=data))
    assert first >= 2 and _turns(data, "conv-1") == first


# -- sharded data directories --------------------------------------------------------------


def test_every_command_works_on_a_sharded_directory_and_one_shard_unshards_it(
    tmp_path: Path,
) -> None:
    from memoryos_actors import MemoryOS

    data = tmp_path / "data"
    users = [f"u{n}" for n in range(6)]
    _ok(
        _run(
            "ingest",
            str(
                _jsonl(
                    tmp_path / "a.jsonl",
                    [
                        {"user_id": u, "query": f"{u} likes kites number {n}.", "response": "ok"}
                        for n, u in enumerate(users)
                    ],
                )
            ),
            data_dir=data,
        )
    )
    _ok(_run("rebalance", "--shards", "2", data_dir=data))
    assert (data / "shards.json").exists()
    # Writes (in-process shards), reads (the user's shard, read-only), and the rest.
    _ok(
        _run(
            "ingest",
            str(
                _jsonl(
                    tmp_path / "b.jsonl",
                    [
                        {"user_id": u, "query": f"{u} also likes tea.", "response": "ok"}
                        for u in users
                    ],
                )
            ),
            data_dir=data,
        )
    )
    _ok(
        _run(
            "chat",
            "--user",
            "u0",
            "--skip-provider-check",
            data_dir=data,
            stdin="what do I like?\n",
        )
    )
    assert _turns(data, "u0") == 3 and _turns(data, "u5") == 2
    stats = json.loads(_ok(_run("stats", data_dir=data)))
    assert stats["stored"]["users"] == 6 and stats["stored"]["turns"] == 13
    assert "page:p1" in _ok(_run("memories", "u1", data_dir=data))
    _ok(_run("export", "u1", str(tmp_path / "u1.json"), data_dir=data))
    _ok(_run("forget", "u1", "--yes", data_dir=data))
    _ok(_run("import", str(tmp_path / "u1.json"), "--as", "u1-back", data_dir=data))
    _ok(_run("repair", "u2", data_dir=data))
    # Back to one plain directory: no layout file, no shard directories, every user there.
    _ok(_run("rebalance", "--shards", "1", data_dir=data))
    assert not (data / "shards.json").exists()
    assert not list(data.glob("shard-*"))
    with MemoryOS.open(data, read_only=True) as mem:
        assert sorted(mem.users()) == sorted([*(u for u in users if u != "u1"), "u1-back"])
    assert _turns(data, "u0") == 3 and _turns(data, "u1-back") == 2
