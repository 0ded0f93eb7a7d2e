"""An import checks the whole export before it writes a byte (#41, items 6 and 12).

Each case edits a real export by hand as a careless or hostile operator would; the import
must refuse it with one line (no traceback), leave no file behind and no user that answers
errors to every call, through the library and through ``memoryos import``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultutil import small_config, turn_query
from inprocess import run_cli

from memoryos_actors import InvalidInput, MemoryOS
from memoryos_actors.store.userstore import USERS_DIR

USER = "alice"


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real export (JSON) of a user with pages in STM, MTM and the archive, and traits."""
    root = tmp_path_factory.mktemp("export")
    with MemoryOS.open(root / "data", small_config()) as mem:
        for i in range(1, 61):
            mem.add_turn(USER, f"I really love hiking and music. {turn_query(USER, i)}", "Nice!")
        mem.flush()
        path = mem.export_user(USER, root / "alice.json")
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    payload = data["payload"]
    assert payload["archive"] and payload["state"]["mtm"]["segments"]
    assert payload["state"]["lpm"]["traits"], "the case about traits needs one"
    return data


def _payload(doc: dict[str, Any]) -> dict[str, Any]:
    p: dict[str, Any] = doc["payload"]
    return p


def _stm_page(doc: dict[str, Any]) -> dict[str, Any]:
    page: dict[str, Any] = _payload(doc)["state"]["stm"]["pages"][-1]
    return page


def _archived_page(doc: dict[str, Any]) -> dict[str, Any]:
    for rec in _payload(doc)["archive"]:
        if rec["t"] == "page":
            page: dict[str, Any] = rec["page"]
            return page
        if rec["t"] == "segment":
            page = rec["segment"]["pages"][0]
            return page
    raise AssertionError("no archived page")


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target: Any = _payload(doc)
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        target: Any = _payload(doc)
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _query_is_a_number(doc: dict[str, Any]) -> None:
    _stm_page(doc)["query"] = 12


def _nan_time(doc: dict[str, Any]) -> None:
    _archived_page(doc)["timestamp"] = float("nan")


def _trait_without_its_name(doc: dict[str, Any]) -> None:
    del _payload(doc)["state"]["lpm"]["traits"][0]["name"]


def _seq_below_the_pages(doc: dict[str, Any]) -> None:
    _payload(doc)["state"]["seq"] = 10


def _user_id_edited(doc: dict[str, Any]) -> None:
    _payload(doc)["user_id"] = "mallory"


def _a_page_of_another_user(doc: dict[str, Any]) -> None:
    _archived_page(doc)["user_id"] = "bob"


def _a_page_held_twice(doc: dict[str, Any]) -> None:
    page = copy.deepcopy(_stm_page(doc))
    _payload(doc)["archive"].append({"t": "page", "keywords": [], "page": page})


def _an_stm_too_large(doc: dict[str, Any]) -> None:
    stm = _payload(doc)["state"]["stm"]
    first = stm["pages"][0]["seq"]
    stm["pages"] = [
        {**stm["pages"][0], "seq": s, "page_id": f"p{s}"} for s in range(first - 21, first)
    ] + stm["pages"]
    # Those seqs are in the archive and MTM already: give them to nobody else.
    pay = _payload(doc)
    pay["archive"] = []
    pay["state"]["mtm"]["segments"] = []
    pay["state"]["mtm"]["page_graph"] = pay["state"]["mtm"]["segment_graph"] = None
    pay["state"]["mtm"]["chains"] = []


def _deeply_nested(doc: dict[str, Any]) -> None:
    _payload(doc)["state"]["turn_keys"] = "HOLE"  # filled in as text by _write


CASES: dict[str, Callable[[dict[str, Any]], None]] = {
    "query is a number": _query_is_a_number,
    "NaN time": _nan_time,
    "trait without its name": _trait_without_its_name,
    "seq below the page ids": _seq_below_the_pages,
    "payload user_id edited": _user_id_edited,
    "page of another user": _a_page_of_another_user,
    "page held twice": _a_page_held_twice,
    "28 pages in a 7-page STM": _an_stm_too_large,
    "version is not a number": _set(("version",), "x"),
    "state is a list": _set(("state",), []),
    "archive is a number": _set(("archive",), 5),
    "edits are numbers": _set(("state", "lpm", "edits"), [1, 2]),
    "mtm state missing": _drop(("state", "mtm")),
    "user_id missing": _drop(("user_id",)),
    "deeply nested": _deeply_nested,
}


def _user_dirs(data_dir: Path) -> list[str]:
    users = data_dir / USERS_DIR
    return sorted(p.name for p in users.iterdir()) if users.exists() else []


def _write(doc: dict[str, Any], path: Path) -> Path:
    if "deeply" in path.stem:
        # json.dumps itself cannot write it: build the text by hand.
        deep = "[" * 100_000 + '"x"' + "]" * 100_000
        text = json.dumps(doc).replace('"turn_keys": "HOLE"', '"turn_keys": ' + deep)
        path.write_text(text, encoding="utf-8")
    else:
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_a_hand_edited_export_is_refused_in_one_line_and_leaves_nothing(
    export: dict[str, Any], case: str, tmp_path: Path
) -> None:
    doc = copy.deepcopy(export)
    CASES[case](doc)
    path = _write(doc, tmp_path / ("deeply.json" if case == "deeply nested" else "edited.json"))
    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, small_config()) as mem:
        with pytest.raises(InvalidInput) as info:
            mem.import_user(path)
        assert "\n" not in str(info.value)
        assert mem.users() == [] and mem.stats()["damaged_users"] == 0
    assert _user_dirs(data_dir) == []
    ran = run_cli("import", str(path), data_dir=data_dir, env={"MEMORYOS_LOG_LEVEL": "critical"})
    assert ran.returncode != 0
    assert "Traceback" not in ran.stderr + ran.stdout
    assert len([line for line in ran.stderr.splitlines() if line.strip()]) == 1, ran.stderr
    assert _user_dirs(data_dir) == []


def test_the_unedited_export_still_imports(export: dict[str, Any], tmp_path: Path) -> None:
    path = _write(copy.deepcopy(export), tmp_path / "alice.json")
    with MemoryOS.open(tmp_path / "data", small_config()) as mem:
        assert mem.import_user(path) == USER
        assert len(mem.stored_page_ids(USER)) == 60
        assert mem.add_turn(USER, "one more", "ok") == "p61"


@pytest.mark.parametrize("name", ["deep.jsonl", "deep.json"])
def test_ingest_of_deeply_nested_json_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    ran = run_cli("ingest", str(path), data_dir=tmp_path / "data")
    assert ran.returncode != 0
    assert "Traceback" not in ran.stderr + ran.stdout
    assert len([line for line in ran.stderr.splitlines() if line.strip()]) == 1, ran.stderr


def test_a_directory_in_place_of_the_cold_index_is_moved_aside_and_rebuilt(
    tmp_path: Path,
) -> None:
    from memoryos_actors.store.cold import COLD_FILE
    from memoryos_actors.store.userstore import user_path

    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, small_config()) as mem:
        for i in range(1, 61):
            mem.add_turn(USER, turn_query(USER, i), "ok")
        mem.flush()
        archived = mem.archived_memories(USER).total
    assert archived > 0
    cold = user_path(data_dir, USER) / COLD_FILE
    cold.unlink()
    cold.mkdir()
    (cold / "keep-me").write_text("an operator's file", encoding="utf-8")
    with MemoryOS.open(data_dir, small_config()) as mem:
        assert mem.archived_memories(USER).total == archived
        assert mem.retrieve(USER, turn_query(USER, 3)).mtm is not None
    kept = list(user_path(data_dir, USER).glob(f"{COLD_FILE}.aside-*/keep-me"))
    assert [p.read_text(encoding="utf-8") for p in kept] == ["an operator's file"]
