"""A user's data in and out: ``memoryos export`` (read-only), ``import`` and ``forget``;
with ``--tenant`` the files name users by the tenant's ids, as the server's do."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from ._common import (
    UsageError,
    data_dir,
    existing_data_dir,
    lib_user,
    open_memory,
    open_reader,
    require_user,
    shown_user,
)

__all__ = ["export", "forget", "import_"]


def export(args: argparse.Namespace) -> int:
    """``memoryos export USER FILE``: the user's export file, read-only (works while a
    server runs). An existing FILE is kept unless ``--force``; ``-`` writes JSON to stdout.
    FILE's folder must exist: a typo in a path is refused, not made into new folders."""
    import shutil
    import tempfile

    from ..operations import read_export, write_export
    from ._common import tenant

    user = lib_user(args, args.user)
    to_stdout = args.file == "-"
    target = Path(args.file)
    if not to_stdout and target.exists() and not args.force:
        raise UsageError(f"{target} exists; pass --force to overwrite it")
    if not to_stdout:
        _require_folder(target)
    with open_reader(args, existing_data_dir(args), user) as mem:
        require_user(mem, user, args)
        turns = mem.user_state(user).turns
        if to_stdout:
            with tempfile.TemporaryDirectory(prefix="memoryos-export-") as tmp:
                out = mem.export_user(user, Path(tmp) / "export.json")
                out = _tenant_export(args, user, out)
                with out.open("rb") as fh:
                    sys.stdout.flush()
                    shutil.copyfileobj(fh, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            print(f"exported {args.user!r} ({turns} turns) to stdout", file=sys.stderr)
            return 0
        t = tenant(args)
        if t is None:
            out = mem.export_user(user, target)
        else:
            # Made whole aside first: the target may be a pipe, which is written once.
            from ..server.tenancy import export_for_tenant

            with tempfile.TemporaryDirectory(prefix="memoryos-export-") as tmp:
                staged = read_export(mem.export_user(user, Path(tmp) / "export"))
                out = write_export(target, export_for_tenant(staged, t, user, args.user))
    print(f"exported {args.user!r} ({turns} turns) to {out}")
    return 0


def _require_folder(target: Path) -> None:
    """Refuse an export ``target`` whose folder does not exist (the library would make it)."""
    folder = target.parent
    if folder.is_dir():
        return
    if folder.exists() or folder.is_symlink():
        raise UsageError(f"cannot export to {target}: {folder} is not a folder")
    raise UsageError(
        f"cannot export to {target}: folder {folder} does not exist "
        f"(create it first: mkdir -p {shlex.quote(str(folder))})"
    )


def _tenant_export(args: argparse.Namespace, user: str, path: Path) -> Path:
    """With a tenant, the export at ``path`` names its user and assistants by the tenant's
    ids, as the server's export does (``memoryos --tenant T import`` reads it)."""
    from ._common import tenant

    t = tenant(args)
    if t is None:
        return path
    from ..server.tenancy import tenant_export_file

    return tenant_export_file(path, t, user, args.user)


def import_(args: argparse.Namespace) -> int:
    """``memoryos import FILE [--as USER]``: store an export file's user (under the tenant
    when one is given)."""
    from ..datasets import DatasetError
    from ._common import tenant

    if not Path(args.file).is_file():
        raise DatasetError(f"{args.file}: no such file")
    as_user = lib_user(args, args.as_user) if args.as_user else None
    t = tenant(args)
    if as_user is None and t is not None:
        from ..errors import InvalidInput
        from ..operations import read_export
        from ..server.keys import check_tenant
        from ..server.tenancy import internal_id

        original = str(read_export(args.file).get("user_id", ""))
        # A tenant's user keeps its name in the tenant it is imported into.
        owner, _, name = original.partition(":")
        try:
            check_tenant(owner)
        except InvalidInput:
            name = original  # no tenant's id: the whole id is the name
        as_user = internal_id(t, name or original)
    with open_memory(args, data_dir(args)) as mem:
        if t is None:
            uid = mem.import_user(args.file, user_id=as_user)
        else:
            uid = _import_into_tenant(mem, args.file, t, as_user)
        turns = mem.user_state(uid).turns
    print(f"imported {args.file} as user {shown_user(args, uid)!r} ({turns} turns)")
    return 0


def _import_into_tenant(mem: Any, file: str, tenant: str, as_user: str | None) -> str:
    """Import the export ``file`` into ``tenant``: its assistants become the tenant's (an
    export names them by a tenant's own ids, or by none), through a copy of the file."""
    import tempfile

    from ..errors import InvalidInput, MemoryOSError
    from ..operations import read_export, write_export
    from ..server.tenancy import import_for_tenant

    try:
        payload = read_export(file)
        if not isinstance(payload, dict):
            return str(mem.import_user(file, user_id=as_user))  # refused, naming the file
        scoped = import_for_tenant(payload, tenant)
    except RecursionError:
        raise InvalidInput(f"{file}: nested too deeply to be a user export") from None
    except InvalidInput as exc:
        raise InvalidInput(f"{file}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="memoryos-import-") as tmp:
        copy = write_export(Path(tmp) / f"import{Path(file).suffix}", scoped)
        try:
            return str(mem.import_user(copy, user_id=as_user))
        except MemoryOSError as exc:
            # A refusal names the file the user gave, not the copy.
            exc.args = tuple(
                a.replace(str(copy), file) if isinstance(a, str) else a for a in exc.args
            )
            raise


def forget(args: argparse.Namespace) -> int:
    """``memoryos forget USER``: delete every file of the user; on a terminal it asks
    first, unless ``--yes``. Without a terminal to ask on (a script, a pipe, cron) it
    refuses unless ``--yes``: a deletion that cannot be undone is never implied."""
    user = lib_user(args, args.user)
    if not args.yes and not sys.stdin.isatty():
        raise UsageError(
            f"not deleting {args.user!r}: no terminal to ask on; pass --yes to forget "
            "without asking"
        )
    with open_memory(args, existing_data_dir(args)) as mem:
        require_user(mem, user, args)
        if not args.yes:
            turns = mem.user_state(user).turns
            answer = input(
                f"delete every memory of {args.user!r} ({turns} turns) in "
                f"{mem.data_dir}? This cannot be undone. [y/N] "
            )
            if answer.strip().lower() not in ("y", "yes"):
                print(f"kept {args.user!r}")
                return 1
        report = mem.forget_user(user)
    print(f"forgot {args.user!r}: removed {len(report.removed_files)} files")
    for path in report.removed_files:
        print(f"  {path}")
    return 0
