"""memoryos-actors: a MemoryOS memory daemon for LLM agents, built on supervised actors.

The public API is this one namespace::

    from memoryos_actors import MemoryOS, AsyncMemoryOS, MemoryConfig

Names are loaded on first use, so ``import memoryos_actors`` stays fast and never imports
an LLM client.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import TYPE_CHECKING

from ._lazy import lazy_getattr
from .version import __version__ as __version__

_SUPERVISOR_MARKER = '__distribution__ = "memoryos-actors"'


def _check_supervisor_package() -> None:
    """Raise ImportError when the top-level ``supervisor`` is not the one shipped with
    memoryos-actors.

    PyPI's ``supervisor`` (supervisord) uses the same top-level name: earlier on the path
    it shadows ours, and installed into the same environment it overwrites our
    ``supervisor/__init__.py``; either way the actors would fail later with a puzzling
    ``cannot import name``. Ours carries a ``__distribution__`` marker. To keep this
    import fast, the marker is read from the source file the import would load, without
    importing ``supervisor`` (which pulls in pykka and structlog); only when there is no
    readable source is the package imported to read it.
    """
    loaded = sys.modules.get("supervisor")
    if loaded is not None:
        origin = getattr(loaded, "__file__", None)
        found = getattr(loaded, "__distribution__", None) == "memoryos-actors"
    else:
        try:
            spec = importlib.util.find_spec("supervisor")
        except (ImportError, ValueError):  # a broken entry on the path
            spec = None
        origin = getattr(spec, "origin", None)
        try:
            with open(origin or "", encoding="utf-8") as source:
                found = _SUPERVISOR_MARKER in source.read()
        except (OSError, UnicodeDecodeError):  # no source (compiled only): ask the module
            try:
                module = importlib.import_module("supervisor")
            except ImportError:
                module = None
            found = getattr(module, "__distribution__", None) == "memoryos-actors"
    if found:
        return
    raise ImportError(
        f"'import supervisor' finds {origin or 'no package'}, which is not the supervisor "
        "package of memoryos-actors (it lacks that package's __distribution__ marker). "
        "Another distribution uses the same top-level name, most likely PyPI's "
        "'supervisor' (supervisord), which shadows or overwrites this one. Install "
        "memoryos-actors in a virtual environment of its own (supervisord can live in "
        "another, e.g. through pipx), or take that 'supervisor' off sys.path / PYTHONPATH; "
        "if both were installed into one environment, uninstall supervisor and reinstall "
        "memoryos-actors."
    )


_check_supervisor_package()

_EXPORTS: dict[str, str] = {
    "MemoryOS": "memoryos_actors.system",
    "AsyncMemoryOS": "memoryos_actors.aio",
    "MemoryAPI": "memoryos_actors.api",
    "AsyncMemoryAPI": "memoryos_actors.api",
    "ChatReply": "memoryos_actors.reports",
    "ForgetReport": "memoryos_actors.reports",
    "RepairReport": "memoryos_actors.reports",
    "RepairedFile": "memoryos_actors.reports",
    "UserPhase": "memoryos_actors.directory",
    "UserState": "memoryos_actors.reports",
    "MemoryConfig": "memoryos_actors.config",
    "Clock": "memoryos_actors.clock",
    "ManualClock": "memoryos_actors.clock",
    "SystemClock": "memoryos_actors.clock",
    "MemoryContext": "memoryos_actors.messages",
    "ContextItem": "memoryos_actors.messages",
    "Page": "memoryos_actors.messages",
    "UserProfile": "memoryos_actors.messages",
    "AgentProfile": "memoryos_actors.messages",
    "TraitLevel": "memoryos_actors.messages",
    "MemoryOSError": "memoryos_actors.errors",
    "ActorCrashed": "memoryos_actors.errors",
    "InvalidInput": "memoryos_actors.errors",
    "ConfigError": "memoryos_actors.errors",
    "UnknownUser": "memoryos_actors.errors",
    "UnknownMemory": "memoryos_actors.errors",
    "Memory": "memoryos_actors.memories",
    "MemoryEvent": "memoryos_actors.memories",
    "ArchivedMemories": "memoryos_actors.memories",
    "MemoryList": "memoryos_actors.memories",
    "Overloaded": "memoryos_actors.errors",
    "SystemClosed": "memoryos_actors.errors",
    "StorageError": "memoryos_actors.errors",
    "ReadOnlyError": "memoryos_actors.errors",
    "CorruptDataError": "memoryos_actors.errors",
    "EmbedderMismatch": "memoryos_actors.errors",
    "DataDirLocked": "memoryos_actors.errors",
    "LayoutChanged": "memoryos_actors.errors",
    "ClusterUnreachable": "memoryos_actors.errors",
    "GatewayError": "memoryos_actors.errors",
    "ProviderUnavailable": "memoryos_actors.errors",
    "ProviderConfigError": "memoryos_actors.errors",
    "ProviderAuthError": "memoryos_actors.errors",
    "ProviderModelNotFound": "memoryos_actors.errors",
    "ProviderUnreachable": "memoryos_actors.errors",
    "doctor": "memoryos_actors.checkup",
    "DoctorReport": "memoryos_actors.checkup",
    "DoctorCheck": "memoryos_actors.checkup",
}

# Written out (tools read it without importing the package); a test checks it names
# exactly the lazily loaded names above.
__all__ = [
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

if TYPE_CHECKING:
    from .aio import AsyncMemoryOS
    from .api import AsyncMemoryAPI, MemoryAPI
    from .checkup import DoctorCheck, DoctorReport, doctor
    from .clock import Clock, ManualClock, SystemClock
    from .config import MemoryConfig
    from .directory import UserPhase
    from .errors import (
        ActorCrashed,
        ClusterUnreachable,
        ConfigError,
        CorruptDataError,
        DataDirLocked,
        EmbedderMismatch,
        GatewayError,
        InvalidInput,
        LayoutChanged,
        MemoryOSError,
        Overloaded,
        ProviderAuthError,
        ProviderConfigError,
        ProviderModelNotFound,
        ProviderUnavailable,
        ProviderUnreachable,
        ReadOnlyError,
        StorageError,
        SystemClosed,
        UnknownMemory,
        UnknownUser,
    )
    from .messages import AgentProfile, ContextItem, MemoryContext, Page, TraitLevel, UserProfile
    from .reports import ChatReply, ForgetReport, RepairedFile, RepairReport, UserState
    from .system import MemoryOS


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
