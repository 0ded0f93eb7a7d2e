"""The write-ahead log: round trips, LSNs, truncation, recovery from damage, threads."""

from __future__ import annotations

import os
import threading
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from memoryos_actors.errors import ConfigError, CorruptDataError, InvalidInput, StorageError
from memoryos_actors.store import MAX_RECORD_BYTES, NewerFormatError
from memoryos_actors.store._flusher import FLUSHER
from memoryos_actors.store._frames import HEADER_SIZE, encode_frame, encode_header
from memoryos_actors.store.wal import WAL

records = st.dictionaries(
    st.text(max_size=8),
    st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.text(max_size=40),
        st.binary(max_size=40),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False),
    ),
    max_size=5,
)


def write_records(path: Path, recs: list[dict], fsync: str = "never") -> list[int]:
    with WAL(path, fsync=fsync) as wal:
        return [wal.append(r) for r in recs]


def read_all(path: Path) -> list[tuple[int, dict]]:
    with WAL(path, fsync="never") as wal:
        return list(wal.read())


def flusher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memoryos-wal-flusher"]


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_appended_records_read_back_in_order_after_reopen(tmp_path: Path, policy: str) -> None:
    recs = [{"turn": i, "text": f"hello {i}", "emb": bytes([i]) * 8} for i in range(50)]
    lsns = write_records(tmp_path / "wal.log", recs, fsync=policy)
    assert lsns == list(range(1, 51))
    assert read_all(tmp_path / "wal.log") == list(zip(lsns, recs, strict=True))


def test_read_after_lsn_skips_older_records(tmp_path: Path) -> None:
    write_records(tmp_path / "wal.log", [{"i": i} for i in range(10)])
    with WAL(tmp_path / "wal.log") as wal:
        assert [lsn for lsn, _ in wal.read(after_lsn=7)] == [8, 9, 10]
        assert list(wal.read(after_lsn=10)) == []


def test_lsns_continue_after_reopen(tmp_path: Path) -> None:
    write_records(tmp_path / "wal.log", [{"i": 1}, {"i": 2}])
    assert write_records(tmp_path / "wal.log", [{"i": 3}]) == [3]


def test_truncate_before_drops_old_records_and_numbering_continues(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    with WAL(path) as wal:
        for i in range(1, 11):
            wal.append({"i": i})
        wal.truncate_before(6)
        assert [lsn for lsn, _ in wal.read()] == [6, 7, 8, 9, 10]
        assert wal.append({"i": 11}) == 11
    assert [r["i"] for _, r in read_all(path)] == [6, 7, 8, 9, 10, 11]
    assert not path.with_name("wal.log.tmp").exists()


def test_truncating_everything_keeps_the_lsn_sequence(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    with WAL(path) as wal:
        for i in range(5):
            wal.append({"i": i})
        wal.truncate_before(6)
        assert list(wal.read()) == []
    with WAL(path) as wal:
        assert wal.last_lsn == 5
        assert wal.append({"i": 5}) == 6


def test_truncate_beyond_the_last_record_moves_numbering_forward(tmp_path: Path) -> None:
    with WAL(tmp_path / "wal.log") as wal:
        wal.append({"i": 1})
        wal.truncate_before(101)
        assert wal.append({"i": 2}) == 101


def test_a_leftover_temp_file_from_a_crashed_truncate_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    write_records(path, [{"i": 1}, {"i": 2}])
    path.with_name("wal.log.tmp").write_bytes(b"half-written garbage")
    assert [r["i"] for _, r in read_all(path)] == [1, 2]
    assert not path.with_name("wal.log.tmp").exists()


@given(st.lists(records, min_size=1, max_size=6))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_torn_last_record_is_cut_at_every_byte_offset(
    tmp_path_factory: pytest.TempPathFactory, recs: list[dict]
) -> None:
    path = tmp_path_factory.mktemp("torn") / "wal.log"
    write_records(path, recs)
    data = path.read_bytes()
    last_frame_len = len(encode_frame(len(recs), _packed(recs[-1])))
    start = len(data) - last_frame_len
    for cut in range(start, len(data)):
        path.write_bytes(data[:cut])
        with capture_logs() as logs:
            got = read_all(path)
        assert got == list(zip(range(1, len(recs)), recs[:-1], strict=True))
        assert path.stat().st_size == start  # the torn bytes are gone
        if cut > start:
            assert any(e["event"] == "store_torn_tail_truncated" for e in logs)
        assert not list(path.parent.glob("*.corrupt-*"))  # a torn tail is not corruption
        # and the log accepts new records right after the last valid one
        assert write_records(path, [{"again": True}]) == [len(recs)]


def _packed(record: dict) -> bytes:
    import msgpack

    return msgpack.packb(record, use_bin_type=True)


def test_a_flipped_byte_in_the_middle_is_refused_and_nothing_is_changed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wal.log"
    write_records(path, [{"i": i, "pad": "p" * 20} for i in range(1, 11)])
    data = bytearray(path.read_bytes())
    frame = len(encode_frame(1, _packed({"i": 1, "pad": "p" * 20})))
    data[HEADER_SIZE + 4 * frame + 20] ^= 0xFF  # inside record 5's payload
    path.write_bytes(bytes(data))
    for read_only in (False, True):
        with capture_logs() as logs, pytest.raises(CorruptDataError, match="wal.log") as err:
            WAL(path, fsync="never", read_only=read_only)
        assert err.value.offset == HEADER_SIZE + 4 * frame  # where record 5 starts
        assert err.value.intact_after == 5  # records 6..10
        assert "5 intact records after it" in str(err.value)
        assert path.read_bytes() == bytes(data)
        assert not list(tmp_path.glob("wal.log.corrupt-*"))
        assert any(e["event"] == "store_damage_refused" for e in logs)


def test_a_whole_last_record_with_a_flipped_byte_is_damage_not_a_torn_tail(
    tmp_path: Path,
) -> None:
    # A crash cuts a write short; it does not change bytes of a record written whole.
    # Cutting such a record as a torn tail would drop it without asking (#41 item 14).
    path = tmp_path / "wal.log"
    recs = [{"i": i, "pad": "p" * 20} for i in range(1, 6)]
    write_records(path, recs)
    data = bytearray(path.read_bytes())
    last = len(data) - len(encode_frame(5, _packed(recs[-1])))
    data[last + 16 + 3] ^= 0x01  # one bit inside record 5's payload
    path.write_bytes(bytes(data))
    for read_only in (False, True):
        with capture_logs() as logs, pytest.raises(CorruptDataError, match="wal.log") as err:
            WAL(path, fsync="never", read_only=read_only)
        assert err.value.offset == last
        assert "checksum mismatch" in str(err.value)
        assert "memoryos repair USER" in str(err.value)
        assert path.read_bytes() == bytes(data)  # nothing cut
        assert not list(tmp_path.glob("wal.log.corrupt-*"))
        assert any(e["event"] == "store_damage_refused" for e in logs)


def test_a_whole_last_record_with_a_wrong_seq_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    write_records(path, [{"i": 1}, {"i": 2}])
    with open(path, "ab") as f:
        f.write(encode_frame(9, _packed({"i": 9})))  # checksum-valid, seq 9 after seq 2
    with pytest.raises(CorruptDataError, match="sequence number 9"):
        WAL(path, fsync="never")


@pytest.mark.parametrize("sectors_written", [0, 1, 2])
def test_a_last_record_whose_end_never_reached_the_disk_is_a_torn_tail(
    tmp_path: Path, sectors_written: int
) -> None:
    # A crash can leave the file grown and the end of the last write unwritten (zero
    # bytes from a sector boundary on): incomplete, so cut as a torn tail, with a copy.
    path = tmp_path / "wal.log"
    write_records(path, [{"i": 1}])
    head = path.stat().st_size
    frame = encode_frame(2, _packed({"i": 2, "pad": "x" * 1500}))
    # The record's bytes up to a sector boundary reached the disk, none after it.
    keep = (-head) % 512 + 512 * (sectors_written - 1) if sectors_written else 0
    assert keep < len(frame)
    with open(path, "ab") as f:
        f.write(frame[:keep] + b"\0" * (len(frame) - keep))
    assert path.stat().st_size == head + len(frame)  # whole length, bad checksum
    with capture_logs() as logs:
        assert read_all(path) == [(1, {"i": 1})]
    assert path.stat().st_size == head
    assert any(e["event"] == "store_damaged_tail_cut" for e in logs)
    assert len(list(tmp_path.glob("wal.log.corrupt-*"))) == 1


def test_damage_to_the_last_record_found_while_reading_offers_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wal.log"
    with WAL(path, fsync="never") as wal:
        for i in range(3):
            wal.append({"i": i, "pad": "p" * 20})
        with open(path, "r+b") as f:  # damaged since the open: nothing intact after it
            f.seek(-5, os.SEEK_END)
            f.write(b"\xff")
        with pytest.raises(CorruptDataError, match=r"checksum mismatch; repair the user"):
            list(wal.read())


def test_a_huge_length_field_does_not_allocate_huge_memory(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    write_records(path, [{"i": 1}])
    with open(path, "ab") as f:
        f.write((0xFFFFFFF0).to_bytes(4, "big") + b"\0" * 12 + b"x" * 100)
    tracemalloc.start()
    try:
        got = read_all(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [(1, {"i": 1})]
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize(
    "content",
    [b"", b"MOS", b"not a wal file at all, just text", b"\0" * 64],
    ids=["empty", "short", "text", "zeros"],
)
def test_a_garbage_wal_file_raises_corrupt_data_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "wal.log"
    path.write_bytes(content)
    with pytest.raises(CorruptDataError, match="wal.log"):
        WAL(path)
    assert path.read_bytes() == content  # never replaced by an empty log


def test_a_wal_from_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    path.write_bytes(encode_header(WAL.MAGIC, WAL.VERSION + 1, 0))
    with pytest.raises(NewerFormatError, match="newer"):
        WAL(path)


def test_records_over_the_size_cap_or_not_dicts_are_rejected(tmp_path: Path) -> None:
    with WAL(tmp_path / "wal.log") as wal:
        with pytest.raises(InvalidInput, match="limit"):
            wal.append({"blob": b"x" * (MAX_RECORD_BYTES + 1)})
        with pytest.raises(InvalidInput):
            wal.append(["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            wal.append({"obj": object()})
        assert wal.append({"ok": 1}) == 1  # the log is still usable


def test_invalid_fsync_settings_raise_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        WAL(tmp_path / "a.log", fsync="sometimes")
    with pytest.raises(ConfigError):
        WAL(tmp_path / "b.log", interval=0)


def test_opening_the_same_wal_twice_in_one_process_is_refused(tmp_path: Path) -> None:
    with WAL(tmp_path / "wal.log"), pytest.raises(StorageError, match="already open"):
        WAL(tmp_path / "wal.log")
    WAL(tmp_path / "wal.log").close()  # free again once closed


def test_appending_to_a_closed_wal_raises(tmp_path: Path) -> None:
    wal = WAL(tmp_path / "wal.log")
    wal.close()
    wal.close()  # idempotent
    with pytest.raises(StorageError, match="closed"):
        wal.append({"i": 1})


def test_concurrent_appends_get_unique_consecutive_lsns(tmp_path: Path) -> None:
    path = tmp_path / "wal.log"
    got: list[list[int]] = [[] for _ in range(4)]
    with WAL(path, fsync="always") as wal:

        def worker(k: int) -> None:
            for i in range(100):
                got[k].append(wal.append({"worker": k, "i": i}))

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(lsn for per_thread in got for lsn in per_thread) == list(range(1, 401))
    stored = read_all(path)
    assert [lsn for lsn, _ in stored] == list(range(1, 401))
    for k in range(4):  # each writer's records are in its own order
        assert [r["i"] for _, r in stored if r["worker"] == k] == list(range(100))


def test_one_flusher_thread_serves_all_interval_wals_and_stops_with_the_last(
    tmp_path: Path,
) -> None:
    assert not flusher_threads()
    a = WAL(tmp_path / "a.log", fsync="interval", interval=0.01)
    b = WAL(tmp_path / "b.log", fsync="interval", interval=0.01)
    c = WAL(tmp_path / "c.log", fsync="always")
    assert len(flusher_threads()) == 1
    a.close()
    assert FLUSHER.running()
    b.close()
    assert not flusher_threads() and not FLUSHER.running()
    c.close()


def test_interval_mode_fsyncs_in_the_background(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = threading.Event()
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        if threading.current_thread().name == "memoryos-wal-flusher":
            synced.set()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    with WAL(tmp_path / "wal.log", fsync="interval", interval=0.01) as wal:
        wal.append({"i": 1})
        assert synced.wait(10.0)


def test_always_mode_fsyncs_before_append_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    with WAL(tmp_path / "wal.log", fsync="always") as wal:
        before = len(calls)
        wal.append({"i": 1})
        assert len(calls) == before + 1


def test_a_failed_fsync_makes_the_wal_refuse_further_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = WAL(tmp_path / "wal.log", fsync="always")

    def broken(fd: int) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(StorageError, match="fsync failed"):
        wal.append({"i": 1})
    with pytest.raises(StorageError, match="earlier"):
        wal.append({"i": 2})
    monkeypatch.undo()
    wal.close()


def test_read_sees_a_consistent_file_while_truncate_runs(tmp_path: Path) -> None:
    with WAL(tmp_path / "wal.log") as wal:
        for i in range(1, 21):
            wal.append({"i": i})
        it = wal.read()
        first = next(it)
        wal.truncate_before(15)
        rest = list(it)
    assert [first[0], *[lsn for lsn, _ in rest]] == list(range(1, 21))
