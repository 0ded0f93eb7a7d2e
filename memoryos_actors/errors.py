"""Typed errors of memoryos-actors.

Expected failures (bad input, an unknown user, overload, corrupt data) are raised as a
subclass of :class:`MemoryOSError`; actors reply with them instead of crashing. Anything
else that escapes an actor is a bug: the actor crashes and its supervisor restarts it.
"""

from __future__ import annotations

__all__ = [
    "ActorCrashed",
    "ClusterUnreachable",
    "ConfigError",
    "CorruptDataError",
    "DataDirLocked",
    "EmbedderMismatch",
    "GatewayError",
    "InvalidInput",
    "LayoutChanged",
    "MemoryOSError",
    "Overloaded",
    "ProviderAuthError",
    "ProviderConfigError",
    "ProviderModelNotFound",
    "ProviderUnavailable",
    "ProviderUnreachable",
    "ReadOnlyError",
    "StorageError",
    "SystemClosed",
    "UnknownMemory",
    "UnknownUser",
]


class MemoryOSError(Exception):
    """Base class of every error this library raises on purpose."""


class InvalidInput(MemoryOSError, ValueError):
    """An argument was of the wrong type, empty, too large, or otherwise unusable."""


class ConfigError(MemoryOSError, ValueError):
    """A configuration value is invalid; the message names the field."""


class UnknownUser(MemoryOSError, KeyError):
    """The user id has no stored data (for calls that do not create users)."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown user"


class UnknownMemory(MemoryOSError, KeyError):
    """The user has no memory with that id (never had, or it was deleted)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown memory"


class Overloaded(MemoryOSError):
    """Too much work is in flight; the call waited its timeout and gave up."""


class ActorCrashed(MemoryOSError):
    """The actor handling the call crashed (its supervisor restarts it); the call failed.

    ``add_turn`` never raises this for a crash it can recover from: it asks the restarted
    STM again with the same turn key, which stores the turn once or reports it stored.
    """


class SystemClosed(MemoryOSError):
    """The memory system was closed; no further calls are accepted."""


class StorageError(MemoryOSError):
    """A problem with files in the data directory."""


class CorruptDataError(StorageError):
    """Stored data could not be read back; the message names the file.

    Damage inside a framed log (a WAL or an archive) with intact records after it also
    says where, as attributes (``None`` when not known):

    Attributes:
        path: the damaged file.
        offset: byte offset in ``path`` where the damage starts.
        intact_after: how many intact records follow the damage (they are not lost:
            ``memoryos repair`` salvages them).
        user_id: the user whose file it is.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        intact_after: int | None = None,
        user_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        self.intact_after = intact_after
        self.user_id = user_id

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword attributes survive pickling (errors cross Ray shard processes).
        return (_rebuild_corrupt, (type(self), self.args, self.__dict__))


def _rebuild_corrupt(
    cls: type[CorruptDataError], args: tuple[object, ...], attrs: dict[str, object]
) -> CorruptDataError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(attrs)
    return exc


class ReadOnlyError(StorageError):
    """A write was asked of a memory system opened with ``read_only=True`` (or of a store
    or log opened read-only): nothing in the data directory is ever changed by it."""


class EmbedderMismatch(StorageError):
    """Data was written with another embedder (name or dimension) than the one configured."""


class DataDirLocked(StorageError):
    """Another process already has this data directory open."""


class ClusterUnreachable(StorageError):
    """Nothing answers at the address of the Ray cluster to join (no cluster runs there,
    or the network does not reach it): raised within seconds, where Ray alone would keep
    retrying for minutes."""


class LayoutChanged(StorageError):
    """The sharded data directory's layout changed (a rebalance gave it another shard
    count and generation) while this facade or front door had it open: it no longer
    routes calls, which would reach the wrong shard; open it again (restart the server)."""


class GatewayError(MemoryOSError):
    """An LLM or embedding call failed in a way that was not recovered."""


class ProviderUnavailable(GatewayError):
    """The provider is down (5xx answers, timeouts, its circuit breaker open) and no
    fallback was allowed: ``chat(..., fallback=False)``, or an embedding, which has none."""


class ProviderConfigError(GatewayError):
    """The configured provider refuses the call for a reason retrying cannot fix.

    A configuration error, not an outage: it is never answered by the offline fallback.
    ``reason`` is the provider's own explanation (any API key in it masked), ``hint`` says
    how to fix it; both are in the message, which never contains the key itself.
    """

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        hint: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.hint = hint
        self.status = status


class ProviderAuthError(ProviderConfigError):
    """The provider rejected or missed the API key (HTTP 401/403, or no key was set)."""


class ProviderModelNotFound(ProviderConfigError):
    """The provider does not know the configured model (HTTP 404, or a 400 naming the
    model), or the base URL does not lead to a model API."""


class ProviderUnreachable(ProviderConfigError):
    """The configured base URL cannot be reached: connection refused, unknown host name or
    an invalid URL (a timeout is an outage, :class:`ProviderUnavailable`)."""
