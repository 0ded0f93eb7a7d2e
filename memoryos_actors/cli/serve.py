"""The ``serve``, ``mcp`` and ``keys`` subcommands of ``memoryos``.

Kept apart from the main command table: :func:`add_parsers` adds the subcommands and
:data:`COMMANDS` maps them to functions; FastAPI, uvicorn and mcp are imported only when
a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ..config import DATA_DIR_ENV, KEYS_FILE_ENV
from ..errors import InvalidInput
from ..prerequisites import install_hint
from ._stop import add_shutdown_timeout, positive_seconds

__all__ = ["COMMANDS", "add_parsers"]

_KEYS_FILE = "server-keys.json"


def _data_dir(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get(DATA_DIR_ENV) or "memoryos-data")


def _keys_file(args: argparse.Namespace) -> Path:
    given = getattr(args, "keys_file", None) or os.environ.get(KEYS_FILE_ENV)
    return Path(given) if given else _data_dir(args) / _KEYS_FILE


def _need(extra: str, *modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InvalidInput(
            f"this command needs {', '.join(missing)} (the {extra!r} extra): " + install_hint(extra)
        )


@contextlib.contextmanager
def _named_holder(path: Path) -> Iterator[None]:
    """A locked data directory is refused naming who holds it (a server: where it
    listens; a desktop client's MCP over stdio on a served directory sees one line)."""
    from ..errors import DataDirLocked
    from ._common import server_note

    try:
        yield
    except DataDirLocked as exc:
        note = server_note(path)
        raise DataDirLocked(note) if note else exc from None


#: Why ``serve --workers N`` (and uvicorn's own ``--workers``) cannot give N processes one
#: data directory, and what does.
WORKERS_NOTE = (
    "memoryos serve runs one process per data directory (it holds the directory's lock and "
    "its users' actors), so --workers must be 1; for several processes serving the same "
    "users run front doors over Ray: `memoryos serve --ray ADDRESS` once per door, each on "
    "its own port (see 'Several front doors' in docs/cluster.md)"
)


def _serve(args: argparse.Namespace) -> int:
    if args.workers != 1:
        raise InvalidInput(WORKERS_NOTE)
    _need("server", "fastapi", "uvicorn", "prometheus_client", "jinja2")
    if args.mcp:
        _need("mcp", "mcp")
    from ..config import MemoryConfig
    from .doctor import provider_check

    config = MemoryConfig.load(args.config)
    provider_check(args, config)  # before the server's imports: a refusal comes at once
    from ..server.app import ServerSettings
    from ..server.run import serve

    keys = _keys_file(args)
    if not keys.exists():
        print(
            f"memoryos: warning: no key file at {keys}; every /v1 request gets 401 until "
            "you run `memoryos keys add --tenant NAME`"
        )
    settings = ServerSettings(
        data_dir=_data_dir(args),
        keys_file=keys,
        config=config,
        host=args.host,
        port=args.port,
        max_body_bytes=args.max_body_bytes,
        body_timeout_seconds=args.body_timeout,
        rate_per_second=args.rate,
        burst=args.burst,
        mcp=args.mcp,
        ready_file=Path(args.ready_file) if args.ready_file else None,
        forwarded_allow_ips=args.forwarded_allow_ips,
    )
    with _named_holder(settings.data_dir):
        serve(
            settings,
            shutdown_timeout=args.shutdown_timeout,
            ray=args.ray,
            shards=args.shards,
        )
    return 0


def _mcp(args: argparse.Namespace) -> int:
    _need("mcp", "mcp")
    from ..config import MemoryConfig
    from .doctor import provider_check

    config = MemoryConfig.load(args.config)
    provider_check(args, config)
    from ..server.run import serve_mcp_stdio
    from ._common import tenant

    with _named_holder(_data_dir(args)):
        serve_mcp_stdio(
            _data_dir(args),
            config,
            tenant(args) or "default",
            shutdown_timeout=args.shutdown_timeout,
            ray=args.ray,
        )
    return 0


def _keys(args: argparse.Namespace) -> int:
    from ..server.keys import KeyStore

    store = KeyStore(_keys_file(args))
    if args.action == "add":
        from ._common import tenant

        owner = tenant(args)  # --tenant, else $MEMORYOS_TENANT
        if not owner:
            raise InvalidInput("keys add needs --tenant NAME")
        key, rec = store.add(
            owner, rate_per_second=args.rate, burst=args.burst, note=args.note or ""
        )
        print(key)
        print(
            f"# key {rec.key_id} for tenant {rec.tenant!r} added to {store.path}; "
            "it is shown only now (the file keeps its SHA-256)"
        )
    elif args.action == "revoke":
        if not args.key_id:
            raise InvalidInput("keys revoke needs a KEY_ID (see `memoryos keys list`)")
        rec = store.revoke(args.key_id)
        print(f"revoked key {rec.key_id} of tenant {rec.tenant!r}")
    else:
        for rec in store.records():
            when = _dt.datetime.fromtimestamp(rec.created, _dt.UTC).strftime("%Y-%m-%d %H:%M")
            limits = f"{rec.rate_per_second or 'default'}/s burst {rec.burst or 'default'}"
            print(f"{rec.key_id}  {rec.tenant:<20} {when}  {limits}  {rec.note}")
    return 0


def add_parsers(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``serve``, ``mcp`` and ``keys`` with ``add(name, help) -> parser``."""
    from .doctor import add_skip_flag
    from .maintenance import add_ray_address

    s = add(
        "serve",
        "serve the HTTP JSON API (extra: server; --mcp adds MCP at /mcp). With --ray, serve "
        "a sharded data directory as one of several front doors: every `memoryos serve "
        "--ray ADDRESS` over the same data directory and Ray cluster serves the same users "
        "through the same shards, which keep running when the doors stop (`memoryos "
        "shards stop` closes them)",
        ray_address=True,
    )
    add_ray_address(
        s,
        "run the shards on Ray, shared by every front door: alone, a local Ray (or the "
        "one this machine runs); 'auto' or HOST:PORT joins that cluster (extra: ray)",
    )
    s.add_argument(
        "--shards",
        type=int,
        help="shard count: an empty data directory becomes sharded with N shards; a sharded "
        "one must have N already (else run `memoryos rebalance --shards N`)",
    )
    s.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=8080, help="TCP port, 0 for any (default 8080)")
    s.add_argument(
        "--keys-file",
        help=f"API key file (default: $MEMORYOS_KEYS_FILE or <data-dir>/{_KEYS_FILE})",
    )
    s.add_argument(
        "--mcp", action="store_true", help="also serve MCP (streamable HTTP) at /mcp (extra: mcp)"
    )
    s.add_argument(
        "--rate", type=float, default=50.0, help="default requests per second per key (default 50)"
    )
    s.add_argument(
        "--burst",
        type=int,
        default=100,
        help="default requests a key may send at once (default 100)",
    )
    s.add_argument(
        "--max-body-bytes",
        type=int,
        default=512 * 1024,
        help="largest request body, bytes (default 524288)",
    )
    s.add_argument(
        "--body-timeout",
        type=positive_seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds a request's body may take to arrive, else 408 (default 30)",
    )
    s.add_argument(
        "--forwarded-allow-ips",
        metavar="IPS",
        help="believe X-Forwarded-For/-Proto only from these proxies (comma-separated "
        "addresses or networks, '*' for any); default: no proxy, the client is the "
        "connection's peer",
    )
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes: 1 (one process per data directory; for more, run front "
        "doors with --ray)",
    )
    s.add_argument("--ready-file", help="write {host, port, pid} as JSON here once serving")
    add_shutdown_timeout(s, "the requests in flight")
    add_skip_flag(s)
    # --tenant (whose users) is the global option: mcp defaults it to 'default'.
    m = add(
        "mcp",
        "serve MCP over stdio for one tenant's users (--tenant, default 'default'; extra: mcp)",
    )
    add_shutdown_timeout(m, "the answers to the requests in flight")
    add_skip_flag(m)
    k = add("keys", "manage the API keys of `memoryos serve`")
    k.add_argument("action", choices=("add", "list", "revoke"))
    k.add_argument("key_id", nargs="?", help="revoke: the key id")
    k.add_argument("--rate", type=float, help="add: requests per second for this key")
    k.add_argument("--burst", type=int, help="add: burst for this key")
    k.add_argument("--note", help="add: free text")
    k.add_argument(
        "--keys-file", help=f"key file (default: $MEMORYOS_KEYS_FILE or <data-dir>/{_KEYS_FILE})"
    )


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "mcp": _mcp,
    "keys": _keys,
}
