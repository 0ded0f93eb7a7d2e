"""The sharded facade does what each method's routing policy (``memoryos_actors.api``) says.

Every method of ``MemoryAPI`` is called on the facade over shards in this process, with
the calls to the shards recorded and a shard death injected before the call runs: the
call must go where its row's ``route`` says (the user's shard, or every shard), carry the
method itself (or the shard handler that serves it), and be sent again after the death
exactly when its row says ``resend``. The arguments come from the parameters' names, so a
method added to the protocol is covered here without a change to this file.
"""

from __future__ import annotations

import inspect
import pickle
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from localhost import LocalCluster, LocalShardHost
from sysutil import SMALL

from memoryos_actors import (
    ActorCrashed,
    AgentProfile,
    ManualClock,
    MemoryAPI,
    MemoryConfig,
    MemoryOS,
    MemoryOSError,
    UserProfile,
)
from memoryos_actors.api import API_METHODS, POLICIES, Route
from memoryos_actors.cluster import ClusterMemoryOS
from memoryos_actors.cluster._call import ShardCall
from memoryos_actors.cluster._shard import HANDLED

USER = "alice"


class Recorded:
    """The facade with its shards' calls recorded as ``(shard, ShardCall)``."""

    def __init__(self, mem: ClusterMemoryOS, host: LocalShardHost) -> None:
        self.mem = mem
        self.host = host
        self.sent: list[tuple[int, ShardCall[..., Any]]] = []
        submit = host.submit

        def recording(shard: int, method: str, *args: Any) -> Any:
            if method == "call":
                self.sent.append((shard, args[0]))
            return submit(shard, method, *args)

        host.submit = recording  # type: ignore[method-assign]


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Recorded]:
    cluster = LocalCluster(shards=2, retry_seconds=5.0)
    mem = MemoryOS.open(
        tmp_path / "data",
        MemoryConfig(**SMALL),
        clock=ManualClock(1_700_000_000.0),
        cluster=cluster,
    )
    assert cluster.host is not None
    try:
        mem.add_turn(USER, "I like green tea.", "Noted.")
        yield Recorded(mem, cluster.host)
    finally:
        mem.close()


def _arguments(
    name: str, tmp_path: Path, *, user: str | None = USER
) -> tuple[list[Any], dict[str, Any]]:
    """Arguments for ``MemoryAPI.<name>``'s parameters without a default, by their names,
    and ``user_id=user`` where it is optional (None: left at its default, every user)."""
    by_name: dict[str, Any] = {
        "user_id": USER,
        "query": "tea",
        "response": "ok",
        "text": "a note",
        "memory_id": "p-1",
        "value": "high",
        "tier": "stm",
        "path": tmp_path / "alice.json",
    }
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in list(inspect.signature(getattr(MemoryAPI, name)).parameters.values())[1:]:
        if param.name == "user_id" and param.default is not inspect.Parameter.empty:
            if user is not None:
                kwargs[param.name] = user  # where optional, a user makes the call routed
            continue
        if param.name == "profile":
            value: Any = UserProfile() if "UserProfile" in param.annotation else AgentProfile()
        elif param.name in by_name:
            value = by_name[param.name]
        elif param.default is not inspect.Parameter.empty:
            continue
        else:
            raise AssertionError(f"no sample argument for {name}({param.name})")
        if param.kind is inspect.Parameter.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    return args, kwargs


def _served(call: ShardCall[..., Any]) -> Any:
    """The ``MemoryAPI`` method a call to a shard is part of."""
    return HANDLED.get(call.method, call.method)


# ``close`` is called by the fan-out test below (after it, every call is refused).
@pytest.mark.parametrize("name", [n for n in API_METHODS if n != "close"])
def test_each_call_goes_where_its_policy_routes_it_and_is_resent_as_it_says(
    recorded: Recorded, name: str, tmp_path: Path
) -> None:
    mem, host = recorded.mem, recorded.host
    rule = POLICIES[name]
    method = getattr(MemoryAPI, name)
    if name == "import_user":
        mem.export_user(USER, tmp_path / "alice.json")
        mem.forget_user(USER)
    args, kwargs = _arguments(name, tmp_path)
    home = mem.shard_for(USER)
    host.die(home, "before")
    recorded.sent.clear()
    try:
        result = getattr(mem, name)(*args, **kwargs)
        if rule.stream:
            list(result)  # a stream makes its calls as it is read
    except ActorCrashed as exc:
        assert not rule.resend, f"{name} is resent by its policy, yet {exc}"
        assert "may or may not" in str(exc)
    except MemoryOSError:
        pass  # a typed answer of the shard (no such memory...): the routing is what counts
    else:
        assert rule.resend or rule.route is Route.LOCAL, f"{name} was resent"
    own = [shard for shard, call in recorded.sent if _served(call) is method]
    if rule.route is Route.LOCAL:
        assert recorded.sent and not own, f"{name} is made of other calls, not sent itself"
        return
    # The user's shard: once, or again after its death; with every shard, the others once.
    want = Counter({n: 1 for n in range(mem.shards)} if rule.route is Route.ALL else {})
    want[home] = 2 if rule.resend else 1
    assert Counter(own) == want, f"{name}: attempts by shard"


@pytest.mark.parametrize(
    "name", [n for n in API_METHODS if POLICIES[n].route in (Route.ALL, Route.USER_OR_ALL)]
)
def test_calls_about_every_user_go_to_every_shard(recorded: Recorded, name: str) -> None:
    mem = recorded.mem
    method = getattr(MemoryAPI, name)
    args, kwargs = _arguments(name, Path("unused"), user=None)
    recorded.sent.clear()
    getattr(mem, name)(*args, **kwargs)
    assert sorted(shard for shard, _ in recorded.sent) == list(range(mem.shards)), name
    assert all(call.method is method for _, call in recorded.sent), name


def test_a_call_crosses_a_process_boundary_as_the_method_itself() -> None:
    call = ShardCall(MemoryAPI.add_turn, USER, "q", "r", None, "default", turn_key="k")
    again = pickle.loads(pickle.dumps(call))
    assert again.method is MemoryAPI.add_turn
    assert (again.args, again.kwargs) == (call.args, call.kwargs)
    assert again.name == "add_turn"
