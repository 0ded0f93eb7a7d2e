"""Creating a user costs no fsync; its first fsync makes the creation durable; the blank
files a machine crash can leave before that are started afresh, and nothing else is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from waiting import wait_until

from memoryos_actors.errors import CorruptDataError
from memoryos_actors.store import UserStore, list_users
from memoryos_actors.store.userstore import user_path

HASHED = "h" * 300  # too long for a plain directory name: only meta.json names the user


class FsyncSpy:
    """Records the (device, inode) of every file or directory fsynced."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.synced: list[tuple[int, int]] = []
        real = os.fsync

        def spy(fd: int) -> None:
            st = os.fstat(fd)
            self.synced.append((st.st_dev, st.st_ino))
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)

    def saw(self, path: Path) -> bool:
        st = path.stat()
        return (st.st_dev, st.st_ino) in self.synced


def creation_paths(root: Path, user: str) -> list[Path]:
    d = user_path(root, user)
    return [d / "meta.json", d / "wal.log", d, d.parent]


def test_creating_a_user_fsyncs_nothing_and_an_always_turn_is_durable_with_its_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FsyncSpy(monkeypatch)
    store = UserStore(tmp_path, "alice", fsync="always", embedder=("hashing", 8))
    try:
        assert spy.synced == []  # nothing to lose yet
        assert store.meta.embedder_name == "hashing"  # recorded in the one meta write
        store.wal.append({"n": 1})
        # Acknowledged: the record, the files' names and the user's directory are durable.
        assert all(spy.saw(p) for p in creation_paths(tmp_path, "alice"))
    finally:
        store.close()


def test_in_interval_mode_the_flusher_makes_a_new_user_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FsyncSpy(monkeypatch)
    with UserStore(tmp_path, "bob", fsync="interval", fsync_interval=0.01) as store:
        assert spy.synced == []
        store.wal.append({"n": 1})
        wait_until(
            lambda: all(spy.saw(p) for p in creation_paths(tmp_path, "bob")),
            "every created path to be synced",
        )


def test_reopening_an_existing_user_fsyncs_nothing_for_its_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with UserStore(tmp_path, "carol", fsync="always") as store:
        store.wal.append({"n": 1})
    spy = FsyncSpy(monkeypatch)
    with UserStore(tmp_path, "carol", fsync="always") as store:
        store.wal.append({"n": 2})
        assert not spy.saw(user_path(tmp_path, "carol").parent)  # already durable
        assert [r["n"] for _, r in store.load().records] == [1, 2]


def test_a_snapshot_or_an_archive_record_makes_a_new_user_durable_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FsyncSpy(monkeypatch)
    with UserStore(tmp_path, "dora", fsync="never") as store:
        store.checkpoint({"x": 1}, wal_lsn=0)
        d = user_path(tmp_path, "dora")
        assert all(spy.saw(p) for p in (d / "meta.json", d, d.parent, d / "snapshots"))
    with UserStore(tmp_path, "erin", fsync="never", archive=True) as store:
        store.archive_append({"t": "page", "page": {"seq": 1}})
        d = user_path(tmp_path, "erin")
        assert all(spy.saw(p) for p in (d / "meta.json", d, d.parent))


def crash_before_first_fsync(root: Path, user: str) -> Path:
    """What a machine crash may leave of a user created but never fsynced: the names
    reached the disk, the bytes did not (blank files, a stray temp file)."""
    d = user_path(root, user)
    d.mkdir(parents=True)
    (d / "meta.json").write_bytes(b"")
    (d / "wal.log").write_bytes(b"\0" * 20)
    (d / "wal.log.tmp").write_bytes(b"\0" * 7)
    return d


@pytest.mark.parametrize("user", ["plain-user", HASHED], ids=["plain", "hashed"])
def test_blank_leftovers_of_a_creation_cut_short_are_started_afresh(
    tmp_path: Path, user: str
) -> None:
    crash_before_first_fsync(tmp_path, user)
    with UserStore(tmp_path, user, fsync="never") as store:
        assert store.load().records == ()
        assert store.wal.append({"n": 1}) == 1
        assert store.meta.user_id == user
    with UserStore(tmp_path, user, fsync="never") as store:
        assert store.load().records == ((1, {"n": 1}),)
    assert list_users(tmp_path) == [user]


def test_list_users_skips_a_hashed_directory_that_holds_nothing(tmp_path: Path) -> None:
    crash_before_first_fsync(tmp_path, HASHED)
    UserStore(tmp_path, "ann", fsync="never").close()
    assert list_users(tmp_path) == ["ann"]


def test_a_blank_wal_beside_a_snapshot_is_damage_not_a_fresh_start(tmp_path: Path) -> None:
    with UserStore(tmp_path, "fred", fsync="never") as store:
        store.wal.append({"n": 1})
        store.checkpoint({"x": 1})
    wal = user_path(tmp_path, "fred") / "wal.log"
    wal.write_bytes(b"\0" * 64)
    with pytest.raises(CorruptDataError, match="wal.log"):
        UserStore(tmp_path, "fred", fsync="never")
    assert wal.read_bytes() == b"\0" * 64  # never replaced


def test_a_blank_wal_beside_an_archive_is_damage_not_a_fresh_start(tmp_path: Path) -> None:
    with UserStore(tmp_path, "gina", fsync="never", archive=True) as store:
        store.archive_append({"t": "page", "page": {"seq": 1}})
    (user_path(tmp_path, "gina") / "wal.log").write_bytes(b"")
    with pytest.raises(CorruptDataError, match="wal.log"):
        UserStore(tmp_path, "gina", fsync="never")


def test_blank_meta_of_a_hashed_dir_with_records_is_not_silently_recreated(
    tmp_path: Path,
) -> None:
    with UserStore(tmp_path, HASHED, fsync="never") as store:
        store.wal.append({"n": 1})
    (user_path(tmp_path, HASHED) / "meta.json").write_bytes(b"\0" * 40)
    with pytest.raises(CorruptDataError, match="wal.log"):
        UserStore(tmp_path, HASHED, fsync="never")
    damaged: dict[str, str] = {}
    assert list_users(tmp_path, damaged=damaged) == []  # the others are still listed
    assert list(damaged) == [user_path(tmp_path, HASHED).name]


def test_blank_meta_of_a_plain_dir_is_rebuilt_and_its_records_kept(tmp_path: Path) -> None:
    with UserStore(tmp_path, "hal", fsync="never") as store:
        store.wal.append({"n": 1})
    (user_path(tmp_path, "hal") / "meta.json").write_bytes(b"")
    with UserStore(tmp_path, "hal", fsync="never") as store:
        assert store.load().records == ((1, {"n": 1}),)
        assert store.meta.user_id == "hal"
