"""The archive of evicted memory and the portable export files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from fifo_reader import FifoReader
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import CorruptDataError, InvalidInput
from memoryos_actors.store import Archive, NewerFormatError, read_export, write_export

SEGMENTS = [
    {"kind": "segment", "summary": "Trip to Kyoto in spring", "keywords": ["kyoto", "travel"]},
    {"kind": "page", "query": "What did I eat in Kyoto?", "response": "Ramen, twice"},
    {"kind": "segment", "summary": "Learning the cello", "keywords": ["music", "cello"]},
]


def test_archived_records_survive_reopen_in_order(tmp_path: Path) -> None:
    with Archive(tmp_path / "archive.log") as arc:
        assert [arc.append(r) for r in SEGMENTS] == [1, 2, 3]
    with Archive(tmp_path / "archive.log") as arc:
        assert list(arc.iter()) == list(enumerate(SEGMENTS, start=1))
        assert len(arc) == 3
        assert arc.append({"kind": "page"}) == 4


def test_keyword_search_ranks_by_matches_and_includes_text_hits(tmp_path: Path) -> None:
    with Archive(tmp_path / "archive.log") as arc:
        for r in SEGMENTS:
            arc.append(r)
        hits = arc.search(frozenset({"kyoto", "travel"}), limit=10)
        assert [h.seq for h in hits] == [1, 2]
        assert hits[0].score == 2.0 and hits[1].score == 1.0
        assert (
            arc.search(frozenset({"cello"}), limit=10)[0].record["summary"] == "Learning the cello"
        )
        assert arc.search(frozenset({"nothing"}), limit=10) == []
        assert len(arc.search(frozenset({"kyoto"}), limit=1)) == 1


def test_a_disabled_archive_writes_nothing_but_reads_old_records(tmp_path: Path) -> None:
    path = tmp_path / "archive.log"
    with Archive(path, enabled=False) as arc:
        assert arc.append(SEGMENTS[0]) == 0
    assert not path.exists()
    with Archive(path) as arc:
        arc.append(SEGMENTS[0])
    with Archive(path, enabled=False) as arc:
        arc.append(SEGMENTS[1])
        assert [r for _, r in arc.iter()] == [SEGMENTS[0]]


def test_a_garbage_archive_raises_corrupt_data_naming_it(tmp_path: Path) -> None:
    (tmp_path / "archive.log").write_bytes(b"\x89PNG not an archive")
    with pytest.raises(CorruptDataError, match="archive.log"):
        Archive(tmp_path / "archive.log")


PAYLOAD = {
    "user_id": "ünï",
    "embedding": b"\x00\x00\x80?" * 4,
    "ints": {1: "one", 2: "two"},
    "tagged": {"$b64": "looks like a tag"},
    "nested": [{"a": None, "b": 1.5, "c": True}],
}


@pytest.mark.parametrize("name", ["export.msgpack", "export.json", "export.bin"])
def test_exports_round_trip_bytes_and_non_string_keys(tmp_path: Path, name: str) -> None:
    write_export(tmp_path / name, PAYLOAD)
    assert read_export(tmp_path / name) == PAYLOAD


def test_json_exports_store_embeddings_as_base64(tmp_path: Path) -> None:
    write_export(tmp_path / "e.json", {"embedding": b"\x01\x02\x03"})
    doc = json.loads((tmp_path / "e.json").read_text("utf-8"))
    assert doc["payload"]["embedding"] == {"$b64": "AQID"}


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**53), 2**53),
        st.text(max_size=10),
        st.binary(max_size=10),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        # Tag names as keys (a map whose only key is one must be escaped), ints as keys.
        st.dictionaries(
            st.one_of(st.text(max_size=5), st.integers(0, 9), st.sampled_from(["$b64", "$map"])),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=4))
@settings(max_examples=150, deadline=None)
def test_any_payload_round_trips_through_json(payload: dict) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        write_export(Path(d) / "x.json", payload)
        assert read_export(Path(d) / "x.json") == payload


@pytest.mark.parametrize("name", ["bad.msgpack", "bad.json"])
def test_damaged_exports_raise_corrupt_data_naming_the_file(tmp_path: Path, name: str) -> None:
    path = write_export(tmp_path / name, PAYLOAD)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data[: len(data) - 3]))
    with pytest.raises(CorruptDataError, match=name):
        read_export(path)


def test_an_export_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"format": "memoryos-export", "version": 9, "payload": {}}))
    with pytest.raises(NewerFormatError):
        read_export(path)


def test_unexportable_values_are_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        write_export(tmp_path / "x.json", {"x": object()})
    with pytest.raises(InvalidInput):
        write_export(tmp_path / "x.msgpack", {"x": object()})


# -- the archive's checkpoint: opening and reading cost the tail, not the history --------


def _fill_archive(path: Path, n: int) -> list[dict]:
    records = [{"kind": "page", "n": i, "text": "x" * (i % 7)} for i in range(1, n + 1)]
    with Archive(path) as arc:
        for r in records:
            arc.append(r)
    return records


def test_a_cleanly_closed_archive_opens_without_reading_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.store import _framing

    path = tmp_path / "archive.log"
    records = _fill_archive(path, 40)

    def no_scan(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole archive was scanned")

    monkeypatch.setattr(_framing, "scan", no_scan)
    with Archive(path) as arc:
        assert len(arc) == 40
        assert arc.append({"kind": "page", "n": 41}) == 41
    with Archive(path) as arc:
        assert [r for _, r in arc.iter()] == [*records, {"kind": "page", "n": 41}]


def test_an_archive_changed_after_its_checkpoint_is_scanned_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "archive.log"
    records = _fill_archive(path, 10)
    with open(path, "ab") as f:  # a torn frame, as a crash mid-append leaves it
        f.write(b"\x00\x00\x01\x00garbage")
    with Archive(path) as arc:
        assert [r for _, r in arc.iter()] == records
        assert arc.append({"kind": "page", "n": 11}) == 11


def test_damage_in_the_middle_of_a_checkpointed_archive_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "archive.log"
    _fill_archive(path, 10)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    was = path.stat()
    path.write_bytes(bytes(data))  # same size; the modification time tells
    # A later write, whatever the file system's timestamp granularity: set, not slept for.
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns + 1_000_000_000))
    with pytest.raises(CorruptDataError, match="archive.log") as err:
        Archive(path)
    assert err.value.offset is not None and err.value.offset <= middle
    assert err.value.intact_after and err.value.intact_after >= 1
    assert path.read_bytes() == bytes(data)  # nothing cut, nothing rewritten
    assert not list(tmp_path.glob("archive.log.corrupt-*"))


@pytest.mark.parametrize("content", [b"", b"\xc1garbage", b"\x81\xa1v\x01"])
def test_an_unreadable_checkpoint_is_ignored(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "archive.log"
    records = _fill_archive(path, 5)
    (tmp_path / "archive.log.ckpt").write_bytes(content)
    with Archive(path) as arc:
        assert [r for _, r in arc.iter()] == records


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 60),
    reopen_at=st.integers(0, 60),
    after=st.integers(0, 70),
    every=st.sampled_from([1, 2, 5, 16]),
)
def test_reading_after_a_seq_seeks_through_marks_and_loses_nothing(
    tmp_path_factory: pytest.TempPathFactory, n: int, reopen_at: int, after: int, every: int
) -> None:
    from memoryos_actors.store import _framing

    path = tmp_path_factory.mktemp("arc") / "archive.log"
    old = _framing.MARK_EVERY
    _framing.MARK_EVERY = every
    try:
        records = [{"n": i} for i in range(1, n + 1)]
        split = min(reopen_at, n)
        with Archive(path) as arc:  # part written, closed (checkpoint), the rest appended
            for r in records[:split]:
                arc.append(r)
        with Archive(path) as arc:
            for r in records[split:]:
                arc.append(r)
            assert list(arc.iter(after_seq=after)) == [
                (i, r) for i, r in enumerate(records, start=1) if i > after
            ]
        with Archive(path) as arc:
            assert list(arc.iter(after_seq=after)) == [
                (i, r) for i, r in enumerate(records, start=1) if i > after
            ]
    finally:
        _framing.MARK_EVERY = old


def test_closing_an_archive_opened_from_its_checkpoint_with_no_append_leaves_it_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "archive.log"
    _fill_archive(path, 5)
    ckpt = tmp_path / "archive.log.ckpt"
    # Dated an hour back: a rewrite would date it now, whatever the timestamps' granularity.
    hour_ago = ckpt.stat().st_mtime_ns - 3_600_000_000_000
    os.utime(ckpt, ns=(hour_ago, hour_ago))
    before = ckpt.stat().st_mtime_ns, ckpt.stat().st_ino
    with Archive(path) as arc:
        assert len(arc) == 5
    assert (ckpt.stat().st_mtime_ns, ckpt.stat().st_ino) == before
    with Archive(path) as arc:  # an append makes the next close describe the file anew
        arc.append({"kind": "page", "n": 6})
    assert (ckpt.stat().st_mtime_ns, ckpt.stat().st_ino) != before
    with Archive(path) as arc:
        assert len(arc) == 6


# -- where an export is written: #41 item 13 -------------------------------------------------


def test_an_export_through_a_symlink_replaces_the_file_it_names_and_keeps_the_link(
    tmp_path: Path,
) -> None:
    real = tmp_path / "real" / "ann.json"
    real.parent.mkdir()
    real.write_text("old", encoding="utf-8")
    link = tmp_path / "ann-link.json"
    link.symlink_to(real)
    write_export(link, {"user_id": "ann"})
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert read_export(real) == {"user_id": "ann"}
    dangling = tmp_path / "to-be.json"
    dangling.symlink_to(tmp_path / "real" / "new.json")  # names a file not made yet
    write_export(dangling, {"user_id": "bob"})
    assert dangling.is_symlink() and read_export(tmp_path / "real" / "new.json")["user_id"] == "bob"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["ann.json", "new.json"]


def test_an_export_into_a_fifo_is_written_through_it_not_over_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    write_export(fifo, {"user_id": "ann", "embs": b"\x00\x01"})
    got = reader.join()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"
    regular = tmp_path / "regular"
    write_export(regular, {"user_id": "ann", "embs": b"\x00\x01"})
    assert got == regular.read_bytes()  # the reader got the whole export


def test_an_export_onto_a_directory_or_a_socket_is_refused_in_one_line(tmp_path: Path) -> None:
    import socket

    (tmp_path / "d").mkdir()
    with pytest.raises(InvalidInput, match="is a directory: an export is written to"):
        write_export(tmp_path / "d", {"user_id": "ann"})
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(InvalidInput, match="is not a regular file: an export is written"):
            write_export(tmp_path / "s", {"user_id": "ann"})
        assert stat.S_ISSOCK(os.lstat(tmp_path / "s").st_mode)
    finally:
        sock.close()
