"""The architecture contract: the layer order of the packages, checked on the source.

Every import of every module that runs (at the top or inside a function) is read from its
syntax tree, so a lazy import that dodges a cycle at run time is still caught. Imports
under ``if TYPE_CHECKING:`` are left out: they never run, and only name types for the
type checker (the facade's ``open`` names the sharded facade it may return). A module may import its own layer or a lower one, never a higher one; the
``supervisor`` package is general and imports nothing of this project; and the
package-level import graph has no cycle. A module this file does not place fails the test:
a new module says where it belongs.

The front ends (``server`` and ``cli``) stand on the public API only: they import nothing
from ``store``, ``actors``, ``tiers``, ``gateway`` or the disk tools, not even for a type
(imports under ``if TYPE_CHECKING:`` count here); what they need from a data directory
goes through :mod:`memoryos_actors.operations`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Lowest first. A name is a module or a package (``memoryos_actors.store`` covers
#: ``memoryos_actors.store.*``).
LAYERS: tuple[tuple[str, ...], ...] = (
    # Leaves: errors, time, text, settings, small vector maths; no project import but
    # each other.
    (
        "memoryos_actors.errors",
        "memoryos_actors.version",
        "memoryos_actors.clock",
        "memoryos_actors._lazy",
        "memoryos_actors.logs",
        "memoryos_actors.text",
        "memoryos_actors.config",
        "memoryos_actors.scoring",
        "memoryos_actors.smallvec",
        "memoryos_actors.trait_table",
        "memoryos_actors.paging",
        "memoryos_actors.datasets",
        "memoryos_actors.fairness",
        "memoryos_actors.prerequisites",
    ),
    # Terms and records: what every layer above passes around.
    (
        "memoryos_actors.lexicon",
        "memoryos_actors.record_base",
        "memoryos_actors.records",
        "memoryos_actors.requests",
        "memoryos_actors.context",
        "memoryos_actors.hits",
        "memoryos_actors.cold_items",
        "memoryos_actors.messages",
        "memoryos_actors.reports",
        "memoryos_actors.chat_streams",
    ),
    # Files on disk.
    ("memoryos_actors.store",),
    # Pure tier cores (no threads, no I/O).
    ("memoryos_actors.tiers",),
    # The LLM gateway.
    ("memoryos_actors.gateway",),
    # The actors.
    ("memoryos_actors.actors",),
    # What the facade is built from: the user directory, argument checks, disk tools.
    (
        "memoryos_actors.directory",
        "memoryos_actors.validation",
        "memoryos_actors.checkup",
        "memoryos_actors.disk_stats",
        "memoryos_actors.repair",
        "memoryos_actors.import_check",
        "memoryos_actors.stopping",
    ),
    # The facade.
    (
        "memoryos_actors.api",
        "memoryos_actors.core",
        "memoryos_actors.tree",
        "memoryos_actors.conversation",
        "memoryos_actors.editing",
        "memoryos_actors.system",
        "memoryos_actors.activation",
        "memoryos_actors.barrier",
        "memoryos_actors.inspection",
        "memoryos_actors.portability",
        "memoryos_actors.memories",
        "memoryos_actors.operations",
        "memoryos_actors.reembed",
    ),
    # Faces of the facade: asyncio, and shards.
    ("memoryos_actors.aio", "memoryos_actors.cluster"),
    # The network face, and the adapters into agent runtimes.
    ("memoryos_actors.server", "memoryos_actors.integrations"),
    # Entry points: the command line and the package's own namespace.
    ("memoryos_actors.cli", "memoryos_actors.__main__", "memoryos_actors"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, module: str, *, typing_too: bool = False) -> set[str]:
    """Every project module ``module`` (the file ``path``) imports, by full name; with
    ``typing_too``, those imported under ``if TYPE_CHECKING:`` as well."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only and not typing_too:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from package import name``: the submodule when ``name`` is one, else the
            # package itself (``_graph`` resolves each to a module that exists).
            names = [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(n for n in names if n.split(".")[0] in ("memoryos_actors", "supervisor"))
    return found


def _graph(*, typing_too: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports (names resolved to existing modules); with
    ``typing_too``, imports for the type checker only count too."""
    files = {
        _module_name(p): p
        for package in ("memoryos_actors", "supervisor")
        for p in (ROOT / package).rglob("*.py")
    }

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        targets = {resolve(n) for n in _imports(path, module, typing_too=typing_too)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (length of the matching name, layer)
    for i, names in enumerate(LAYERS):
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > best[0]:
                    best = (len(name), i)
    return None if best is None else best[1]


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in _graph() if m.startswith("memoryos_actors") and _layer(m) is None)
    assert unplaced == [], "modules without a layer: add them to LAYERS"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` that goes to a higher layer (or from ``supervisor`` into
    this project)."""
    upward = []
    for module, targets in graph.items():
        own = _layer(module)
        for target in targets:
            if module.startswith("supervisor"):
                if target.startswith("memoryos_actors"):
                    upward.append(f"{module} -> {target} (supervisor is general)")
                continue
            theirs = _layer(target)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} (layer {own}) -> {target} (layer {theirs})")
    return sorted(upward)


def package_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle in the graph of packages (``memoryos_actors.X``, ``supervisor``) that
    ``graph``'s modules import, or None. The package namespace ``memoryos_actors`` itself
    (the public face, in the top layer) is left out."""

    def unit(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "memoryos_actors" else parts[0]

    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        for target in targets:
            if unit(module) != unit(target) and unit(target) != "memoryos_actors":
                edges[unit(module)].add(unit(target))
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


#: The front ends: they use the public API (the facade and its faces) and
#: :mod:`memoryos_actors.operations`, nothing below.
FRONT_ENDS = ("memoryos_actors.server", "memoryos_actors.cli")

#: What the front ends may not import: the storage, the actors, the tier cores, the LLM
#: gateway and the disk tools.
BELOW_THE_API = (
    "memoryos_actors.store",
    "memoryos_actors.actors",
    "memoryos_actors.tiers",
    "memoryos_actors.gateway",
    "memoryos_actors.repair",
    "memoryos_actors.checkup",
    "memoryos_actors.disk_stats",
    "memoryos_actors.import_check",
)


def _within(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def front_end_reaches(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` from a front end to something below the public API."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _within(module, FRONT_ENDS)
        for target in targets
        if _within(target, BELOW_THE_API)
    )


def test_the_front_ends_import_only_the_public_api() -> None:
    assert front_end_reaches(_graph(typing_too=True)) == []


def test_the_front_end_rule_counts_imports_for_the_type_checker(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` is a reach below the API too (it ties the
    front end to a module's shape), and a front end importing the operations facade is
    not one."""
    src = tmp_path / "mod.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..operations import list_users\n"
        "if TYPE_CHECKING:\n"
        "    from ..store.userstore import UserStore\n",
        encoding="utf-8",
    )
    module = "memoryos_actors.server.mod"
    assert "memoryos_actors.store.userstore.UserStore" not in _imports(src, module)
    found = _imports(src, module, typing_too=True)
    assert "memoryos_actors.store.userstore.UserStore" in found
    graph = {
        module: {"memoryos_actors.store.userstore", "memoryos_actors.operations"},
        "memoryos_actors.cli.views": {"memoryos_actors.disk_stats"},
        "memoryos_actors.system": {"memoryos_actors.store.userstore"},
    }
    assert front_end_reaches(graph) == [
        "memoryos_actors.cli.views -> memoryos_actors.disk_stats",
        "memoryos_actors.server.mod -> memoryos_actors.store.userstore",
    ]


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(_graph()) == []


def test_the_packages_import_each_other_without_a_cycle() -> None:
    cycle = package_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_checks_report_what_they_are_for() -> None:
    """On a made-up graph: the store importing a tier core is an upward import, the
    supervisor importing the project is one too, and two packages importing each other
    (however lazily) are a cycle."""
    graph = {
        "memoryos_actors.store.cold": {"memoryos_actors.tiers.mtm"},
        "memoryos_actors.tiers.mtm": {"memoryos_actors.store.cold"},
        "supervisor._registry": {"memoryos_actors.errors"},
    }
    assert upward_imports(graph) == [
        "memoryos_actors.store.cold (layer 2) -> memoryos_actors.tiers.mtm (layer 3)",
        "supervisor._registry -> memoryos_actors.errors (supervisor is general)",
    ]
    assert package_cycle(graph) == [
        "memoryos_actors.store",
        "memoryos_actors.tiers",
        "memoryos_actors.store",
    ]
    assert upward_imports({"memoryos_actors.tiers.mtm": {"memoryos_actors.store.cold"}}) == []
    assert package_cycle({"memoryos_actors.tiers.mtm": {"memoryos_actors.store.cold"}}) is None


#: What the adapters into agent runtimes may import: the public API's declaration, its
#: errors and the records it returns, and their own package; nothing of the facade's
#: insides, so an adapter works with any facade (in-process, asyncio, sharded).
INTEGRATIONS_MAY_IMPORT = (
    "memoryos_actors.integrations",
    "memoryos_actors.api",
    "memoryos_actors.errors",
    "memoryos_actors.messages",
    "memoryos_actors.context",
    "memoryos_actors.reports",
    "memoryos_actors.chat_streams",
    "memoryos_actors.memories",
    "memoryos_actors.paging",
)


def integration_reaches(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` from an adapter to something not on its list."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _within(module, ("memoryos_actors.integrations",))
        for target in targets
        if not _within(target, INTEGRATIONS_MAY_IMPORT)
    )


def test_the_integrations_import_only_the_public_api() -> None:
    """Imports for the type checker count too."""
    assert integration_reaches(_graph(typing_too=True)) == []
    made_up = {"memoryos_actors.integrations.x": {"memoryos_actors.system", "memoryos_actors.api"}}
    assert integration_reaches(made_up) == [
        "memoryos_actors.integrations.x -> memoryos_actors.system"
    ]
