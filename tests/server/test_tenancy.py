"""The per-tenant id space, as pure functions: no two (tenant, user) pairs share a library
id, and no tenant lists, reads or exports another's users or assistants. The end-to-end
check of the same through a live server is ``test_tenant_isolation.py`` (a few cases)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memoryos_actors import InvalidInput
from memoryos_actors.server.keys import check_tenant
from memoryos_actors.server.tenancy import (
    MAX_ID_BYTES,
    check_external_id,
    export_for_tenant,
    external_id,
    external_memory_id,
    import_for_tenant,
    internal_id,
    internal_memory_id,
    relabel_user_id,
    tenant_prefix,
)
from memoryos_actors.validation import check_user_id

tenants = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,10}", fullmatch=True)
users = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() == s and s not in (".", ".."))  # dot segments: refused

# Tenant names close to each other (one a prefix of another, or of another's library ids)
# beside arbitrary valid ones: where a prefix test done wrong would leak.
near_tenants = st.sampled_from(["a", "ab", "a.b", "a-b", "a_b", "acme", "acme2", "initech"])
any_tenants = st.one_of(near_tenants, tenants)
# User ids that, glued to one of those tenants without a separator, spell another's.
near_users = st.sampled_from(["ann", "bann", ".bann", "-bann", "_bann", "2:ann", ":ann"])
any_users = st.one_of(near_users, users)


@given(any_tenants, any_users, any_tenants, any_users)
def test_different_tenant_user_pairs_never_map_to_the_same_library_id(
    t1: str,
    u1: str,
    t2: str,
    u2: str,
) -> None:
    if (t1, u1) != (t2, u2):
        assert internal_id(t1, u1) != internal_id(t2, u2)


@given(any_tenants, users, any_tenants)
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


@given(st.lists(st.tuples(any_tenants, any_users), max_size=30), any_tenants)
def test_a_tenants_user_list_holds_exactly_its_own_users(
    stored: list[tuple[str, str]], asking: str
) -> None:
    # What ``GET /v1/users`` and MCP's ``list_users`` do: map every library id back.
    library_ids = {internal_id(t, u) for t, u in stored}
    seen = {u for u in (external_id(asking, lib) for lib in library_ids) if u is not None}
    assert seen == {u for t, u in stored if t == asking}


@given(st.text(max_size=70))
def test_a_valid_tenant_name_never_holds_the_separator(name: str) -> None:
    # The first ":" of a library id ends its tenant only if no tenant name holds one.
    try:
        ok = check_tenant(name)
    except InvalidInput:
        return
    assert ":" not in ok and tenant_prefix(ok) == ok + ":"


entry_ids = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20).filter(
    lambda s: ":" not in s
)


@given(any_tenants, any_tenants, users, entry_ids)
def test_agent_trait_ids_are_scoped_to_their_tenant_and_map_back(
    t1: str, t2: str, assistant: str, entry: str
) -> None:
    mine = f"agent_trait:{assistant}:{entry}"
    lib = internal_memory_id(t1, mine)
    assert external_memory_id(t1, lib) == mine
    if t2 != t1:
        assert internal_memory_id(t2, mine) != lib
        assert external_memory_id(t2, lib) != mine
    for plain in (f"page:{entry}", f"fact:{entry}", f"segment:{entry}"):
        assert internal_memory_id(t1, plain) == plain == external_memory_id(t1, plain)


@given(any_tenants, any_tenants, users)
def test_an_export_names_only_its_own_user_as_the_tenant_does(t1: str, t2: str, user: str) -> None:
    mine, theirs = internal_id(t1, user), internal_id(t2, user)
    payload = {"user_id": mine, "pages": [{"user_id": theirs}, {"user_id": mine}]}
    out = relabel_user_id(payload, mine, user)
    assert out["user_id"] == user and out["pages"][1]["user_id"] == user
    assert out["pages"][0]["user_id"] == (user if theirs == mine else theirs)


def _payload(user: str, aid: str) -> dict:
    """An export payload with an assistant id in every place one is kept."""
    page = {"user_id": user, "assistant_id": aid, "page_id": "p1", "query": "q"}
    return {
        "user_id": user,
        "state": {
            "stm": {"user_id": user, "pages": [page]},
            "mtm": {
                "segments": [{"pages": [page]}],
                "work": {
                    "persona_queue": [{"pages": [page]}],
                    "jobs": [
                        {"id": "j1", "kind": "persona_update", "tag": f"j1:s1+s2|{aid}"},
                        {"id": "j2", "kind": "segment_summary", "tag": "j2:s3"},
                    ],
                },
            },
            "lpm": {
                "user_id": user,
                "personas": {aid: {"profile": {"role": "coach"}}},
                "edits": [{"id": f"agent_trait:{aid}:a1"}, {"id": "fact:f1"}],
            },
        },
        "archive": [
            {"t": "page", "page": page},
            {"t": "agent_trait", "entry": {}, "assistant": aid},
            {"t": "fact", "entry": {}, "assistant": ""},
        ],
    }


def _assistants(payload: dict) -> list[str]:
    state, archive = payload["state"], payload["archive"]
    return [
        state["stm"]["pages"][0]["assistant_id"],
        state["mtm"]["segments"][0]["pages"][0]["assistant_id"],
        state["mtm"]["work"]["persona_queue"][0]["pages"][0]["assistant_id"],
        state["mtm"]["work"]["jobs"][0]["tag"].partition("|")[2],
        *state["lpm"]["personas"],
        state["lpm"]["edits"][0]["id"].removeprefix("agent_trait:").removesuffix(":a1"),
        archive[0]["page"]["assistant_id"],
        archive[1]["assistant"],
    ]


@given(any_tenants, any_tenants, users, users)
# Ids that look like a tenant's prefix: the export says its ids are the tenant's own.
@example("a", "a", "0:", "0:")
@example("acme", "beta", "0:x", "0:y")
def test_an_export_moves_a_users_assistants_between_tenants_by_their_own_ids(
    t1: str, t2: str, user: str, aid: str
) -> None:
    # Every assistant id of the export loses the tenant's prefix, and an import into
    # another tenant gives them its own (#41 item 8).
    original = _payload(internal_id(t1, user), internal_id(t1, aid, "assistant_id"))
    out = export_for_tenant(original, t1, internal_id(t1, user), user)
    assert _assistants(out) == [aid] * 8
    assert out["user_id"] == user and out["state"]["lpm"]["user_id"] == user
    assert out["state"]["lpm"]["edits"][1]["id"] == "fact:f1"
    assert out["state"]["mtm"]["work"]["jobs"][1]["tag"] == "j2:s3"
    assert out["archive"][2]["assistant"] == ""
    assert _assistants(original) == [internal_id(t1, aid, "assistant_id")] * 8  # a copy
    moved = import_for_tenant(out, t2)
    assert _assistants(moved) == [internal_id(t2, aid, "assistant_id")] * 8
    # An export written before this fix named the assistants by library ids: the prefix
    # of the export's own tenant gives way to the importing tenant's.
    assert _assistants(import_for_tenant(original, t2)) == _assistants(moved)


def test_an_import_into_a_tenant_refuses_an_assistant_id_no_tenant_can_use() -> None:
    with pytest.raises(InvalidInput, match="assistant_id must not contain '/'"):
        import_for_tenant(_payload("zoe", "a/b"), "acme")


@given(
    st.from_regex(r"[a-z0-9][a-z0-9_.-]{62}", fullmatch=True),
    st.text(st.characters(codec="utf-8", categories=("L", "So")), min_size=1, max_size=256),
)
@example("t" * 63, "\U0001f600" * 240)  # 960 bytes: the most an id may have
@example("t" * 63, "\U0001f600" * 241)
@example("t" * 63, "\U0001f600" * 256)
def test_every_id_a_tenant_may_use_fits_the_library_whatever_the_tenant(
    tenant: str, name: str
) -> None:
    # The id's limit is the tenant's own, in bytes: with the longest tenant name its
    # library id is still one the library takes; past it, the message names the id's
    # bytes, not the library's limit of the prefixed id (#41 item 14).
    size = len(name.encode("utf-8"))
    if size <= MAX_ID_BYTES:
        assert check_user_id(internal_id(tenant, name)) == f"{tenant}:{name}"
    else:
        with pytest.raises(InvalidInput, match=f"is {size} UTF-8 bytes; an id may have") as e:
            internal_id(tenant, name)
        assert tenant not in str(e.value)
