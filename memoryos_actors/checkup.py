"""``memoryos doctor`` as a library call: is this configuration ready to run?

:func:`doctor` checks, one :class:`DoctorCheck` each:

* ``llm``: the configured LLM answers one small completion, in the JSON mode the gateway
  uses (the offline backend passes at once);
* ``embedder``: the embedder gives one embedding, and its name and dimension match the
  ones the data directory's users were stored with;
* ``data dir``: the data directory is (or can be made) a writable directory, no other
  process holds its lock, and its file system has room;
* ``key file``: the server's API key file, when there is one, is readable by its owner only
  and is a key file.

A provider's failure is told apart: a configuration error (no key, a rejected key, an
unknown model, a base URL that cannot be reached) is what :func:`startup_check` refuses to
start with; an outage (5xx answers, timeouts) is only a warning there, since the gateway
falls back to the offline backend and marks such replies degraded. No line ever contains an
API key, not even a part of one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import stat
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import MemoryConfig
from .errors import (
    ConfigError,
    EmbedderMismatch,
    GatewayError,
    MemoryOSError,
    ProviderAuthError,
    ProviderConfigError,
    ProviderUnavailable,
    StorageError,
)
from .prerequisites import install_hint
from .store.keyfile import parse_key_file

__all__ = [
    "DoctorCheck",
    "DoctorReport",
    "check_data_dir",
    "check_embedder",
    "check_key_file",
    "check_llm",
    "doctor",
    "startup_check",
]

MIN_FREE_BYTES = 64 * 1024 * 1024
"""Least free space (bytes) ``check_data_dir`` accepts on the data directory's file system."""

#: The probe asks for a JSON answer (what the background calls need: chain meta, summaries,
#: persona updates); a chat reply is plain text, which any model that answers can write.
_PROBE_KIND = "segment_summary"
_PROBE_PAYLOAD = {"pages": [{"query": "Are you ready?", "response": "Ready."}]}


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    """The outcome of one check.

    Attributes:
        name: what was checked: ``"llm"``, ``"embedder"``, ``"data dir"`` or ``"key file"``.
        status: ``"ok"``, ``"warn"`` (works, but look at it), ``"fail"`` or ``"skip"``
            (nothing to check).
        detail: one line saying what was found and, on a failure, how to fix it. Never
            contains an API key.
        error: the typed error behind a failure, when there is one (a
            :class:`~memoryos_actors.errors.ProviderConfigError` subclass for a provider's
            configuration error, :class:`~memoryos_actors.errors.ProviderUnavailable` for
            an outage).
        seconds: how long the check took, seconds.
    """

    name: str
    status: str
    detail: str
    error: MemoryOSError | None = field(default=None, compare=False, repr=False)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """False only for a failed check."""
        return self.status != "fail"

    @property
    def config_error(self) -> bool:
        """True when the check failed on a provider configuration error (not an outage)."""
        return isinstance(self.error, ProviderConfigError)

    def line(self) -> str:
        """``"ok    llm       litellm:openai/gpt-4o-mini answered in 0.4 s ..."``."""
        return f"{self.status:<5} {self.name:<9} {self.detail}"


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """Every check :func:`doctor` ran, in order; ``ok`` when none failed."""

    checks: tuple[DoctorCheck, ...]

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings and skipped checks are fine)."""
        return all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        """One line per check (see :meth:`DoctorCheck.line`)."""
        return [c.line() for c in self.checks]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def doctor(
    data_dir: str | os.PathLike[str],
    config: MemoryConfig | None = None,
    *,
    keys_file: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    min_free_bytes: int = MIN_FREE_BYTES,
) -> DoctorReport:
    """Check that ``config`` can run over ``data_dir``; see the module docstring.

    ``keys_file`` is the server's API key file: when given it must exist; when None, the
    data directory's ``server-keys.json`` is checked if there is one. ``timeout`` caps each
    provider call, seconds (default: ``llm_timeout_seconds``). Makes at most one completion
    and one embedding call, changes nothing in the data directory and opens no memory
    system; a data directory in use by a server can be checked too (its lock is reported).
    """
    cfg = config if config is not None else MemoryConfig()
    path = Path(data_dir)
    keys = Path(keys_file) if keys_file is not None else path / "server-keys.json"
    return DoctorReport(
        (
            check_llm(cfg, timeout=timeout),
            check_embedder(cfg, path, timeout=timeout),
            check_data_dir(path, min_free_bytes=min_free_bytes),
            check_key_file(keys, required=keys_file is not None),
        )
    )


def startup_check(config: MemoryConfig, *, timeout: float | None = None) -> list[str]:
    """The provider check ``chat``, ``serve`` and ``mcp`` run before they start.

    Checks the LLM and the embedder (see :func:`check_llm`, :func:`check_embedder`).
    Raises the :class:`~memoryos_actors.errors.ProviderConfigError` subclass (or
    :class:`~memoryos_actors.errors.ConfigError`) of a configuration error, whose one-line
    message says what is wrong and how to fix it. Returns warning lines for what does not
    stop a start: an outage (replies come from the offline fallback, marked degraded) or
    answers that are not valid JSON. The offline backend and the hashing embedder pass
    without any call.
    """
    warnings: list[str] = []
    for check in (
        check_llm(config, timeout=timeout),
        check_embedder(config, None, timeout=timeout),
    ):
        if check.status == "fail":
            if isinstance(check.error, (ProviderConfigError, ConfigError)):
                raise check.error
            warnings.append(f"{check.name}: {check.detail}")
        elif check.status == "warn":
            warnings.append(f"{check.name}: {check.detail}")
    return warnings


# -- the LLM ----------------------------------------------------------------------------------


def check_llm(config: MemoryConfig, *, timeout: float | None = None) -> DoctorCheck:
    """One small ``segment_summary`` completion through the configured backend, one attempt.

    The request is what the gateway sends (same client path, JSON mode as configured);
    the answer must be valid ``segment_summary`` JSON. A key variable that is not set fails
    before any call.
    """
    started = time.perf_counter()
    if config.llm_backend == "offline":
        return DoctorCheck("llm", "ok", "offline backend (extractive, no provider, no key)")
    model = config.llm_model or ""
    missing = _missing_key(config, model, "LLM")
    if missing is not None:
        return _failed("llm", missing, started)
    try:
        from .gateway.litellm_backend import LiteLLMBackend

        backend = LiteLLMBackend(
            model,
            api_base=config.llm_base_url,
            api_key_env=config.llm_api_key_env,
            timeout=_timeout(config, timeout),
            client=config.llm_client,
            json_mode=config.llm_json_mode,
        )
    except ConfigError as exc:
        return _failed("llm", exc, started)
    from .gateway.base import ProviderCallError

    try:
        if not backend.use_http:
            from .gateway.litellm_backend import import_litellm

            import_litellm()  # seconds on a cold start: not the provider's answer time
        started = time.perf_counter()
        _run_async(_probe, backend)
    except ProviderCallError as exc:
        return _provider_failure("llm", backend.name, exc, backend.config_error, started)
    except ConfigError as exc:
        return _failed("llm", exc, started)
    except ImportError as exc:
        return _failed(
            "llm",
            ConfigError(
                f"llm_backend='litellm' needs the 'llm' extra ({exc.name} is missing): "
                + install_hint("llm")
            ),
            started,
        )
    spent = time.perf_counter() - started
    mode = {True: "JSON mode", False: "no JSON mode", None: "JSON mode untried"}[
        backend.json_mode_active
    ]
    return DoctorCheck(
        "llm",
        "ok",
        f"{backend.name} answered in {spent:.1f} s ({mode}, {backend.client_path} client)",
        seconds=spent,
    )


def _missing_key(config: MemoryConfig, model: str, what: str) -> ProviderAuthError | None:
    """A key the configuration needs and the environment lacks, before any call.

    ``llm_api_key_env`` names a variable that must be set. Without it and without a base
    URL (a provider's own API), litellm's list of the provider's key variables is asked.
    A base URL without a key variable is a local server that may need no key: its first
    answer tells.
    """
    env = config.llm_api_key_env
    if env:
        if os.environ.get(env):
            return None
        fix = f"export {env}=<your key>" + (
            f", or remove llm_api_key_env if the server at {config.llm_base_url} needs no key"
            if config.llm_base_url
            else ""
        )
        return ProviderAuthError(f"{what} {model}: {env} is not set: {fix}", hint=fix)
    if config.llm_base_url:
        return None
    try:
        from .gateway.litellm_backend import import_litellm

        found = import_litellm().validate_environment(model=model) or {}
    except Exception:  # noqa: BLE001 - an unknown provider: the call itself will tell
        return None
    keys = [
        k
        for k in found.get("missing_keys") or []
        if isinstance(k, str) and k.upper().endswith(("_KEY", "_TOKEN"))
    ]
    if not keys:
        return None
    fix = f"export {keys[0]}=<your key> (or set llm_api_key_env to the variable holding it)"
    return ProviderAuthError(f"{what} {model}: {keys[0]} is not set: {fix}", hint=fix)


# -- the embedder -----------------------------------------------------------------------------


def check_embedder(
    config: MemoryConfig, data_dir: str | os.PathLike[str] | None, *, timeout: float | None = None
) -> DoctorCheck:
    """One embedding from the configured embedder; its name and dimension against those
    the users under ``data_dir`` were stored with (when given)."""
    started = time.perf_counter()
    from .gateway.base import ProviderCallError
    from .gateway.embedders import make_embedder

    if config.embedder == "litellm":
        missing = _missing_key(config, config.embedding_model or "", "embedder")
        if missing is not None:
            return _failed("embedder", missing, started)
    try:
        if config.embedder == "litellm":
            from .gateway.embedders import LiteLLMEmbedder

            embedder: Any = LiteLLMEmbedder(
                config.embedding_model or "",
                api_base=config.llm_base_url,
                api_key_env=config.llm_api_key_env,
                timeout=_timeout(config, timeout),
            )
        else:
            embedder = make_embedder(config)
    except (ConfigError, ImportError) as exc:
        return _failed(
            "embedder",
            exc
            if isinstance(exc, ConfigError)
            else ConfigError(
                f"embedder={config.embedder!r} needs a package that is missing: {exc}"
            ),
            started,
        )
    try:
        vectors = embedder.embed(["memoryos doctor probe"])
    except ProviderCallError as exc:
        return _provider_failure("embedder", embedder.name, exc, embedder.config_error, started)
    except (ConfigError, GatewayError) as exc:
        return _failed("embedder", exc, started)
    name, dim = embedder.name, int(vectors.shape[1])
    spent = time.perf_counter() - started
    where = "local" if config.embedder != "litellm" else f"answered in {spent:.1f} s"
    stored = _stored_embedders(Path(data_dir)) if data_dir is not None else Counter()
    others = {k: n for k, n in stored.items() if k != (name, dim)}
    if others:
        (oname, odim), n = max(others.items(), key=lambda kv: kv[1])
        err = EmbedderMismatch(
            f"{n} of {sum(stored.values())} users were stored with {oname!r} (dim {odim}) "
            f"but {name!r} (dim {dim}) is configured: configure the original embedder, "
            "or convert the stored vectors with it configured: memoryos reembed --embedder ..."
        )
        return DoctorCheck("embedder", "fail", str(err), err, spent)
    users = sum(stored.values())
    matches = f", matches the {_n(users, 'stored user')}" if users else ""
    return DoctorCheck("embedder", "ok", f"{name} ({where}, dim {dim}{matches})", seconds=spent)


def _stored_embedders(data_dir: Path) -> Counter[tuple[str, int]]:
    """``(embedder name, dim)`` of every user under ``data_dir`` (plain or sharded)."""
    from .store.user_meta import UserMeta
    from .store.userstore import META_FILE, USERS_DIR

    found: Counter[tuple[str, int]] = Counter()
    if not data_dir.is_dir():
        return found
    for pattern in (f"{USERS_DIR}/*/{META_FILE}", f"*/{USERS_DIR}/*/{META_FILE}"):
        for meta_path in data_dir.glob(pattern):
            try:
                meta = UserMeta.from_dict(json.loads(meta_path.read_text("utf-8")), meta_path)
            except (OSError, ValueError, MemoryOSError):
                continue  # a damaged meta file is for the store to report, not the doctor
            if meta.embedder_name is not None and meta.embedder_dim is not None:
                found[(meta.embedder_name, meta.embedder_dim)] += 1
    return found


# -- the data directory and the key file --------------------------------------------------------


def check_data_dir(
    data_dir: str | os.PathLike[str], *, min_free_bytes: int = MIN_FREE_BYTES
) -> DoctorCheck:
    """Writable (or creatable), not locked by another process, ``min_free_bytes`` free."""
    from .store.lock import lock_holder

    path = Path(data_dir)
    if not path.exists():
        parent = next((p for p in path.absolute().parents if p.exists()), Path("/"))
        if not os.access(parent, os.W_OK | os.X_OK):
            return DoctorCheck(
                "data dir",
                "fail",
                f"{path} does not exist and {parent} is "
                "not writable: create it or choose another --data-dir",
            )
        return DoctorCheck(
            "data dir",
            "ok",
            f"{path} does not exist yet (it will be created; "
            f"{_size(shutil.disk_usage(parent).free)} free)",
        )
    if not path.is_dir():
        return DoctorCheck(
            "data dir", "fail", f"{path} is not a directory: choose another --data-dir"
        )
    try:
        fd, probe = tempfile.mkstemp(prefix=".doctor-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return DoctorCheck(
            "data dir",
            "fail",
            f"{path} is not writable ({exc.strerror}): "
            "fix its permissions or choose another --data-dir",
        )
    try:
        locked, pid = lock_holder(path)
    except StorageError as exc:
        return DoctorCheck("data dir", "fail", str(exc), exc)
    if locked:
        who = f"process {pid}" if pid is not None else "another process"
        return DoctorCheck(
            "data dir",
            "fail",
            f"{path} is in use by {who}: stop it (or talk "
            "to it, if it is `memoryos serve`) or use another --data-dir",
        )
    free = shutil.disk_usage(path).free
    if free < min_free_bytes:
        return DoctorCheck(
            "data dir",
            "fail",
            f"{path}: only {_size(free)} free (at least "
            f"{_size(min_free_bytes)} needed): free some space",
        )
    sharded = " (sharded)" if (path / "shards.json").exists() else ""
    return DoctorCheck(
        "data dir", "ok", f"{path}{sharded}: writable, not in use, {_size(free)} free"
    )


def check_key_file(path: str | os.PathLike[str], *, required: bool = False) -> DoctorCheck:
    """The server's key file: only its owner may read it, and it is a key file.

    A missing file is skipped unless ``required``. Keys are never printed (the file holds
    only their SHA-256 digests anyway).
    """
    keys = Path(path)
    if not keys.exists():
        if required:
            return DoctorCheck(
                "key file",
                "fail",
                f"no key file at {keys}: create one with `memoryos keys add --tenant NAME`",
            )
        return DoctorCheck("key file", "skip", f"none at {keys} (only `memoryos serve` needs one)")
    mode = stat.S_IMODE(keys.stat().st_mode)
    if mode & 0o077:
        return DoctorCheck(
            "key file", "fail", f"{keys} can be read by others (mode {mode:04o}): chmod 600 {keys}"
        )
    try:
        records = list(parse_key_file(keys).values())
    except StorageError as exc:
        # The same check the server makes: a file it would refuse is a failure here too.
        return DoctorCheck("key file", "fail", f"{exc}: restore it or make a new one")
    tenants = {r.tenant for r in records}
    return DoctorCheck(
        "key file",
        "ok" if records else "warn",
        f"{keys}: mode {mode:04o}, {_n(len(records), 'key')} for "
        f"{_n(len(tenants), 'tenant')}"
        + ("" if records else " (every request gets 401: `memoryos keys add`)"),
    )


# -- helpers ----------------------------------------------------------------------------------


def _timeout(config: MemoryConfig, timeout: float | None) -> float:
    return float(
        config.llm_timeout_seconds if timeout is None else min(timeout, config.llm_timeout_seconds)
    )


async def _probe(backend: Any) -> None:
    """One probe call, then the backend's connections closed (on the same loop)."""
    try:
        await backend.acall(_PROBE_KIND, _PROBE_PAYLOAD)
    finally:
        await backend.aclose()


def _run_async(fn: Any, *args: Any) -> Any:
    """Run coroutine function ``fn(*args)`` on a loop of its own, in a thread of its own (the
    caller may be inside an event loop)."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memoryos-doctor") as ex:
        return ex.submit(asyncio.run, fn(*args)).result()


def _failed(name: str, exc: MemoryOSError, started: float) -> DoctorCheck:
    return DoctorCheck(name, "fail", str(exc), exc, time.perf_counter() - started)


def _provider_failure(
    name: str, who: str, exc: Any, config_error: Any, started: float
) -> DoctorCheck:
    spent = time.perf_counter() - started
    if exc.is_config_error:
        return _failed(name, config_error(exc), started)
    what = exc.message.removeprefix("provider call failed: ")
    if exc.category == "malformed":
        return DoctorCheck(
            name,
            "warn",
            f"{who} answered, but not with valid JSON ({what}): "
            "the gateway asks again and then falls back; try llm_json_mode "
            "or another model",
            None,
            spent,
        )
    err = ProviderUnavailable(
        f"{who} is unavailable ({what}): an outage, not a configuration error; until it "
        "answers, replies come from the offline fallback, marked degraded"
    )
    return DoctorCheck(name, "fail", str(err), err, spent)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
