"""The server extras are imported only when a server is used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("fastapi", "uvicorn", "prometheus_client", "mcp", "starlette", "pydantic")


def test_importing_the_package_and_the_cli_imports_no_server_dependency() -> None:
    code = (
        "import sys, memoryos_actors, memoryos_actors.server, memoryos_actors.cli.app;"
        "memoryos_actors.cli.app._parser();"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_keys_command_works_without_the_server_extra(tmp_path: object) -> None:
    code = (
        "import sys; sys.modules['fastapi'] = None; sys.modules['mcp'] = None;"
        "from memoryos_actors.cli import main;"
        f"raise SystemExit(main(['--data-dir', {str(tmp_path)!r}, 'keys', 'add', "
        "'--tenant', 'acme']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("mos_")
