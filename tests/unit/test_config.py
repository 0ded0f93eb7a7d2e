from __future__ import annotations

import dataclasses
import math

import pytest

from memoryos_actors.config import (
    DATA_DIR_ENV,
    FINGERPRINT_FIELDS,
    OTHER_ENV_VARS,
    MemoryConfig,
    from_env,
    from_toml,
    load,
)
from memoryos_actors.errors import ConfigError


def test_defaults_are_the_documented_paper_values() -> None:
    c = MemoryConfig()
    assert (c.stm_capacity, c.mtm_capacity, c.segment_max_pages) == (7, 200, 64)
    assert c.fscore_threshold == 0.6
    assert (c.heat_alpha, c.heat_beta, c.heat_gamma) == (1.0, 1.0, 1.0)
    assert c.recency_mu == 1e7 and c.promotion_threshold == 5.0
    assert (c.top_m_segments, c.top_k_pages) == (5, 10)
    assert (c.kb_capacity, c.agent_traits_capacity, c.kb_top_k, c.agent_traits_top_k) == (
        100,
        100,
        10,
        10,
    )
    assert c.retrieval_mode == "hybrid" and c.embedder == "hashing" and c.embedding_dim == 512
    assert c.embedding_model is None and c.llm_backend == "offline"
    assert c.fsync == "interval" and c.log_level == "warning" and c.seed == 0
    assert c.max_text_bytes == 65536 and c.max_active_users == 500


def test_describe_lists_every_field_with_its_default_and_a_meaning() -> None:
    rows = MemoryConfig.describe()
    names = [f.name for f in dataclasses.fields(MemoryConfig)]
    assert [r[0] for r in rows] == names
    defaults = MemoryConfig()
    for name, default, meaning in rows:
        assert getattr(defaults, name) == default
        assert isinstance(meaning, str) and meaning.strip()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stm_capacity", 0),
        ("stm_capacity", True),
        ("stm_capacity", 7.0),
        ("mtm_capacity", -1),
        ("fscore_threshold", math.nan),
        ("fscore_threshold", 2.5),
        ("heat_alpha", -0.1),
        ("recency_mu", 0.0),
        ("recency_mu", math.inf),
        ("retrieval_mode", "fast"),
        ("embedder", "word2vec"),
        ("embedding_dim", "512"),
        ("fsync", "sometimes"),
        ("log_level", "loud"),
        ("seed", -1),
        ("archive_enabled", "yes"),
        ("llm_requests_per_minute", 0),
        ("embedding_model", 3),
        ("embedding_model", "  "),
        ("stm_capacity", None),
        ("meta_batch_catchup_pages", 0),
        ("meta_batch_catchup_pages", 101),  # more than a batch answer may hold
    ],
)
def test_invalid_value_raises_config_error_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        MemoryConfig(**{field: value})


def test_ints_are_accepted_for_float_fields_and_enums_are_case_insensitive() -> None:
    c = MemoryConfig(fscore_threshold=1, retrieval_mode="PAPER", log_level="INFO")
    assert isinstance(c.fscore_threshold, float) and c.fscore_threshold == 1.0
    assert c.retrieval_mode == "paper" and c.log_level == "info"


def test_remote_embedder_and_llm_need_a_model_name() -> None:
    with pytest.raises(ConfigError, match="embedding_model"):
        MemoryConfig(embedder="litellm")
    with pytest.raises(ConfigError, match="llm_model"):
        MemoryConfig(llm_backend="litellm")
    c = MemoryConfig(embedder="sentence-transformers", embedding_model="all-MiniLM-L6-v2")
    assert c.embedding_model == "all-MiniLM-L6-v2"


def test_config_is_frozen_and_evolve_returns_a_validated_copy() -> None:
    c = MemoryConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.stm_capacity = 3  # type: ignore[misc]
    d = c.evolve(stm_capacity=3)
    assert d.stm_capacity == 3 and c.stm_capacity == 7
    with pytest.raises(ConfigError, match="stm_capacity"):
        c.evolve(stm_capacity=0)
    with pytest.raises(ConfigError, match="stm_capacty"):
        c.evolve(stm_capacty=3)


def test_env_values_are_parsed_by_field_type() -> None:
    env = {
        "MEMORYOS_STM_CAPACITY": "9",
        "MEMORYOS_FSCORE_THRESHOLD": " 0.75 ",
        "MEMORYOS_ARCHIVE_ENABLED": "No",
        "MEMORYOS_CHAIN_AFFINITY": "1",
        "MEMORYOS_RETRIEVAL_MODE": "paper",
        "MEMORYOS_LLM_TOKENS_PER_MINUTE": "1000",
        "PATH": "/bin",
        "OTHER_STM_CAPACITY": "1",
    }
    c = from_env(env)
    assert c.stm_capacity == 9 and c.fscore_threshold == 0.75
    assert c.archive_enabled is False and c.chain_affinity is True
    assert c.retrieval_mode == "paper" and c.llm_tokens_per_minute == 1000


@pytest.mark.parametrize("raw", ["", "none", "None"])
def test_env_sets_an_optional_field_to_none_with_empty_or_none(raw: str) -> None:
    base = MemoryConfig(llm_tokens_per_minute=10, llm_base_url="http://127.0.0.1:1")
    c = from_env({"MEMORYOS_LLM_TOKENS_PER_MINUTE": raw, "MEMORYOS_LLM_BASE_URL": raw}, base)
    assert c.llm_tokens_per_minute is None and c.llm_base_url is None


@pytest.mark.parametrize(
    ("key", "raw", "field"),
    [
        ("MEMORYOS_STM_CAPACITY", "seven", "stm_capacity"),
        ("MEMORYOS_ARCHIVE_ENABLED", "maybe", "archive_enabled"),
        ("MEMORYOS_RECENCY_MU", "soon", "recency_mu"),
        ("MEMORYOS_STM_CAPACITY", "0", "stm_capacity"),
        ("MEMORYOS_STM_CAPACITY", "", "stm_capacity"),
    ],
)
def test_bad_env_value_raises_config_error_naming_the_field(key: str, raw: str, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        from_env({key: raw})


def test_unknown_memoryos_env_var_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="MEMORYOS_STM_CAPACTY"):
        from_env({"MEMORYOS_STM_CAPACTY": "3"})


def test_env_skips_the_memoryos_variables_that_are_not_config_fields() -> None:
    env = {name: "/somewhere" for name in OTHER_ENV_VARS}
    assert DATA_DIR_ENV in env
    assert from_env({**env, "MEMORYOS_STM_CAPACITY": "3"}).stm_capacity == 3
    assert from_env(env) == MemoryConfig()


def test_toml_file_sets_fields_at_top_level_or_in_a_memoryos_table(tmp_path) -> None:
    flat = tmp_path / "flat.toml"
    flat.write_text('stm_capacity = 5\nretrieval_mode = "paper"\nrecency_mu = 100\n')
    c = from_toml(flat)
    assert (c.stm_capacity, c.retrieval_mode, c.recency_mu) == (5, "paper", 100.0)
    table = tmp_path / "table.toml"
    table.write_text("[memoryos]\nkb_capacity = 20\narchive_enabled = false\n")
    c = from_toml(table)
    assert c.kb_capacity == 20 and c.archive_enabled is False


def test_toml_unknown_key_wrong_type_and_bad_syntax_are_config_errors(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("stm_capacity = 5\ntop_m = 3\n")
    with pytest.raises(ConfigError, match="top_m"):
        from_toml(bad)
    bad.write_text('stm_capacity = "5"\n')
    with pytest.raises(ConfigError, match="stm_capacity"):
        from_toml(bad)
    bad.write_text("stm_capacity = = 5\n")
    with pytest.raises(ConfigError, match="TOML"):
        from_toml(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        from_toml(tmp_path / "missing.toml")


def test_load_applies_toml_then_environment(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("stm_capacity = 5\nkb_capacity = 20\n")
    c = load(path, env={"MEMORYOS_STM_CAPACITY": "11"})
    assert c.stm_capacity == 11 and c.kb_capacity == 20
    assert load(path, env=False).stm_capacity == 5
    assert load(env={}) == MemoryConfig()


def test_fingerprint_changes_only_with_fields_that_shape_stored_data() -> None:
    base = MemoryConfig()
    assert base.fingerprint() == MemoryConfig().fingerprint()
    assert base.evolve(log_level="debug", top_k_pages=3).fingerprint() == base.fingerprint()
    assert base.evolve(embedding_dim=256).fingerprint() != base.fingerprint()
    assert base.evolve(stm_capacity=8).fingerprint() != base.fingerprint()
    assert "embedder" in FINGERPRINT_FIELDS and "embedding_model" in FINGERPRINT_FIELDS


def test_to_dict_round_trips_through_the_constructor() -> None:
    c = MemoryConfig(stm_capacity=3, embedding_model="m", embedder="litellm")
    assert MemoryConfig(**c.to_dict()) == c


def test_parse_settings_types_each_value_as_its_field_and_rejects_the_rest() -> None:
    from memoryos_actors.config import parse_settings

    got = parse_settings(
        [
            "summary_every_pages=6",
            "cold_tier=false",
            "heat_alpha=0.5",
            "llm_requests_per_minute=none",
            "retrieval_mode=paper",
        ]
    )
    assert got == {
        "summary_every_pages": 6,
        "cold_tier": False,
        "heat_alpha": 0.5,
        "llm_requests_per_minute": None,
        "retrieval_mode": "paper",
    }
    assert MemoryConfig(**got).summary_every_pages == 6
    for bad in (
        ["no_such_field=1"],
        ["summary_every_pages"],
        ["=3"],
        ["summary_every_pages=six"],
        ["cold_tier=maybe"],
    ):
        with pytest.raises(ConfigError):
            parse_settings(bad)
