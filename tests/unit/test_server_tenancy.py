"""The per-tenant user id space: no two (tenant, user) pairs share a library id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryos_actors import InvalidInput
from memoryos_actors.server.tenancy import check_external_id, external_id, internal_id

tenants = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,10}", fullmatch=True)
users = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() == s and s not in (".", ".."))  # dot segments: refused


@given(tenants, users, tenants, users)
def test_different_tenant_user_pairs_never_map_to_the_same_library_id(
    t1: str,
    u1: str,
    t2: str,
    u2: str,
) -> None:
    if (t1, u1) != (t2, u2):
        assert internal_id(t1, u1) != internal_id(t2, u2)


@given(tenants, users, tenants)
def test_a_library_id_belongs_to_exactly_its_own_tenant(t1: str, u: str, t2: str) -> None:
    lib = internal_id(t1, u)
    assert external_id(t1, lib) == u
    if t2 != t1:
        assert external_id(t2, lib) is None


@pytest.mark.parametrize(
    "bad", ["", "a/b", "x\x00", "\ud800", " a", "a ", "x" * 257, 5, None, "line\nbreak", ".", ".."]
)
def test_unusable_user_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput):
        check_external_id(bad)
