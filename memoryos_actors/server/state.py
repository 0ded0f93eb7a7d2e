"""What the HTTP routes share: the memory system, the server's status, and the key's
tenant and its users as the routes name them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import Depends, Request

from ..aio import AsyncMemoryOS
from ..errors import MemoryOSError, SystemClosed, UnknownMemory, UnknownUser
from ..operations import user_exists
from .gate import KEY_SCOPE
from .keys import KeyRecord
from .readiness import ShardReadiness
from .tenancy import internal_id, internal_memory_id

if TYPE_CHECKING:
    from .app import ServerSettings

#: How long ``/metrics`` waits for the shards to say they are up, seconds.
_SHARD_PROBE_S = 1.0

__all__ = ["STATE", "ServerState", "server_state", "user_on_disk"]


def user_on_disk(memory: Any, uid: str) -> bool:
    """Whether library user ``uid`` has a directory in ``memory``'s data directory: one
    ``stat()``, cheap enough for the event loop. Over shards the user lives in the data
    directory of the shard that holds them, not in the top one."""
    from ..cluster import ClusterMemoryOS

    root = memory.data_dir
    if isinstance(memory, ClusterMemoryOS):
        from ..cluster import shard_dir

        root = shard_dir(root, memory.shard_for(uid))
    return user_exists(root, uid)


class ServerState:
    """The memory system (``mem``, set when the app starts) and the server's ``status``
    (``"starting"``, ``"ok"``, ``"stopping"``), with the helpers every route uses."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.mem: AsyncMemoryOS | None = None
        self.status = "starting"
        #: Over shards, their cached states for ``/readyz``.
        self.readiness = ShardReadiness()

    def memory(self) -> AsyncMemoryOS:
        """The memory system; :class:`SystemClosed` (503) unless the server is ready."""
        if self.mem is None or self.status != "ok":
            raise SystemClosed(f"the server is {self.status}")
        return self.mem

    def stats(self) -> dict[str, Any] | None:
        """The memory system's ``stats()`` for ``/metrics``, or None when not ready."""
        mem = self.mem
        if mem is None or self.status != "ok":
            return None
        from ..cluster import ClusterMemoryOS

        sync = mem.sync
        try:
            if isinstance(sync, ClusterMemoryOS) and any(
                row["state"] != "up" for row in sync.shard_states(_SHARD_PROBE_S)
            ):
                # A shard that is down or restarting: its stats would keep the scrape
                # waiting while the facade resends to it (a minute); the scrape answers
                # without the memory system's metrics instead.
                return None
            return sync.stats()
        except MemoryOSError:
            return None

    @staticmethod
    def tenant_of(request: Request) -> str:
        """The tenant of the key the gate accepted for ``request``."""
        rec: KeyRecord = request.scope[KEY_SCOPE]
        return rec.tenant

    async def known(self, request: Request, user_id: str) -> tuple[str, str]:
        """``(tenant, library user id)`` of an existing user of the key's tenant, else 404."""
        tenant = self.tenant_of(request)
        uid = internal_id(tenant, user_id)
        mem = self.memory()
        # A user being imported or created right now may be live before its directory shows.
        if not user_on_disk(mem.sync, uid) and uid not in await mem.active_users():
            raise UnknownUser(f"no user {user_id!r}")
        return tenant, uid

    async def on_memory(
        self,
        request: Request,
        user_id: str,
        memory_id: str,
        call: Callable[[AsyncMemoryOS, str, str], Awaitable[Any]],
    ) -> tuple[str, Any]:
        """``(tenant, call(memory, library user id, library memory id))``; 404 for an
        unknown user or memory, named by the tenant's ids."""
        tenant, uid = await self.known(request, user_id)
        try:
            return tenant, await call(self.memory(), uid, internal_memory_id(tenant, memory_id))
        except UnknownMemory:
            raise UnknownMemory(f"user {user_id!r} has no memory {memory_id!r}") from None


def server_state(request: Request) -> ServerState:
    """The :class:`ServerState` of the app serving ``request`` (set by
    :func:`~.app.create_app`): what a route is handed through :data:`STATE`."""
    state: ServerState = request.app.state.server
    return state


#: A route's parameter ``state: ServerState = STATE`` is the app's :class:`ServerState`.
STATE: Any = Depends(server_state)
