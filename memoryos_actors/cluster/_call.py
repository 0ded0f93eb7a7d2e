"""A call to a shard that keeps its type: :class:`ShardCall`.

A call is built from the method it calls, as pykka's ``proxy_method`` is
(``pykka/typing.py``): ``ShardCall(MemoryAPI.get_memory, user_id, memory_id)`` is checked
by mypy against ``MemoryAPI.get_memory``'s parameters, and its answer has that method's
return type (``ShardCall[..., Memory]``), so the sharded facade returns what the shard
sent without a cast of its own. The method is a method of
:class:`~memoryos_actors.api.MemoryAPI` (the shard calls its system's method of that name)
or a handler of :class:`~memoryos_actors.cluster._shard.ShardServer` (the shard runs it);
either way, the object itself crosses the process boundary (pickled by reference, as any
module-level function is), not a name to look up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, final

__all__ = ["ShardCall"]

P = ParamSpec("P")
R = TypeVar("R")


@final
class ShardCall(Generic[P, R]):
    """``method(target, *args, **kwargs)``, to be run on a shard; answers ``R``.

    Args:
        method: the method, taken from its class (``MemoryAPI.add_turn``).
        args, kwargs: its arguments, as the method takes them (checked by mypy).
    """

    __slots__ = ("args", "kwargs", "method")

    def __init__(
        self, method: Callable[Concatenate[Any, P], R], /, *args: P.args, **kwargs: P.kwargs
    ) -> None:
        self.method = method
        self.args: tuple[Any, ...] = args
        self.kwargs: dict[str, Any] = kwargs

    @property
    def name(self) -> str:
        """The method's name (``"add_turn"``), for messages."""
        return self.method.__name__

    def run(self, target: object) -> R:
        """Call ``target``'s method of this name (``target`` implements the class the
        method was taken from: a protocol's method has no body to run)."""
        bound: Callable[P, R] = getattr(target, self.method.__name__)
        return bound(*self.args, **self.kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.method, self.args, self.kwargs))

    def __repr__(self) -> str:
        return f"ShardCall({self.method.__qualname__}, *{self.args!r}, **{self.kwargs!r})"


def _rebuild(
    method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> ShardCall[..., Any]:
    return ShardCall(method, *args, **kwargs)
