"""A data directory written by the code before #43's formats module still opens, whole.

``tests/data/v1_datadir.tar.gz`` was written by ``tests/data/make_v1_datadir.py`` on main
before the WAL and archive records got one owner (``store/formats.py``): three users with
every kind of WAL record (turn, meta, persona, user and agent profile, edit, a repair's
lost placeholder) and of archive record (segment, page, fact, agent trait, lost), a
snapshot and WAL records after it. ``v1_answers.json.gz`` is what the public API answered
for it then. Opening a copy now must answer the same.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

_DATA = Path(__file__).resolve().parents[1] / "data"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_v1_datadir", _DATA / "make_v1_datadir.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_v1_data_directory_answers_as_it_did_when_written(tmp_path: Path) -> None:
    maker = _maker()
    data = maker.unpack(maker.TARBALL, tmp_path / "copy")
    exports = tmp_path / "exports"
    exports.mkdir()
    got = json.loads(json.dumps(maker.answers(data, exports)))
    want = json.loads(gzip.decompress(maker.ANSWERS.read_bytes()))
    for user in maker.USERS:
        # A Memory has grown fields since (a page's query and response apart, a segment's
        # heat and keywords): compared on the fields it had then, the new ones checked
        # against them.
        then = [
            {k: m[k] for k in w}
            for m, w in zip(got[user]["memories"], want[user]["memories"], strict=True)
        ]
        assert then == want[user]["memories"], (user, "memories")
        for m in got[user]["memories"]:
            if m["kind"] == "page":
                assert f"{m['query']}\n{m['response']}" == m["text"]
        # A KBEntry has grown a remembered fact's origin and metadata (#44): a v1
        # directory has none, so they are empty, and compared without them.
        got[user]["user_state"] = _without_new_entry_fields(got[user]["user_state"])
        # MTM's owed work has grown the count of deletions its summaries have seen: at
        # activation it has seen every deletion the user's edits hold.
        state = got[user]["export"]["payload"]["state"]
        work = state["mtm"]["work"]
        deletions = [e for e in state["lpm"]["edits"] if e["op"] == "delete"]
        assert work.pop("deletions_seen") == len(deletions), user
        for part in ("user_state", "retrieve", "export"):
            assert got[user][part] == want[user][part], (user, part)


def _without_new_entry_fields(value: Any) -> Any:
    """``value`` with each KB entry's ``origin`` and ``metadata`` left out, checked empty."""
    if isinstance(value, dict):
        if "entry_id" in value and "origin" in value:
            assert value["origin"] == "" and value["metadata"] == "", value
            value = {k: v for k, v in value.items() if k not in ("origin", "metadata")}
        return {k: _without_new_entry_fields(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_new_entry_fields(v) for v in value]
    return value
