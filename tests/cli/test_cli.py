"""The ``memoryos`` command end to end: through its entry function in this process
(:mod:`inprocess`), and in a subprocess, as a user runs it, where the process itself is
what a test checks (the demo's clean terminal, the module entry points, exit codes and
error lines of a failing command)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inprocess import Ran, run_cli

from memoryos_actors.cli import render_prometheus
from memoryos_actors.cli._common import UsageError
from memoryos_actors.cli.bench import find_bench_dir
from memoryos_actors.cli.demo import load_script

_REPO = Path(__file__).resolve().parents[2]


def _run(
    *args: str,
    data_dir: Path | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    env_data_dir: Path | None = None,
) -> Ran:
    """The command in this process (see :mod:`inprocess`)."""
    env = {"MEMORYOS_DATA_DIR": str(env_data_dir)} if env_data_dir is not None else None
    return run_cli(*args, data_dir=data_dir, stdin=stdin, cwd=cwd or _REPO, env=env)


def _run_process(
    *args: str,
    data_dir: Path | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    env_data_dir: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess, as a user runs it."""
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(_REPO)}
    env.pop("MEMORYOS_DATA_DIR", None)
    if env_data_dir is not None:
        env["MEMORYOS_DATA_DIR"] = str(env_data_dir)
    cmd = [sys.executable, "-m", "memoryos_actors"]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    return subprocess.run(
        [*cmd, *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd or _REPO,
        timeout=120,
        check=False,
    )


def _ok(proc: Ran | subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def _state(data_dir: Path, user: str) -> dict[str, Any]:
    return json.loads(_ok(_run("inspect", user, "--json", data_dir=data_dir)))


# ------------------------------------------------------------------------------ data files


def _turn(speaker: str, dia_id: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


def _locomo_sample(sample_id: str, a: str, b: str, topic: str) -> dict[str, Any]:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn(a, "D1:1", f"I started learning {topic} last month."),
                _turn(b, "D1:2", f"How is {topic} going so far?"),
                _turn(a, "D1:3", f"My {topic} teacher is very patient."),
                _turn(b, "D1:4", "Patient teachers make a big difference."),
            ],
            "session_2_date_time": "9:05 am on 10 June, 2023",
            "session_2": [
                _turn(b, "D2:1", f"Did you practise {topic} this week?"),
                _turn(a, "D2:2", f"Yes, I practised {topic} every evening."),
                _turn(b, "D2:3", "Daily practice pays off."),
            ],
        },
        "qa": [
            {
                "question": f"What is {a} learning?",
                "answer": topic,
                "evidence": ["D1:1"],
                "category": 4,
            }
        ],
    }


@pytest.fixture()
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "mini_locomo.json"
    samples = [
        _locomo_sample("conv-1", "Ann", "Ben", "pottery"),
        _locomo_sample("conv-2", "Cleo", "Dan", "chess"),
    ]
    path.write_text(json.dumps(samples, indent=1), encoding="utf-8")
    return path


@pytest.fixture()
def turns_file(tmp_path: Path) -> Path:
    path = tmp_path / "turns.jsonl"
    lines = [
        {
            "user_id": "ann",
            "query": "My cat is called Miso.",
            "response": "A lovely name.",
            "timestamp": 1_700_000_000,
        },
        {
            "user_id": "ann",
            "query": "I go climbing on Saturdays.",
            "response": "Fun!",
            "timestamp": 1_700_000_100,
        },
        {"user_id": "bo", "query": "I collect vinyl records.", "response": "Which genre?"},
    ]
    path.write_text("\n".join(json.dumps(rec) for rec in lines) + "\n\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ prometheus

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(,|$)')


def parse_prometheus(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A strict reader of the text exposition format; returns samples per sample name.

    Fails on: bad metric or label names, a metric TYPE declared twice, samples of a family
    before its TYPE line or separated from it, duplicate samples, unparsable values.
    """
    assert text.endswith("\n")
    types: dict[str, str] = {}
    family: str | None = None
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    closed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name), name
            assert name not in types, f"second TYPE line for {name}"
            assert kind in ("counter", "gauge", "summary", "histogram", "untyped")
            types[name] = kind
            if family is not None:
                closed.add(family)
            family = name
            continue
        assert line and not line.startswith("#"), f"unexpected line {line!r}"
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name = m.group("name")
        base = name
        for suffix in ("_sum", "_count", "_bucket"):
            if name.endswith(suffix) and name[: -len(suffix)] in types:
                base = name[: -len(suffix)]
        assert base == family and base not in closed, f"{name} outside its family block"
        labels: dict[str, str] = {}
        rest = m.group("labels") or ""
        pos = 0
        while pos < len(rest):
            lm = _LABEL.match(rest, pos)
            assert lm, f"bad labels in {line!r}"
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, f"duplicate sample {key}"
        seen.add(key)
        samples.setdefault(name, []).append((labels, float(m.group("value"))))
    return samples


def _value(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    for got, value in samples[name]:
        if all(got.get(k) == v for k, v in labels.items()):
            return value
    raise AssertionError(f"no sample {name} {labels}")


def test_prometheus_rendering_escapes_label_values_and_declares_each_metric_once() -> None:
    stats = {
        "turns": 3,
        "retrievals": 1,
        "active_users": 1,
        "user_group_restarts": 2,
        "stored": {"users": 1, "turns": 3},
        "gateway": {
            "backend": 'odd "back\\end"\nname',
            "calls": 5,
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "embedder": {"name": "hashing", "dim": 512},
            "latency": {"count": 4, "mean_ms": 2.5, "p50_ms": 2.0, "p95_ms": 4.0, "p99_ms": 4.0},
            "by_kind": {"page_meta": {"calls": 3}, "chat_reply": {"calls": 2}},
        },
    }
    samples = parse_prometheus(render_prometheus(stats))
    assert _value(samples, "memoryos_info", embedder="hashing") == 1
    backend = samples["memoryos_info"][0][0]["backend"]
    assert backend == 'odd \\"back\\\\end\\"\\nname'
    assert _value(samples, "memoryos_llm_tokens_total", type="prompt") == 10
    assert _value(samples, "memoryos_llm_latency_seconds", quantile="0.5") == 0.002
    assert _value(samples, "memoryos_llm_latency_seconds_sum") == pytest.approx(0.01)
    assert _value(samples, "memoryos_llm_latency_seconds_count") == 4
    assert _value(samples, "memoryos_llm_calls_by_kind_total", kind="chat_reply") == 2
    assert _value(samples, "memoryos_user_group_restarts_total") == 2


# ------------------------------------------------------------------------------ commands


def test_demo_shows_tiers_promotion_provenance_and_recovery_without_noise(
    tmp_path: Path,
) -> None:
    proc = _run_process("demo", data_dir=tmp_path / "demo")
    out = _ok(proc)
    assert proc.stderr == ""  # no log lines or warnings leak to the terminal
    for needle in (
        "MTM segments by heat",
        "N_visit",
        "L_interaction",
        "STM",
        "LPM knowledge base",
        "promotion",
        "retrieval with provenance",
        "supervision tree",
        "restarted by its supervisor: yes",
        "nothing lost",
    ):
        assert needle in out, needle
    assert "no segment passed" not in out
    # Promotion really happened: the promotion table shows persona updates and the
    # facts' source segments for at least one user.
    rows = re.findall(r"│ (alice|bob|chen) +│ (\d+) +│ (\d+) +│", out)
    assert rows and any(int(updates) > 0 and int(facts) > 0 for _, updates, facts in rows)
    assert re.search(r"│ mtm +│ p\d+@s\d+ ", out)  # a retrieved page names its segment
    assert re.search(r"mtm running restarts=1", out)
    assert "MemoryOS.kill_actor" in out  # the demo crashes the actor through the facade
    assert max(len(line) for line in out.splitlines()) <= 100


def test_the_shipped_demo_script_is_data_with_every_user_and_follow_up() -> None:
    script = load_script()
    assert [u.user_id for u in script.users] == ["alice", "bob", "chen"]
    assert all(u.turns and u.follow_ups for u in script.users)
    assert (script.crash_user, script.crash_tier) == ("alice", "mtm")


def test_a_malformed_demo_script_is_refused_naming_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"users": {"ann": {"profile": {}, "turns": [{"query": 1}]}}}))
    proc = _run("demo", "--script", str(path), data_dir=tmp_path / "demo")
    assert proc.returncode == 2 and "users.ann.turns[0]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_runs_the_checkout_script_with_its_arguments() -> None:
    out = _ok(_run("bench", "store", "--help"))
    assert "usage:" in out and "store_bench" in out


def test_bench_outside_a_checkout_says_to_run_it_from_one(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()  # a bench folder alone does not make a checkout
    with pytest.raises(UsageError, match="source checkout"):
        find_bench_dir([tmp_path])
    assert find_bench_dir([tmp_path, _REPO]) == _REPO / "bench"


def test_both_module_entry_points_print_help() -> None:
    assert "ingest" in _ok(_run_process("--help"))
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "memoryos_actors.cli", "stats", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and "--prometheus" in proc.stdout


def test_ingest_locomo_stores_one_user_per_conversation_with_every_page(
    tmp_path: Path, locomo_file: Path
) -> None:
    data = tmp_path / "data"
    out = _ok(_run("ingest", str(locomo_file), data_dir=data))
    assert "ingested 8 turns for 2 users" in out
    ann = _state(data, "conv-1")
    texts = [p["query"] for p in ann["stm"]]
    # Session 2 opens with speaker B: that page has an empty query, as in the bench loader.
    assert texts == [
        "I started learning pottery last month.",
        "My pottery teacher is very patient.",
        "",
        "Yes, I practised pottery every evening.",
    ]
    assert ann["stm"][0]["timestamp"] == 1683554160.0  # 1:56 pm on 8 May 2023, UTC
    assert _state(data, "conv-2")["turns"] == 4


def test_ingest_jsonl_then_stats_and_inspect_show_the_turns(
    tmp_path: Path, turns_file: Path
) -> None:
    data = tmp_path / "data"
    _ok(_run("ingest", str(turns_file), data_dir=data))
    inspect = _ok(_run("inspect", "ann", data_dir=data))
    assert "My cat is called Miso." in inspect and "2 turns stored" in inspect
    stats = json.loads(_ok(_run("stats", data_dir=data)))
    assert stats["stored"]["users"] == 2 and stats["stored"]["turns"] == 3
    per_user = json.loads(_ok(_run("stats", "--user", "bo", data_dir=data)))
    assert per_user["turns"] == 1 and per_user["stm_pages"] == 1


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        (
            "bad.jsonl",
            '{"user_id": "a", "query": "hi"}\n\n{"user_id": "", "query": "x"}\n',
            "bad.jsonl:3:",
        ),
        (
            "bad2.jsonl",
            '{"user_id": "a", "query": "hi"}\n{"user_id": "a", "query": \n',
            "bad2.jsonl:2:",
        ),
        ("bad.json", '[\n  {"sample_id": "x",\n  "conversation": }\n]\n', "bad.json:3:"),
        ("shape.json", '[{"sample_id": "x"}]', "shape.json: sample 0"),
        (
            "big.jsonl",
            '{"user_id": "a", "query": "ok"}\n{"user_id": "a", "query": "' + "x" * 70_000 + '"}\n',
            "big.jsonl:2: query is 70000 bytes",
        ),
    ],
)
def test_a_malformed_file_is_refused_naming_file_and_line_and_stores_nothing(
    tmp_path: Path, name: str, content: str, where: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    data = tmp_path / "data"
    proc = _run("ingest", str(path), data_dir=data)
    assert proc.returncode == 2
    assert where in proc.stderr and "Traceback" not in proc.stderr
    assert not data.exists()  # the whole file is checked before anything is stored


def test_the_data_dir_comes_from_memoryos_data_dir_when_no_flag_is_given(
    tmp_path: Path, turns_file: Path
) -> None:
    data = tmp_path / "from-env"
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    _ok(_run("ingest", str(turns_file), env_data_dir=data, cwd=elsewhere))
    assert data.is_dir()
    assert not (elsewhere / "memoryos-data").exists()
    stats = json.loads(_ok(_run("stats", env_data_dir=data, cwd=elsewhere)))
    assert stats["stored"]["turns"] == 3
    # --data-dir wins over the environment.
    other = tmp_path / "flag"
    _ok(_run("chat", "--user", "cy", data_dir=other, env_data_dir=data, stdin="hi\n"))
    assert json.loads(_ok(_run("stats", data_dir=other)))["stored"]["users"] == 1
    assert json.loads(_ok(_run("stats", env_data_dir=data)))["stored"]["users"] == 2


def test_unknown_user_and_missing_data_dir_are_clean_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    proc = _run_process("inspect", "nobody", data_dir=data)
    assert proc.returncode == 2 and "nobody" in proc.stderr and "Traceback" not in proc.stderr
    proc = _run_process("stats", data_dir=tmp_path / "absent")
    assert proc.returncode == 2 and "no data directory" in proc.stderr
    assert not (tmp_path / "absent").exists()


def test_stats_prometheus_is_valid_and_counts_stored_turns(
    tmp_path: Path, turns_file: Path
) -> None:
    # stats reads the files and activates no user: the live counters (turns since start,
    # LLM calls, restarts) are a running server's, at /metrics.
    data = tmp_path / "data"
    _ok(_run("ingest", str(turns_file), data_dir=data))
    _ok(_run("chat", "--user", "ann", data_dir=data, stdin="What is my cat called?\n"))
    samples = parse_prometheus(_ok(_run("stats", "--prometheus", data_dir=data)))
    assert _value(samples, "memoryos_stored_turns") == 4
    assert _value(samples, "memoryos_users") == 2
    assert _value(samples, "memoryos_damaged_users") == 0
    user = parse_prometheus(_ok(_run("stats", "--user", "ann", "--prometheus", data_dir=data)))
    assert _value(user, "memoryos_user_turns", user="ann") == 3


def test_export_forget_import_round_trip_restores_the_user(
    tmp_path: Path, turns_file: Path
) -> None:
    data = tmp_path / "data"
    _ok(_run("ingest", str(turns_file), data_dir=data))
    before = _state(data, "ann")
    export = tmp_path / "ann.json"
    assert "exported 'ann'" in _ok(_run("export", "ann", str(export), data_dir=data))
    assert "forgot 'ann'" in _ok(_run("forget", "ann", "--yes", data_dir=data))
    assert _run("inspect", "ann", data_dir=data).returncode == 2
    assert _state(data, "bo")["turns"] == 1  # other users are untouched
    _ok(_run("import", str(export), data_dir=data))
    after = _state(data, "ann")
    assert after["stm"] == before["stm"] and after["turns"] == before["turns"]
    _ok(_run("import", str(export), "--as", "ann-copy", data_dir=data))
    assert _state(data, "ann-copy")["stm"] == before["stm"]
    proc = _run("forget", "ghost", "--yes", data_dir=data)
    assert proc.returncode == 2 and "ghost" in proc.stderr


def test_chat_reads_stdin_until_eof_and_stores_every_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    out = _ok(
        _run(
            "chat",
            "--user",
            "zoe",
            data_dir=data,
            stdin="I'm Zoe and I keep bees.\n\n   \nWhat do I keep?\n",
        )
    )
    assert out.count("assistant:") == 2
    state = _state(data, "zoe")
    assert [p["query"] for p in state["stm"]] == ["I'm Zoe and I keep bees.", "What do I keep?"]
