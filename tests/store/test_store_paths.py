"""User ids map to safe, injective, case-collision-safe directory names."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import InvalidInput
from memoryos_actors.store.paths import (
    MAX_DIR_NAME_CHARS,
    MAX_USER_ID_BYTES,
    user_dir_name,
    user_id_from_dir_name,
)

WINDOWS_RESERVED = {"con", "prn", "aux", "nul"} | {
    f"{p}{i}" for p in ("com", "lpt") for i in range(10)
}
SAFE_ALPHABET = set("abcdefghijklmnopqrstuvwxyz0123456789-_^~")

# Text that UTF-8 can encode: every code point except the surrogates.
user_ids = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200)


def assert_safe(name: str) -> None:
    assert 0 < len(name) <= MAX_DIR_NAME_CHARS
    assert set(name) <= SAFE_ALPHABET
    assert name not in (".", "..")
    assert name.split(".")[0].lower() not in WINDOWS_RESERVED
    assert not name.endswith((".", " "))
    assert not name.startswith(".")


@given(user_ids)
@settings(max_examples=300)
def test_any_unicode_id_gets_a_safe_bounded_name(user_id: str) -> None:
    assert_safe(user_dir_name(user_id))


@given(st.lists(user_ids, min_size=2, max_size=20, unique=True))
@settings(max_examples=200)
def test_distinct_ids_get_distinct_names_even_ignoring_case(ids: list[str]) -> None:
    names = [user_dir_name(u) for u in ids]
    assert len({n.casefold() for n in names}) == len(ids)


@given(user_ids)
@settings(max_examples=300)
def test_plain_names_decode_back_to_the_original_id(user_id: str) -> None:
    name = user_dir_name(user_id)
    decoded = user_id_from_dir_name(name)
    if name.startswith("u-"):
        assert decoded == user_id
    else:
        assert decoded is None  # hashed names are resolved through the meta file


@pytest.mark.parametrize(
    "user_id",
    [
        ".",
        "..",
        "../etc",
        "a/../../b",
        "/abs",
        "C:\\x",
        "CON",
        "nul",
        "com1",
        "LPT9",
        "a\x00b",
        " ",
        "trailing.",
        "Alice",
        "alice",
        "ALICE",
    ],
)
def test_hostile_ids_stay_inside_the_users_directory(tmp_path: Path, user_id: str) -> None:
    name = user_dir_name(user_id)
    assert_safe(name)
    users = tmp_path / "users"
    target = (users / name).resolve()
    assert target.parent == users.resolve()


def test_ids_differing_only_in_case_get_different_names() -> None:
    names = {user_dir_name(u) for u in ("alice", "Alice", "ALICE", "aLiCe")}
    assert len(names) == 4
    assert len({n.lower() for n in names}) == 4


def test_long_ids_are_hashed_to_bounded_distinct_names() -> None:
    a = "x" * 1000 + "a"
    b = "x" * 1000 + "b"
    assert user_dir_name(a) != user_dir_name(b)
    assert len(user_dir_name(a)) <= MAX_DIR_NAME_CHARS
    assert user_dir_name(a).startswith("h-")


def test_non_canonical_names_are_not_decoded() -> None:
    assert user_id_from_dir_name("u-~61") is None  # "a" is always spelled "a"
    assert user_id_from_dir_name("u-^") is None
    assert user_id_from_dir_name("random") is None


@pytest.mark.parametrize("bad", ["", "\ud800", "a\udfffb", 42, None, b"bytes"])
def test_unusable_ids_are_rejected_with_invalid_input(bad: object) -> None:
    with pytest.raises(InvalidInput):
        user_dir_name(bad)  # type: ignore[arg-type]


def test_ids_over_the_byte_limit_are_rejected() -> None:
    user_dir_name("é" * (MAX_USER_ID_BYTES // 2))
    with pytest.raises(InvalidInput, match="limit"):
        user_dir_name("é" * (MAX_USER_ID_BYTES // 2 + 1))
