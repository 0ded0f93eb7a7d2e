"""Shared fixtures: every test must leave no actor or thread behind."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator

import pykka
import pytest
import structlog
from hypothesis import HealthCheck, settings
from waiting import wait_until

# Property tests check what is true, never how fast: no per-example deadline (hypothesis's
# default of 200 ms fails an example that a loaded machine or a parallel run slows down),
# and no health check on slow data generation. Loaded here, before any test module
# defines its own settings, which inherit these.
settings.register_profile("memoryos", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("memoryos")

# Ray binds its processes (GCS, raylet, workers) to the machine's network address unless
# this is 0, and reads it once, when its modules are imported: set here, before any test
# module (some import Ray when collected) can import it, so every Ray process of the run
# listens on 127.0.0.1 only. Inherited by every process Ray starts.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# litellm fetches its price map from the internet when imported, unless told not to; test
# modules import it at collection time (importorskip), before the gateway's lazy import
# could set this. No test may touch the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# litellm hands the logging of each successful call to a process-wide thread pool that
# starts a new worker whenever none is idle (up to 100) and never stops one: two calls in a
# row while the first one's logging still runs (a loaded machine) leave one thread more
# than the test found, and the leak check below fails the test at teardown. Pinned to one
# worker, started by the session warm-up in tests/gateway/conftest.py, the pool holds the
# same thread count in every test however slow logging is. Read when litellm is imported.
os.environ["LOGGING_EXECUTOR_MAX_THREADS"] = "1"

# Configure structlog once for the whole run, before any MemoryOS.open() would: every level
# passes (so tests that capture log events see them, whatever ran before), and whatever is
# not captured goes nowhere instead of flooding the test output.
structlog.configure(
    processors=[structlog.processors.add_log_level, structlog.processors.KeyValueRenderer()],
    wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
    logger_factory=structlog.PrintLoggerFactory(file=open(os.devnull, "w")),  # noqa: SIM115
    cache_logger_on_first_use=False,
)


#: The project's import packages, byte-compiled once per test session (see below).
_PACKAGES = ("memoryos_actors", "supervisor")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile the project's two packages once, in the session's first process.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (as in CI's environment) no import writes a
    ``.pyc``, so in a fresh clone every process the suite starts (each ``memoryos``
    subprocess, server, xdist worker, Ray worker and shard actor) compiled both packages
    from source again; Python still reads a ``.pyc`` that exists, and ``compileall``
    writes one whatever that setting says. Run in the controller only (an xdist worker
    has ``workerinput``), before the workers start, so they and their children find it.
    """
    if hasattr(config, "workerinput"):
        return
    import compileall
    import importlib.util

    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)  # finds, does not import, the package
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            compileall.compile_dir(folder, quiet=1)
    if sys.dont_write_bytecode and getattr(config.option, "numprocesses", None):
        _cache_rewritten_test_modules(config)


#: The controller's config, for the forked processes that rewrite test modules.
_REWRITE_CONFIG: pytest.Config | None = None


def _cache_rewritten_test_modules(config: pytest.Config) -> None:
    """Write pytest's cache of the assert-rewritten test modules once, before the
    xdist workers start.

    pytest rewrites the asserts of every test module and ``conftest.py`` it imports and
    caches the result beside it, but not where ``PYTHONDONTWRITEBYTECODE`` is set: each
    worker then rewrote all of them while collecting (a worker collected in 6.8 s of CPU
    instead of 3.8 s with the cache, ``pytest --collect-only`` measured both ways). Done
    here in as many forked processes as the machine has cores, with pytest's own rewrite
    and cache writer: these are private to pytest, so any difference in them (another
    pytest) leaves the workers to rewrite as before, which is slower, never wrong: pytest
    checks a cached module against its source before it uses it.
    """
    global _REWRITE_CONFIG
    try:
        from _pytest.assertion.rewrite import assertstate_key

        config.stash[assertstate_key]  # absent with --assert=plain: nothing to cache
    except (ImportError, KeyError):
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path

    root = Path(__file__).resolve().parent
    files = sorted(
        str(f) for f in root.rglob("*.py") if f.name.startswith("test_") or f.name == "conftest.py"
    )
    _REWRITE_CONFIG = config
    try:
        with ProcessPoolExecutor(
            max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("fork")
        ) as pool:
            list(pool.map(_cache_rewritten, files, chunksize=8))
    except Exception:  # noqa: BLE001 - an optimisation only: the workers rewrite instead
        return
    finally:
        _REWRITE_CONFIG = None


def _cache_rewritten(path: str) -> None:
    """In a forked process: rewrite one module's asserts and write pytest's cache of it,
    as pytest's import hook would where writing byte code is allowed."""
    from pathlib import Path

    from _pytest.assertion.rewrite import (
        PYC_TAIL,
        _read_pyc,
        _rewrite_test,
        _write_pyc,
        assertstate_key,
        get_cache_dir,
        try_makedirs,
    )

    config = _REWRITE_CONFIG
    assert config is not None
    fn = Path(path)
    cache_dir = get_cache_dir(fn)
    pyc = cache_dir / (fn.name[:-3] + PYC_TAIL)
    if not try_makedirs(cache_dir) or _read_pyc(fn, pyc) is not None:
        return
    source_key, code = _rewrite_test(fn, config)
    _write_pyc(config.stash[assertstate_key], code, source_key, pyc)


@pytest.fixture
def offline_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline backend answers the tiers' jobs on the gateway's event loop, as a
    provider does, instead of in the asking actor's thread: for tests that hold or slow
    an answer (the offline backend standing in for a provider) while the tiers go on."""
    from memoryos_actors.gateway.service import GatewayService

    monkeypatch.setattr(GatewayService, "answers_locally", property(lambda self: False))


@pytest.fixture(autouse=True)
def _no_leaked_actors_or_threads() -> Iterator[None]:
    actors_before = len(pykka.ActorRegistry.get_all())
    threads_before = threading.active_count()
    yield
    # Actors and threads a test stopped may take a moment to end: wait for that, a while.
    wait_until(
        lambda: len(pykka.ActorRegistry.get_all()) <= actors_before,
        lambda: f"no actor left running (still running: {pykka.ActorRegistry.get_all()[:5]})",
        timeout=5.0,
    )
    wait_until(
        lambda: threading.active_count() <= threads_before,
        lambda: f"no thread left running (running: {[t.name for t in threading.enumerate()]})",
        timeout=5.0,
    )


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """One local Ray cluster for the whole test session (starting one takes seconds).

    A ``ray.cluster_utils.Cluster`` with a head node, so fault tests can add and remove
    nodes. Everything binds to 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, set at
    the top of this file) and Ray's files go to a temporary directory deleted at the end.
    Ray's token authentication stays at its default. Ray's own driver threads live as long
    as the session: see ``tests/cluster/conftest.py`` for how the leak check treats them.
    """
    import shutil
    import tempfile

    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR",)}
    tmp = tempfile.mkdtemp(prefix="mos-ray-")  # short: Ray's socket paths have a length limit
    os.environ["RAY_TMPDIR"] = tmp
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    # No autoscaler monitor and no log monitor (the driver takes no worker logs): two
    # Python processes fewer to start and stop.
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "include_dashboard": False,
            "no_monitor": True,
            "include_log_monitor": False,
        },
    )
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: The test modules that import litellm into the test process (``tests/gateway``). Their
#: tests run in one xdist worker: importing litellm costs 4-7 s of CPU, paid once per
#: process, and the modules no longer import it when collected.
_LITELLM_MODULES = frozenset(
    {
        "test_gateway_async_core.py",
        "test_gateway_litellm.py",
        "test_gateway_system.py",
        "test_owed_work.py",
        "test_provider_errors.py",
    }
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``-n 3 --dist loadgroup``, the README's test command) every test
    that uses the session's Ray cluster runs in one worker, and every test that uses the
    session's Ray head (``tests/server/conftest.py``) in one worker: each is one per test
    session, and each worker is a session of its own, so a second worker would start a
    second one. The two groups may run in different workers. The tests that import litellm
    run in one worker (see :data:`_LITELLM_MODULES`), and so do the tests of a module with a
    module-scoped fixture (see :func:`_uses_module_fixture`)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        fixtures = getattr(item, "fixturenames", ())
        if "ray_cluster" in fixtures or backend == "ray":
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif "ray_head" in fixtures:
            item.add_marker(pytest.mark.xdist_group("rayhead"))
        elif "litellm_ready" in fixtures or item.path.name in _LITELLM_MODULES:
            item.add_marker(pytest.mark.xdist_group("litellm"))
        elif _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    if getattr(config.option, "loadgroup", False):  # set in xdist's workers only
        _name_groups_in_node_ids(items)


#: The session fixtures that keep Ray processes running, by the xdist group of their tests.
_RAY_FIXTURES = {"ray": "ray_cluster", "rayhead": "ray_head"}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under xdist, stop the session's Ray cluster (or Ray head) after the last test of its
    group instead of at the session's end: a group's tests run one after another in one
    worker, and an idle Ray cluster still spends ~6% of a core (1.7 s of CPU in 30 s, its
    nine processes measured with psutil) for as long as the worker runs other tests. A
    test that needed it again would start a new one."""
    result = yield
    if getattr(item.config.option, "loadgroup", False):
        for group, name in _RAY_FIXTURES.items():
            if group in _groups(item) and (nextitem is None or group not in _groups(nextitem)):
                defs = item.session._fixturemanager.getfixturedefs(name, item)
                if defs and defs[-1].cached_result is not None:
                    defs[-1].finish(item._request)  # type: ignore[attr-defined]
    return result


def _groups(item: pytest.Item) -> set[str]:
    return {str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args}


def _uses_module_fixture(item: pytest.Item) -> bool:
    """Whether ``item`` uses a module-scoped fixture (a live server, a browser, a system
    with data in it): the module's tests then run in one xdist worker, which sets the
    fixture up once. Left to ``--dist loadgroup`` alone, a module's tests are spread over
    the workers one by one, and each worker started the module's server and browser."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope in ("module", "class", "package"):
            return True
    return False


def _name_groups_in_node_ids(items: list[pytest.Item]) -> None:
    """Append ``@<group>`` to the node id of each test with an ``xdist_group`` mark.

    xdist's scheduler reads a test's group from its node id, and xdist 3.8 appends it by
    setting ``item._nodeid``, which pytest 9.2 no longer reads (a node id is ``item._id``
    now): the marks were ignored and each worker started a Ray cluster of its own. This
    does what xdist means to, where it has not already (#27).
    """
    from _pytest.nodeid import NodeId

    for item in items:
        names = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if names and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")
