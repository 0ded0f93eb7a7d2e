"""The public API is pinned: exported names, both facades, and the README's lists.

One list in the code, ``memoryos_actors._FACADE_METHODS``, names the facade's methods.
Adding or removing a method without updating it, the other facade or the README fails
here, naming what differs.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import memoryos_actors
from memoryos_actors import AsyncMemoryOS, MemoryOS, MemoryOSError

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")

EXPORTED = sorted(
    [
        "ActorCrashed",
        "AgentProfile",
        "ArchivedMemories",
        "AsyncMemoryOS",
        "ChatReply",
        "Clock",
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
        "ManualClock",
        "Memory",
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


def _readme_api_methods() -> set[str]:
    text = _readme_paragraph("The whole API", "Expected failures")
    names = set(re.findall(r"`([a-z_]+)`", text))
    if "`MemoryOS.open(" in text:
        names.add("open")
    return names


def _readme_errors() -> set[str]:
    text = _readme_paragraph("Expected failures raise a subclass of `MemoryOSError`:", "\n\n")
    return set(re.findall(r"`([A-Za-z]+)`", text))


def test_the_package_exports_exactly_these_names() -> None:
    assert memoryos_actors.__all__ == EXPORTED
    for name in memoryos_actors.__all__:
        assert getattr(memoryos_actors, name) is not None


def test_the_sync_facade_has_exactly_the_listed_methods() -> None:
    listed = set(memoryos_actors._FACADE_METHODS)
    assert len(listed) == len(memoryos_actors._FACADE_METHODS), "a method is listed twice"
    public = _public(MemoryOS)
    assert sorted(public - listed) == [], "MemoryOS methods missing from _FACADE_METHODS"
    assert sorted(listed - public) == [], "_FACADE_METHODS names that MemoryOS lacks"


def test_the_async_facade_offers_every_listed_method_as_a_coroutine() -> None:
    listed = set(memoryos_actors._FACADE_METHODS)
    assert sorted(_public(AsyncMemoryOS) - listed - {"sync"}) == [], "async-only methods"
    not_coroutines = sorted(
        n for n in listed if not inspect.iscoroutinefunction(getattr(AsyncMemoryOS, n, None))
    )
    assert not_coroutines == [], "AsyncMemoryOS lacks these coroutines"


def test_both_facades_take_the_same_parameters() -> None:
    for name in memoryos_actors._FACADE_METHODS:
        sync = list(inspect.signature(getattr(MemoryOS, name)).parameters)
        aio = list(inspect.signature(getattr(AsyncMemoryOS, name)).parameters)
        assert aio == sync, f"{name}: async {aio} != sync {sync}"


def test_the_readme_lists_every_facade_method_and_no_other() -> None:
    readme = _readme_api_methods()
    listed = set(memoryos_actors._FACADE_METHODS)
    assert sorted(listed - readme) == [], "facade methods missing from the README's API list"
    assert sorted(readme - listed) == [], "README API names that the facade lacks"


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
