"""The public API is pinned: exported names, the three facades, and the README's lists.

The API is declared once, as the protocols :class:`memoryos_actors.MemoryAPI` and
:class:`memoryos_actors.AsyncMemoryAPI` (``memoryos_actors/api.py``). Each facade is
checked against them here at run time (method names, parameter names, kinds and
defaults; mypy checks the types), and so is the README's API list: adding, removing or
changing a method without updating the protocol, a facade or the README fails here,
naming what differs.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import memoryos_actors
from memoryos_actors import AsyncMemoryAPI, AsyncMemoryOS, MemoryAPI, MemoryOS, MemoryOSError
from memoryos_actors.api import API_METHODS
from memoryos_actors.cluster import ClusterMemoryOS

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")

EXPORTED = sorted(
    [
        "ActorCrashed",
        "AgentProfile",
        "ArchivedMemories",
        "AsyncMemoryAPI",
        "AsyncMemoryOS",
        "ChatReply",
        "Clock",
        "ClusterUnreachable",
        "ConfigError",
        "ContextItem",
        "CorruptDataError",
        "DataDirLocked",
        "DoctorCheck",
        "DoctorReport",
        "EmbedderMismatch",
        "ForgetReport",
        "GatewayError",
        "InvalidInput",
        "LayoutChanged",
        "ManualClock",
        "Memory",
        "MemoryAPI",
        "MemoryConfig",
        "MemoryContext",
        "MemoryEvent",
        "MemoryList",
        "MemoryOS",
        "MemoryOSError",
        "Overloaded",
        "Page",
        "ProviderAuthError",
        "ProviderConfigError",
        "ProviderModelNotFound",
        "ProviderUnavailable",
        "ProviderUnreachable",
        "ReadOnlyError",
        "RepairReport",
        "RepairedFile",
        "StorageError",
        "SystemClock",
        "SystemClosed",
        "TraitLevel",
        "UnknownMemory",
        "UnknownUser",
        "UserPhase",
        "UserProfile",
        "UserState",
        "doctor",
    ]
)


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _readme_paragraph(start: str, end: str) -> str:
    assert start in README, f"README lost the paragraph starting {start!r}"
    return README.split(start, 1)[1].split(end, 1)[0]


def _readme_calls() -> dict[str, inspect.Signature]:
    """The calls the README's API list writes out, ``name(params)``, each parsed as a
    Python signature (``MemoryOS.open`` as ``open``)."""
    text = " ".join(_readme_paragraph("The whole API", "Expected failures").split())
    calls: dict[str, inspect.Signature] = {}
    for name, params in re.findall(r"`(?:MemoryOS\.)?([a-z_]+)\(([^`]*)\)`", text):
        assert name not in calls, f"the README lists {name} twice"
        fn = ast.parse(f"def {name}(self, {params}): pass").body[0]
        assert isinstance(fn, ast.FunctionDef)
        namespace: dict[str, object] = {}
        exec(compile(ast.Module([fn], []), "<README>", "exec"), namespace)  # noqa: S102 - literal defaults only
        calls[name] = inspect.signature(namespace[name])  # type: ignore[arg-type]
    return calls


def _shape(sig: inspect.Signature) -> list[tuple[str, str, object]]:
    """Parameter names, kinds and defaults (annotations left out: they are strings)."""
    return [(p.name, p.kind.name, p.default) for p in sig.parameters.values()]


def _readme_errors() -> set[str]:
    text = _readme_paragraph("Expected failures raise a subclass of `MemoryOSError`:", "\n\n")
    return set(re.findall(r"`([A-Za-z]+)`", text))


def test_the_package_exports_exactly_these_names() -> None:
    assert memoryos_actors.__all__ == EXPORTED
    for name in memoryos_actors.__all__:
        assert getattr(memoryos_actors, name) is not None


def test_the_protocol_declares_every_method_with_a_docstring() -> None:
    assert len(API_METHODS) == len(set(API_METHODS)) == 29
    for name in API_METHODS:
        assert (getattr(MemoryAPI, name).__doc__ or "").strip(), f"MemoryAPI.{name}"
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryAPI, name)), name
    assert sorted(_public(AsyncMemoryAPI)) == sorted(API_METHODS)


def test_the_sync_facade_has_exactly_the_protocols_methods() -> None:
    public = _public(MemoryOS)
    assert sorted(public - set(API_METHODS) - {"open"}) == [], "MemoryOS methods not in MemoryAPI"
    assert sorted(set(API_METHODS) - public) == [], "MemoryAPI methods that MemoryOS lacks"
    for name in API_METHODS:
        assert getattr(MemoryOS, name).__doc__, f"MemoryOS.{name} has no docstring"


def test_the_cluster_facade_has_the_protocols_methods() -> None:
    public = _public(ClusterMemoryOS)
    assert sorted(set(API_METHODS) - public) == [], "MemoryAPI methods ClusterMemoryOS lacks"
    extra = public - set(API_METHODS)
    assert sorted(extra) == ["shard_for", "shard_info", "shard_states"], (
        "cluster-only methods changed"
    )


def test_the_async_facade_offers_every_method_as_a_coroutine() -> None:
    extra = _public(AsyncMemoryOS) - set(API_METHODS)
    assert sorted(extra) == ["detach", "open"], "async-only names changed"
    not_coroutines = sorted(
        n for n in API_METHODS if not inspect.iscoroutinefunction(getattr(AsyncMemoryOS, n, None))
    )
    assert not_coroutines == [], "AsyncMemoryOS lacks these coroutines"


@pytest.mark.parametrize(
    ("facade", "protocol"),
    [(MemoryOS, MemoryAPI), (ClusterMemoryOS, MemoryAPI), (AsyncMemoryOS, AsyncMemoryAPI)],
    ids=["MemoryOS", "ClusterMemoryOS", "AsyncMemoryOS"],
)
def test_each_facade_takes_the_protocols_parameters(facade: type, protocol: type) -> None:
    """Names, kinds (positional or keyword-only) and defaults, method by method: a facade
    that drifts from the one declared API fails here, naming the method."""
    drift = {}
    for name in API_METHODS:
        want = _shape(inspect.signature(getattr(protocol, name)))
        got = _shape(inspect.signature(getattr(facade, name)))
        if got != want:
            drift[name] = {"facade": got, "protocol": want}
    assert drift == {}


def test_both_opens_take_the_same_parameters() -> None:
    sync = _shape(inspect.signature(MemoryOS.open))
    aio = _shape(inspect.signature(AsyncMemoryOS.open))
    assert aio == sync


def test_the_readme_lists_every_call_with_the_protocols_parameters() -> None:
    calls = _readme_calls()
    # Beyond the protocol: the constructor, and the async wrapper's detach.
    declared = {name: getattr(MemoryAPI, name) for name in API_METHODS}
    declared |= {"open": MemoryOS.open, "detach": AsyncMemoryOS.detach}
    assert sorted(set(declared) - set(calls)) == [], "API calls missing from the README's list"
    assert sorted(set(calls) - set(declared)) == [], "README calls that the API lacks"
    for name, sig in calls.items():
        want = _shape(inspect.signature(declared[name]))
        if name == "open":  # a classmethod: its signature has no cls
            want = [("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty), *want]
        assert _shape(sig) == want, f"the README writes {name}{sig} differently"


def test_the_readme_lists_every_exported_error_and_no_other() -> None:
    exported = {
        name
        for name in memoryos_actors.__all__
        if isinstance(getattr(memoryos_actors, name), type)
        and issubclass(getattr(memoryos_actors, name), MemoryOSError)
        and name != "MemoryOSError"
    }
    readme = _readme_errors()
    assert sorted(exported - readme) == [], "exported errors missing from the README"
    assert sorted(readme - exported) == [], "README errors that are not exported"


def test_each_lazy_package_writes_out_exactly_its_lazy_names() -> None:
    """``__all__`` is a literal list (linters and type checkers read it without importing
    the package): it must name exactly what the package loads on first use, and each of
    those names must load."""
    import importlib

    for name in ("memoryos_actors", "memoryos_actors.cluster", "memoryos_actors.server"):
        package = importlib.import_module(name)
        assert package.__all__ == sorted(package._EXPORTS), name
    from memoryos_actors import messages

    for exported in messages.__all__:  # messages loads nothing lazily: each name is there
        assert exported in vars(messages), exported
