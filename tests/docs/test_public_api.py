"""The public API is pinned: exported names, the three facades, and the API reference's lists.

The API is declared once, as the protocol :class:`memoryos_actors.MemoryAPI`
(``memoryos_actors/api.py``) with each method's routing policy beside it; everything
here is derived from that declaration. What is generated from it with cog (the API list
of ``docs/library/api.md``, the asyncio twin :class:`memoryos_actors.AsyncMemoryAPI`, the coroutines of
:class:`memoryos_actors.AsyncMemoryOS` and the sharded facade's forwarding methods) must
be current; each facade is checked against
the protocols at run time (method names, parameter names, kinds, defaults and
annotations; mypy checks the types), and the shard server's handlers against the
policies that name one: adding, removing or changing a method without its policy, a
facade or regenerating fails here, naming what differs.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import memoryos_actors
from memoryos_actors import AsyncMemoryAPI, AsyncMemoryOS, MemoryAPI, MemoryOS, MemoryOSError
from memoryos_actors import api as api_module
from memoryos_actors.api import API_METHODS, POLICIES, Policy, Route
from memoryos_actors.cluster import ClusterMemoryOS
from memoryos_actors.cluster._shard import HANDLED, ShardServer

ROOT = Path(__file__).resolve().parents[2]
#: The API reference page: its list of calls is generated from the protocol, and its list
#: of errors is checked against the exported ones.
API_PAGE = "docs/library/api.md"
PAGE = (ROOT / API_PAGE).read_text(encoding="utf-8")

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


def _page_paragraph(start: str, end: str) -> str:
    """The API reference's text from ``start`` to ``end``, without HTML comments (the code
    that generates a list is in one)."""
    assert start in PAGE, f"{API_PAGE} lost the paragraph starting {start!r}"
    text = PAGE.split(start, 1)[1].split(end, 1)[0]
    return re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)


def _page_calls() -> dict[str, inspect.Signature]:
    """The calls the API reference's list writes out, ``name(params)``, each parsed as a
    Python signature (``MemoryOS.open`` as ``open``)."""
    text = " ".join(_page_paragraph("The whole API", "Expected failures").split())
    calls: dict[str, inspect.Signature] = {}
    for name, params in re.findall(r"`(?:MemoryOS\.)?([a-z_]+)\(([^`]*)\)`", text):
        assert name not in calls, f"{API_PAGE} lists {name} twice"
        fn = ast.parse(f"def {name}(self, {params}): pass").body[0]
        assert isinstance(fn, ast.FunctionDef)
        namespace: dict[str, object] = {}
        exec(compile(ast.Module([fn], []), "<API reference>", "exec"), namespace)  # noqa: S102 - literal defaults only
        calls[name] = inspect.signature(namespace[name])  # type: ignore[arg-type]
    return calls


def _shape(sig: inspect.Signature) -> list[tuple[str, str, object]]:
    """Parameter names, kinds and defaults (annotations left out: they are strings)."""
    return [(p.name, p.kind.name, p.default) for p in sig.parameters.values()]


def _typed_shape(fn: object) -> list[tuple[str, str, object, object]]:
    """Parameter names, kinds, defaults and annotations (as written: the modules postpone
    them, so the text is compared), and the return annotation last."""
    sig = inspect.signature(fn)  # type: ignore[arg-type]
    params = [(p.name, p.kind.name, p.default, p.annotation) for p in sig.parameters.values()]
    return [*params, ("return", "", None, sig.return_annotation)]


def _page_errors() -> set[str]:
    text = _page_paragraph("Expected failures raise a subclass of `MemoryOSError`:", "\n\n")
    return set(re.findall(r"`([A-Za-z]+)`", text))


def test_the_package_exports_exactly_these_names() -> None:
    assert memoryos_actors.__all__ == EXPORTED
    for name in memoryos_actors.__all__:
        assert getattr(memoryos_actors, name) is not None


def test_the_protocol_declares_every_method_with_a_docstring() -> None:
    assert len(API_METHODS) == len(set(API_METHODS))
    assert API_METHODS == tuple(sorted(_public(MemoryAPI), key=API_METHODS.index))
    for name in API_METHODS:
        assert (getattr(MemoryAPI, name).__doc__ or "").strip(), f"MemoryAPI.{name}"


def test_every_protocol_method_has_a_policy_row_and_every_row_a_protocol_method() -> None:
    assert list(POLICIES) == list(API_METHODS)
    declared = {vars(MemoryAPI)[name] for name in API_METHODS}
    # No @policy anywhere else (on the async twin, on a facade's method): one declaration.
    assert set(api_module._POLICY_OF) == declared
    for name, rule in POLICIES.items():
        assert isinstance(rule, Policy), name
        assert api_module.policy_of(getattr(MemoryAPI, name)) is rule
        assert api_module.policy_of(getattr(AsyncMemoryAPI, name)) is None, name
    for name, rule in POLICIES.items():
        if rule.route in (Route.USER, Route.USER_OR_ALL):  # the call names the user
            assert "user_id" in inspect.signature(getattr(MemoryAPI, name)).parameters, name


def test_a_policy_states_a_merge_exactly_when_the_call_may_go_to_every_shard() -> None:
    with pytest.raises(TypeError, match="merge"):
        Policy(Route.ALL, resend=True)
    with pytest.raises(TypeError, match="merge"):
        Policy(Route.USER, resend=True, merge=api_module.Merge.SORTED)
    with pytest.raises(TypeError, match="sends nothing"):
        Policy(Route.LOCAL, resend=True)


def test_the_shard_serves_with_a_handler_exactly_the_methods_whose_policy_says_so() -> None:
    wants_handler = {getattr(MemoryAPI, n) for n, rule in POLICIES.items() if rule.handler}
    assert sorted(m.__name__ for m in HANDLED.values()) == sorted(m.__name__ for m in wants_handler)
    assert len(HANDLED) == len(wants_handler), "one handler per method"
    for handler in HANDLED:
        assert getattr(ShardServer, handler.__name__) is handler, handler
    # What else a shard answers is the transport's: one typed call, and where it runs.
    others = _public(ShardServer) - {handler.__name__ for handler in HANDLED}
    assert sorted(others) == ["call", "info"]


#: The methods that give their answer piece by piece (their policy says ``stream``).
STREAMS = tuple(name for name in API_METHODS if POLICIES[name].stream)
#: What a streaming method returns, in the sync protocol and in its async twin.
STREAM_TYPES = {"ChatStream": "AsyncChatStream"}


def test_the_async_protocol_mirrors_the_sync_one() -> None:
    """Same methods in the same order, each a coroutine with the same parameters,
    defaults, annotations and return annotation; a streaming method, written by hand
    after the generated ones, is a plain method with the same parameters that returns the
    async iterator of what the sync one returns."""
    assert STREAMS == ("chat_stream",)
    assert sorted(_public(AsyncMemoryAPI)) == sorted(API_METHODS)
    plain = [n for n in API_METHODS if n not in STREAMS]
    assert [n for n in vars(AsyncMemoryAPI) if n in API_METHODS] == plain + list(STREAMS)
    drift = {}
    for name in API_METHODS:
        want, got = (
            _typed_shape(getattr(MemoryAPI, name)),
            _typed_shape(getattr(AsyncMemoryAPI, name)),
        )
        if name in STREAMS:
            assert not inspect.iscoroutinefunction(getattr(AsyncMemoryAPI, name)), name
            want[-1] = ("return", "", None, STREAM_TYPES[str(want[-1][3])])
        else:
            assert inspect.iscoroutinefunction(getattr(AsyncMemoryAPI, name)), name
        if got != want:
            drift[name] = {"async": got, "sync": want}
    assert drift == {}


def test_a_streaming_method_has_no_generated_twin_and_a_stream_policy_of_its_own() -> None:
    for name in STREAMS:
        assert POLICIES[name].route is Route.LOCAL, name  # each facade serves it itself
        assert api_module.twin_methods(lambda n, call: "...", [name]).strip() == "", name
        sync_returns = inspect.signature(getattr(MemoryAPI, name)).return_annotation
        assert sync_returns in STREAM_TYPES, name
    # The async iterators' methods: what `async for` and `async with` need.
    from memoryos_actors.chat_streams import AsyncChatStream, ChatStream

    for method in ("__iter__", "__next__", "close", "__enter__", "__exit__"):
        assert callable(getattr(ChatStream, method)), method
    for method in ("__aiter__", "__anext__", "aclose", "__aenter__", "__aexit__"):
        assert callable(getattr(AsyncChatStream, method)), method


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
        n
        for n in API_METHODS
        if n not in STREAMS and not inspect.iscoroutinefunction(getattr(AsyncMemoryOS, n, None))
    )
    assert not_coroutines == [], "AsyncMemoryOS lacks these coroutines"
    for name in STREAMS:  # an async iterator, not a coroutine
        assert callable(getattr(AsyncMemoryOS, name, None)), name
        assert not inspect.iscoroutinefunction(getattr(AsyncMemoryOS, name)), name


@pytest.mark.parametrize(
    ("facade", "protocol"),
    [(MemoryOS, MemoryAPI), (ClusterMemoryOS, MemoryAPI), (AsyncMemoryOS, AsyncMemoryAPI)],
    ids=["MemoryOS", "ClusterMemoryOS", "AsyncMemoryOS"],
)
def test_each_facade_takes_the_protocols_parameters(facade: type, protocol: type) -> None:
    """Names, kinds (positional or keyword-only), defaults and annotations, method by
    method: a facade that drifts from the one declared API fails here, naming the method."""
    drift = {}
    for name in API_METHODS:
        want = _typed_shape(getattr(protocol, name))
        got = _typed_shape(getattr(facade, name))
        if got != want:
            drift[name] = {"facade": got, "protocol": want}
    assert drift == {}


def test_both_opens_take_the_same_parameters() -> None:
    sync = _shape(inspect.signature(MemoryOS.open))
    aio = _shape(inspect.signature(AsyncMemoryOS.open))
    assert aio == sync


def test_the_api_reference_lists_every_call_with_the_protocols_parameters() -> None:
    calls = _page_calls()
    # Beyond the protocol: the constructor, and the async wrapper's detach.
    declared = {name: getattr(MemoryAPI, name) for name in API_METHODS}
    declared |= {"open": MemoryOS.open, "detach": AsyncMemoryOS.detach}
    assert sorted(set(declared) - set(calls)) == [], (
        "API calls missing from the API reference's list"
    )
    assert sorted(set(calls) - set(declared)) == [], "calls in the API reference that the API lacks"
    for name, sig in calls.items():
        want = _shape(inspect.signature(declared[name]))
        if name == "open":  # a classmethod: its signature has no cls
            want = [("self", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty), *want]
        assert _shape(sig) == want, f"{API_PAGE} writes {name}{sig} differently"


#: The files with parts generated from ``MemoryAPI`` by cog, and the command that does it.
GENERATED = (
    API_PAGE,
    "docs/configuration.md",
    "memoryos_actors/api.py",
    "memoryos_actors/aio.py",
    "memoryos_actors/cluster/_facade.py",
)
REGENERATE = "cog -r " + " ".join(GENERATED)


def test_what_is_generated_from_the_protocol_is_current() -> None:
    """The API reference's list of calls, the table of environment variables, ``AsyncMemoryAPI``, ``AsyncMemoryOS``'s methods and the
    sharded facade's forwarding methods are what the protocol and its policies generate
    now (cog's check: it changes nothing)."""
    done = subprocess.run(
        [sys.executable, "-m", "cogapp", "--check", "--diff", *GENERATED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (
        "parts generated from memoryos_actors/api.py are stale; regenerate them with "
        f"`{REGENERATE}` (cogapp comes with the test extra):\n{done.stdout}{done.stderr}"
    )


def test_the_api_reference_lists_every_exported_error_and_no_other() -> None:
    exported = {
        name
        for name in memoryos_actors.__all__
        if isinstance(getattr(memoryos_actors, name), type)
        and issubclass(getattr(memoryos_actors, name), MemoryOSError)
        and name != "MemoryOSError"
    }
    listed = _page_errors()
    assert sorted(exported - listed) == [], "exported errors missing from the API reference"
    assert sorted(listed - exported) == [], "errors in the API reference that are not exported"


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
