"""API keys: generated, stored hashed, looked up in constant time, revocable."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from memoryos_actors import InvalidInput, StorageError
from memoryos_actors.server.keys import KeyStore, check_tenant, hash_key


def test_added_key_is_found_with_its_tenant_and_only_its_hash_is_stored(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key, rec = store.add("acme", note="bot")
    assert store.lookup(key) == rec and rec.tenant == "acme"
    text = (tmp_path / "keys.json").read_text()
    assert key not in text and hash_key(key) in text
    assert stat.S_IMODE(os.stat(tmp_path / "keys.json").st_mode) == 0o600


def test_keys_survive_reopening_the_file(tmp_path: Path) -> None:
    key, _ = KeyStore(tmp_path / "k.json").add("acme", rate_per_second=2.0, burst=5)
    rec = KeyStore(tmp_path / "k.json").lookup(key)
    assert rec is not None and (rec.rate_per_second, rec.burst) == (2.0, 5)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda k: k[:-1] + ("A" if k[-1] != "A" else "B"),  # secret changed
        lambda k: k.replace("mos_", "mox_"),
        lambda k: k + "x",
        lambda k: "",
        lambda k: None,
        lambda k: k.upper(),
    ],
)
def test_a_changed_or_malformed_key_is_not_found(tmp_path: Path, mangle: object) -> None:
    store = KeyStore(tmp_path / "k.json")
    key, _ = store.add("acme")
    assert store.lookup(mangle(key)) is None  # type: ignore[operator]


def test_revoked_key_is_no_longer_found(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "k.json")
    key, rec = store.add("acme")
    other, _ = store.add("acme")
    store.revoke(rec.key_id)
    assert store.lookup(key) is None and store.lookup(other) is not None
    with pytest.raises(InvalidInput):
        store.revoke(rec.key_id)


def test_a_key_added_by_another_process_is_seen_after_the_file_changes(tmp_path: Path) -> None:
    server_view = KeyStore(tmp_path / "k.json")
    key, _ = KeyStore(tmp_path / "k.json").add("acme")
    server_view._checked = -1e9  # skip the once-a-second stat throttle
    assert server_view.lookup(key) is not None


@pytest.mark.parametrize("name", ["", "Acme", "a:b", "a/b", "-x", "x" * 64, "é", None, 3])
def test_invalid_tenant_names_are_refused(tmp_path: Path, name: object) -> None:
    with pytest.raises(InvalidInput):
        check_tenant(name)
    with pytest.raises(InvalidInput):
        KeyStore(tmp_path / "k.json").add(name)  # type: ignore[arg-type]


def test_a_damaged_key_file_is_a_storage_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "k.json"
    path.write_text(
        json.dumps(
            {
                "format": "memoryos-actors/api-keys",
                "version": 1,
                "keys": [{"key_id": "zz", "tenant": "acme"}],
            }
        )
    )
    with pytest.raises(StorageError, match="k.json"):
        KeyStore(path)
    path.write_text("{")
    with pytest.raises(StorageError, match="k.json"):
        KeyStore(path)
