"""The package layout is a layering: no import cycles between packages, and the launcher stays generic.

Imports are read from the source with ``ast`` (module level, inside functions and under ``TYPE_CHECKING`` alike), so
a lazy import cannot hide a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mjfleet"

CORE = {"errors", "console", "config_io", "files", "paths", "__init__"}
"""Top-level helper modules every package may use; they import no other mjfleet package."""

ALLOWED: dict[str, set[str]] = {
    "runtime": set(),
    "cluster": {"runtime"},
    "launch": {"runtime", "cluster"},
}
"""Packages whose mjfleet dependencies (besides the core) are fixed: the launcher runs any picklable function and
must not pull in training, tasks or the simulator."""

FORBIDDEN: dict[str, set[str]] = {
    "runs": {"train", "cli", "launch", "cluster"},
}
"""Packages that must not import these: a run as a record (its identity, ``job.json``, directory, start point, where
a checkpoint comes from, how it ended) knows nothing of the training flow, the commands or the launchers."""


def _unit(module: str) -> str:
    """``mjfleet.rl.runner`` -> ``rl``; ``mjfleet.errors`` -> ``errors``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_blocks(tree: ast.AST) -> set[int]:
    """ids of the nodes under ``if TYPE_CHECKING:`` (annotations only; never executed)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def _imports(path: Path, runtime_only: bool = False) -> set[str]:
    """Every ``mjfleet...`` module that ``path`` imports, resolved (relative imports included); with
    ``runtime_only``, not those under ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    skip = _type_checking_blocks(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "mjfleet"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module.split(".")[0] != "mjfleet":
                continue
            found.add(module)
            # ``from mjfleet.tasks import registry`` imports a module, not a name defined in the package.
            base = SRC.parent / module.replace(".", "/")
            for alias in node.names:
                if (base / alias.name).is_dir() or (base / f"{alias.name}.py").is_file():
                    found.add(f"{module}.{alias.name}")
    return found


def package_graph() -> dict[str, set[str]]:
    """Edges between packages (and core modules) of mjfleet, from every source file's imports."""
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        unit = _unit(_module_name(path))
        targets = {_unit(m) for m in _imports(path)} - {unit}
        graph.setdefault(unit, set()).update(targets)
    return graph


def module_graph() -> dict[str, set[str]]:
    """Edges between mjfleet modules from the imports that run (function-local ones included)."""
    modules = {_module_name(p) for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        name = _module_name(path)
        graph[name] = {m for m in _imports(path, runtime_only=True) if m in modules and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_packages() -> None:
    graph = package_graph()
    assert {"cli", "cluster", "envs", "launch", "rl", "runs", "runtime", "sim", "tasks", "train"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_low_level_packages_stay_generic(package: str) -> None:
    used = package_graph()[package] - CORE
    assert used <= ALLOWED[package], f"{package}/ imports {sorted(used - ALLOWED[package])}"


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_records_know_nothing_of_the_flow(package: str) -> None:
    used = package_graph()[package] & FORBIDDEN[package]
    assert not used, f"{package}/ imports {sorted(used)}"


def test_core_modules_import_no_package() -> None:
    graph = package_graph()
    for module in CORE - {"__init__"}:
        assert graph.get(module, set()) <= CORE, f"{module}.py imports {sorted(graph[module] - CORE)}"


def test_no_import_cycle_between_modules() -> None:
    cycle = find_cycle(module_graph())
    assert cycle is None, "import cycle between modules: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
