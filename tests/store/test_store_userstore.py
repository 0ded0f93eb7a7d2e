"""A user's store: recovery, checkpoints, embedder checks, listing and forgetting users."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from memoryos_actors.errors import (
    CorruptDataError,
    EmbedderMismatch,
    InvalidInput,
    StorageError,
    UnknownUser,
)
from memoryos_actors.store import NewerFormatError, UserStore, list_users, user_exists
from memoryos_actors.store.snapshot import list_snapshots
from memoryos_actors.store.userstore import user_path


@dataclass(frozen=True)
class FakeConfig:
    fsync: str = "never"
    fsync_interval_seconds: float = 0.05
    archive_enabled: bool = False

    def fingerprint(self) -> str:
        return "fp-1"


def test_appended_records_are_recovered_after_reopen(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.wal.append({"op": "add_turn", "q": "hi"})
        store.wal.append({"op": "add_turn", "q": "there"})
    with UserStore(tmp_path, "alice") as store:
        rec = store.load()
    assert rec.state is None and rec.snapshot_lsn == 0
    assert [r["q"] for _, r in rec.records] == ["hi", "there"]
    assert rec.last_lsn == 2


def test_recovery_is_the_snapshot_plus_the_records_after_it(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.wal.append({"n": 1})
        store.wal.append({"n": 2})
        store.checkpoint({"sum": 3})
        store.wal.append({"n": 3})
    with UserStore(tmp_path, "alice") as store:
        rec = store.load()
    assert rec.state == {"sum": 3} and rec.snapshot_lsn == 2
    assert rec.records == ((3, {"n": 3}),)


def test_a_damaged_newest_snapshot_loses_nothing_thanks_to_the_kept_wal(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        for gen in range(1, 4):
            store.wal.append({"n": gen})
            newest = store.checkpoint({"upto": gen})
        store.wal.append({"n": 4})
    newest.write_bytes(b"damaged")
    with UserStore(tmp_path, "alice") as store:
        rec = store.load()
    # Falls back to the generation covering LSN 2 and replays 3 and 4 from the WAL.
    assert rec.state == {"upto": 2}
    assert [r["n"] for _, r in rec.records] == [3, 4]


def test_missing_wal_records_between_snapshot_and_wal_raise(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        for gen in range(1, 4):
            store.wal.append({"n": gen})
            store.checkpoint({"upto": gen})
    for _, path in list_snapshots(user_path(tmp_path, "alice") / "snapshots"):
        path.unlink()
    with UserStore(tmp_path, "alice") as store, pytest.raises(CorruptDataError, match="missing"):
        store.load()


def test_a_snapshot_ahead_of_the_wal_moves_lsns_past_it(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.wal.append({"n": 1})
        store.wal.append({"n": 2})
        store.checkpoint({"upto": 2})
    wal = user_path(tmp_path, "alice") / "wal.log"
    data = wal.read_bytes()
    wal.write_bytes(data[: len(data) - 5])  # lose the WAL's tail, as a machine crash may
    with UserStore(tmp_path, "alice") as store:
        rec = store.load()
        assert rec.snapshot_lsn == 2 and rec.records == ()
        assert store.wal.append({"n": 3}) == 3  # not an LSN the snapshot already covers
    with UserStore(tmp_path, "alice") as store:
        assert store.load().records == ((3, {"n": 3}),)


def test_a_newer_schema_snapshot_is_refused(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.checkpoint({"x": 1}, schema_version=5)
        with pytest.raises(NewerFormatError):
            store.load(schema_version=4)


def test_the_embedder_is_recorded_and_a_different_one_is_refused(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.check_embedder("hashing", 512)
    with UserStore(tmp_path, "alice") as store:
        store.check_embedder("hashing", 512)
        with pytest.raises(EmbedderMismatch, match="configure the original embedder"):
            store.check_embedder("hashing", 256)
        with pytest.raises(EmbedderMismatch, match="litellm"):
            store.check_embedder("litellm", 512)
        with pytest.raises(InvalidInput):
            store.check_embedder("", 0)


def test_meta_records_the_original_id_and_config_fingerprint(tmp_path: Path) -> None:
    with UserStore(tmp_path, "Ärger/../x", FakeConfig()) as store:
        assert store.fsync == "never" and store.archive_enabled is False
        meta = json.loads((store.dir / "meta.json").read_text("utf-8"))
    assert meta["user_id"] == "Ärger/../x"
    assert meta["config_fingerprint"] == "fp-1"


def test_explicit_keywords_override_the_config(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice", FakeConfig(), fsync="always", archive=True) as store:
        assert store.fsync == "always" and store.archive_enabled is True


def test_list_users_returns_original_ids_including_hashed_ones(tmp_path: Path) -> None:
    ids = ["alice", "Alice", "bob/../../etc", "x" * 500, "日本語"]
    for uid in ids:
        UserStore(tmp_path, uid).close()
    assert list_users(tmp_path) == sorted(ids)
    assert list_users(tmp_path / "nowhere") == []


def test_forget_removes_only_that_users_files_and_reports_them(tmp_path: Path) -> None:
    keep = UserStore(tmp_path, "bob")
    keep.wal.append({"n": 1})
    keep.close()
    store = UserStore(tmp_path, "alice")
    store.wal.append({"n": 1})
    store.archive.append({"kind": "segment"})
    store.checkpoint({"x": 1})
    alice_dir = store.dir
    store.close()  # writes the archive's checkpoint
    expected = {str(p) for p in alice_dir.rglob("*")} | {str(alice_dir)}
    assert str(alice_dir / "archive.log.ckpt") in expected
    removed = UserStore.remove(tmp_path, "alice")
    assert set(removed) == expected
    assert not alice_dir.exists()
    assert not user_exists(tmp_path, "alice") and user_exists(tmp_path, "bob")
    assert list_users(tmp_path) == ["bob"]
    with UserStore(tmp_path, "bob") as bob:
        assert bob.load().records == ((1, {"n": 1}),)


def test_forget_unlinks_symlinks_without_following_them(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    store = UserStore(tmp_path / "data", "alice")
    (store.dir / "link").symlink_to(outside, target_is_directory=True)
    store.close()
    UserStore.remove(tmp_path / "data", "alice")
    assert (outside / "precious.txt").read_text() == "keep me"


def test_opening_an_unknown_user_without_create_raises_unknown_user(tmp_path: Path) -> None:
    with pytest.raises(UnknownUser):
        UserStore(tmp_path, "ghost", create=False)
    assert not user_exists(tmp_path, "ghost")


def test_damaged_meta_raises_corrupt_data_naming_the_file(tmp_path: Path) -> None:
    UserStore(tmp_path, "alice").close()
    meta = user_path(tmp_path, "alice") / "meta.json"
    meta.write_text("{not json")
    with pytest.raises(CorruptDataError, match="meta.json"):
        UserStore(tmp_path, "alice")
    # Listed by its directory name: one user's damage never hides the user.
    assert list_users(tmp_path) == ["alice"]


def test_a_directory_belonging_to_another_id_is_refused(tmp_path: Path) -> None:
    UserStore(tmp_path, "alice").close()
    meta = user_path(tmp_path, "alice") / "meta.json"
    doc = json.loads(meta.read_text())
    doc["user_id"] = "mallory"
    meta.write_text(json.dumps(doc))
    with pytest.raises(StorageError, match="mallory"):
        UserStore(tmp_path, "alice")


def test_missing_meta_of_a_hashed_dir_with_data_is_not_silently_recreated(tmp_path: Path) -> None:
    uid = "y" * 300
    with UserStore(tmp_path, uid) as store:
        store.wal.append({"n": 1})
    (user_path(tmp_path, uid) / "meta.json").unlink()
    with pytest.raises(CorruptDataError, match="wal.log"):
        UserStore(tmp_path, uid)


def test_missing_meta_of_a_plain_dir_is_rebuilt_and_data_kept(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.wal.append({"n": 1})
    (user_path(tmp_path, "alice") / "meta.json").unlink()
    with UserStore(tmp_path, "alice") as store:
        assert store.load().records == ((1, {"n": 1}),)


def test_a_garbage_wal_in_a_user_dir_is_not_replaced_by_an_empty_one(tmp_path: Path) -> None:
    UserStore(tmp_path, "alice").close()
    wal = user_path(tmp_path, "alice") / "wal.log"
    wal.write_bytes(b"garbage")
    with pytest.raises(CorruptDataError, match="wal.log"):
        UserStore(tmp_path, "alice")
    assert wal.read_bytes() == b"garbage"


def test_remove_deletes_a_damaged_user_that_cannot_be_opened(tmp_path: Path) -> None:
    UserStore(tmp_path, "alice").close()
    UserStore(tmp_path, "bob").close()
    (user_path(tmp_path, "alice") / "wal.log").write_bytes(b"garbage")
    removed = UserStore.remove(tmp_path, "alice")
    assert str(user_path(tmp_path, "alice") / "wal.log") in removed
    assert list_users(tmp_path) == ["bob"]
    assert UserStore.remove(tmp_path, "alice") == []


def test_check_embedder_records_the_config_fingerprint(tmp_path: Path) -> None:
    with UserStore(tmp_path, "alice") as store:
        store.check_embedder("hashing", 512, "fp-a")
    with UserStore(tmp_path, "alice") as store:
        assert store.meta.config_fingerprint == "fp-a"
        store.check_embedder("hashing", 512, "fp-b")
    meta = json.loads((user_path(tmp_path, "alice") / "meta.json").read_text())
    assert meta["config_fingerprint"] == "fp-b"
    assert meta["embedder"] == {"name": "hashing", "dim": 512}
