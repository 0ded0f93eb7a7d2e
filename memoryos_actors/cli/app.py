"""The ``memoryos`` command (also ``python -m memoryos_actors``).

``memoryos demo`` runs a scripted multi-user conversation offline; ``memoryos doctor``
checks a configuration (LLM, embedder, data directory, key file; exit code 1 when a check
fails); the other subcommands work on a data directory (``--data-dir``, or
``MEMORYOS_DATA_DIR``, default ``./memoryos-data``): ``chat``, ``ingest``, ``inspect``,
``memories``, ``stats``, ``export``, ``import``, ``forget``, ``repair`` (a user's damaged
files), ``rebalance`` (a sharded data directory's shard count), ``reembed`` (every
stored vector computed again by another embedder), ``shards`` (list or stop
the shared Ray shards of ``serve --ray``); ``bench`` runs a benchmark from the ``bench/``
folder of a source checkout.

``--tenant`` (or ``$MEMORYOS_TENANT``) names users as the server and MCP name a tenant's
users. The read commands (``inspect``, ``memories``, ``stats``, ``export``) take no lock,
so they work while a server runs; the others say which server holds the directory and
where it listens. A sharded data directory opens with its shards in this process, or on
Ray with ``--ray``.

Exit codes: 0 success, 1 unexpected failure, 2 bad input (unknown user, malformed file,
locked or missing data directory, invalid configuration), 130 interrupted. ``serve``,
``mcp``, ``chat`` and ``ingest`` stop gracefully on SIGTERM and SIGINT (see ``_stop``):
exit code 0, or 130 for ``chat`` and ``ingest`` after SIGINT.

Each command takes the parsed command line and returns the exit code; expected failures
raise a :class:`~memoryos_actors.errors.MemoryOSError` or ``UsageError``, which
:func:`main` turns into a one-line message and exit code 2.

The package, one concept per module: ``app`` (this parser and the entry point), one
module per command family (``chat``, ``ingest``, ``views``: ``inspect``, ``memories``
and ``stats``; ``portability``: ``export``, ``import`` and ``forget``; ``maintenance``:
``repair``, ``rebalance`` and ``reembed``), ``demo`` (plays ``demo_script.json``),
``render`` (terminal output of tiers, retrievals and the tree), ``prometheus`` (text
exposition of ``stats``) and ``bench`` (runs the checkout's benchmarks).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ..config import DATA_DIR_ENV
from ..version import __version__
from ._common import DEFAULT_DATA_DIR, TENANT_ENV, UsageError, console, plain
from ._stop import add_shutdown_timeout
from .bench import BENCHES, run_bench
from .chat import chat
from .demo import run_demo
from .doctor import add_skip_flag
from .doctor import doctor as run_doctor
from .ingest import ingest
from .maintenance import add_ray_address, add_reembed_parser, rebalance, reembed, repair, shards
from .portability import export, forget, import_
from .views import inspect, memories, stats

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    # --data-dir and --config work before or after the subcommand.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--data-dir",
        default=argparse.SUPPRESS,
        help=f"data directory (default: ${DATA_DIR_ENV} or ./{DEFAULT_DATA_DIR}; "
        "demo: a temporary directory)",
    )
    common.add_argument(
        "--config", default=argparse.SUPPRESS, help="TOML file with MemoryConfig fields"
    )
    common.add_argument(
        "--tenant",
        default=argparse.SUPPRESS,
        help=f"read and write this tenant's users, as the server and MCP do "
        f"for its keys (default: ${TENANT_ENV}, else the plain user ids; "
        "mcp: 'default')",
    )
    # serve and shards take --ray with an optional address: their parent has no --ray.
    own_ray = argparse.ArgumentParser(add_help=False, parents=[common])
    common.add_argument(
        "--ray",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on a sharded data directory, run the shards on Ray (default: in this process)",
    )
    p = argparse.ArgumentParser(
        prog="memoryos", parents=[common], description=(__doc__ or "").split("\n\n")[0]
    )
    p.add_argument("--version", action="version", version=f"memoryos {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_text: str, *, ray_address: bool = False) -> argparse.ArgumentParser:
        parent = own_ray if ray_address else common
        return sub.add_parser(name, help=help_text, description=help_text, parents=[parent])

    d = add("demo", "scripted multi-user conversation, offline")
    d.add_argument("--script", help="a demo script JSON file (default: the one shipped)")
    c = add("chat", "chat with memory; reads lines from stdin until EOF")
    c.add_argument("--user", required=True)
    c.add_argument("--assistant", default="default", help="assistant id (default: default)")
    c.add_argument("--model", help="any litellm model name (default: the offline backend)")
    c.add_argument("--base-url", help="OpenAI-compatible base URL for --model")
    add_shutdown_timeout(c, "the reply in flight")
    add_skip_flag(c)
    o = add(
        "doctor",
        "check the LLM, the embedder, the data directory and the key file; exit 1 if a check fails",
    )
    o.add_argument("--model", help="check this litellm model instead of the configured one")
    o.add_argument("--base-url", help="OpenAI-compatible base URL for --model")
    o.add_argument(
        "--keys-file",
        help="the server's API key file (default: "
        "$MEMORYOS_KEYS_FILE, else <data-dir>/server-keys.json if it exists)",
    )
    o.add_argument(
        "--timeout", type=float, help="seconds per provider call (default: llm_timeout_seconds)"
    )
    i = add("ingest", "ingest a LoCoMo JSON file or a JSONL file of turns")
    i.add_argument("file")
    i.add_argument(
        "--format",
        choices=("auto", "locomo", "jsonl"),
        default="auto",
        help="file layout (default: by suffix or first character)",
    )
    i.add_argument("--limit", type=int, help="LoCoMo: first N conversations; JSONL: first N turns")
    i.add_argument(
        "--server",
        metavar="URL",
        help="send the turns through this running `memoryos serve` (its batch route) instead "
        "of opening the data directory; the users are --key's tenant's",
    )
    i.add_argument(
        "--key",
        metavar="KEY",
        help="with --server: an API key of the server ('-': read it from stdin)",
    )
    add_shutdown_timeout(i, "the turn in flight")
    n = add("inspect", "show a user's tiers, segments by heat, traits, KB")
    n.add_argument("user")
    n.add_argument("--pages", action="store_true", help="list each segment's pages")
    n.add_argument("--all", action="store_true", help="every segment, not the 10 hottest")
    n.add_argument("--json", action="store_true", help="print the state as JSON")
    ms = add("memories", "list a user's memories with their ids (pages, segments, facts, traits)")
    ms.add_argument("user")
    ms.add_argument(
        "--kind",
        action="append",
        choices=("page", "segment", "fact", "agent_trait", "trait"),
        help="only this kind (repeatable)",
    )
    ms.add_argument("--json", action="store_true", help="print them as JSON")
    s = add("stats", "counters as JSON or Prometheus text")
    s.add_argument("--user", help="one user's counters")
    s.add_argument("--prometheus", action="store_true", help="Prometheus text format")
    e = add("export", "export a user to a file (.json, else msgpack; - for JSON on stdout)")
    e.add_argument("user")
    e.add_argument("file")
    e.add_argument("--force", action="store_true", help="overwrite an existing file")
    m = add("import", "import a user from an export file")
    m.add_argument("file")
    m.add_argument("--as", dest="as_user", help="store under this user id")
    f = add(
        "forget",
        "delete every file of a user (asks first on a terminal; without one, only with --yes)",
    )
    f.add_argument("user")
    f.add_argument("--yes", "-y", action="store_true", help="do not ask")
    rp = add(
        "repair",
        "salvage a user's damaged files: keep every intact record, keep the "
        "damaged originals as backups",
    )
    rp.add_argument("user")
    r = add(
        "rebalance",
        "change a data directory's shard count while nothing has it open "
        "(--shards 1: back to an unsharded data directory)",
    )
    r.add_argument("--shards", type=int, required=True, help="the new shard count")
    add_reembed_parser(
        add(
            "reembed",
            "compute every stored vector again with another embedder (resumable; the old "
            "index stays in use until the new one is complete)",
        )
    )
    sh = add(
        "shards",
        "list or stop the shared Ray shards of a data directory (the shards `memoryos serve "
        "--ray` front doors share; stop: each shard closes its memory system, then exits)",
        ray_address=True,
    )
    sh.add_argument("action", choices=("list", "stop"))
    sh.add_argument("dir", nargs="?", metavar="DATA_DIR", help="the data directory")
    add_ray_address(sh, "the Ray cluster the shards run on (default: auto)")
    sh.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="stop: seconds each shard gets to close its memory system (default 60)",
    )
    b = add("bench", "run a benchmark from the bench/ folder of a source checkout")
    b.add_argument("which", choices=sorted(BENCHES))
    b.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    from .serve import add_parsers as add_server_parsers

    add_server_parsers(add)  # serve, mcp, keys (their heavy imports wait for the command)
    return p


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": run_demo,
    "doctor": run_doctor,
    "chat": chat,
    "ingest": ingest,
    "inspect": inspect,
    "memories": memories,
    "stats": stats,
    "export": export,
    "import": import_,
    "forget": forget,
    "repair": repair,
    "rebalance": rebalance,
    "reembed": reembed,
    "shards": shards,
    "bench": run_bench,
}


def _server_command(args: argparse.Namespace) -> int:
    from .serve import COMMANDS

    return COMMANDS[args.command](args)


_COMMANDS.update(dict.fromkeys(("serve", "mcp", "keys"), _server_command))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memoryos`` command with ``argv`` (default ``sys.argv[1:]``); return the
    exit code (0 ok, 2 bad input or unknown user, 1 unexpected failure, 130 interrupted)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `memoryos`: what it can do, not an error
        parser.print_help()
        return 0
    for name in ("data_dir", "config", "tenant"):
        if not hasattr(args, name):
            setattr(args, name, None)
    if not hasattr(args, "ray"):
        args.ray = False
    from ..errors import MemoryOSError
    from ..prerequisites import MissingPrerequisite

    # The error console is made only when needed: rich costs a short command its start-up.
    try:
        return _COMMANDS[args.command](args)
    except (MemoryOSError, UsageError, MissingPrerequisite) as exc:
        plain_kind = isinstance(exc, (UsageError, MissingPrerequisite))
        kind = "" if plain_kind else f"{type(exc).__name__}: "
        message = str(exc.args[0]) if exc.args else str(exc)
        console(stderr=True).print(plain(f"memoryos: error: {kind}{message}"), soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console(stderr=True).print("memoryos: interrupted")
        return 130
    except BrokenPipeError:
        # Output piped into a pager or `head` that exited: not an error worth a traceback.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
