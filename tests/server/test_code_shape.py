"""The server's code stays in short, flat pieces: no function in ``memoryos_actors.server``
is over 80 lines, and every route (HTTP, ``/ui``, MCP tool) is a module-level function,
handed its state, never a closure inside a builder function. Checked on the syntax tree."""

from __future__ import annotations

import ast
from pathlib import Path

SERVER = Path(__file__).resolve().parents[2] / "memoryos_actors" / "server"

#: Longest function allowed, in lines (from its first decorator to its last line).
MAX_LINES = 80

_ROUTE_DECORATORS = frozenset({"get", "post", "put", "patch", "delete", "tool", "api_route"})


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def long_functions(source: str, name: str) -> list[str]:
    """``name:function (lines)`` for every function in ``source`` over :data:`MAX_LINES`."""
    out = []
    for fn in _functions(ast.parse(source)):
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        length = (fn.end_lineno or fn.lineno) - first + 1
        if length > MAX_LINES:
            out.append(f"{name}:{fn.name} ({length} lines)")
    return out


def nested_routes(source: str, name: str) -> list[str]:
    """``name:function`` for every route-decorated function defined inside another one."""
    out = []
    for outer in _functions(ast.parse(source)):
        for inner in _functions(outer):
            if inner is outer:
                continue
            for dec in inner.decorator_list:
                call = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(call, ast.Attribute) and call.attr in _ROUTE_DECORATORS:
                    out.append(f"{name}:{outer.name}.{inner.name}")
    return out


def _sources() -> list[tuple[str, str]]:
    return [
        (str(p.relative_to(SERVER.parent)), p.read_text(encoding="utf-8"))
        for p in sorted(SERVER.rglob("*.py"))
    ]


def test_no_function_in_the_server_is_over_80_lines() -> None:
    assert [f for name, src in _sources() for f in long_functions(src, name)] == []


def test_every_route_is_a_module_level_function() -> None:
    assert [f for name, src in _sources() for f in nested_routes(src, name)] == []


def test_the_checks_find_what_they_look_for() -> None:
    """A builder function holding a route, and a function of 81 lines, are found; a
    module-level route of 80 lines is not."""
    body = "".join(f"    x = {i}\n" for i in range(77))
    builder = (
        "def build(router):\n"
        "    @router.get('/x')\n"
        "    async def x():\n"
        "        return 1\n"
        f"{body}"
        "    return router\n"
    )
    assert nested_routes(builder, "m.py") == ["m.py:build.x"]
    assert long_functions(builder, "m.py") == ["m.py:build (82 lines)"]
    flat = f"@router.get('/x')\nasync def x():\n{body}    return 1\n"
    assert nested_routes(flat, "m.py") == [] and long_functions(flat, "m.py") == []
