"""Imports run one way: command line -> studies -> sim and realrun -> strategies -> core.

Importing every module of ``workbench`` (the core vocabulary, the strategies and the
command line, whose commands import the executors only when they run) must load no
executor, no study and no DGL. Checked in a fresh interpreter, so that modules other
tests imported do not hide an import.

The import graph of ``workbench``, ``sim``, ``realrun`` and ``studies``, read from the source
(every import, at module level or in a function), must run down the layers, have no cycle, and
carry no private name from one package to another. Each failure lists every offender.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WALK = """
import importlib, json, pkgutil, sys
import workbench
names = sorted(m.name for m in pkgutil.walk_packages(workbench.__path__, "workbench."))
for name in names:
    importlib.import_module(name)
loaded = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("sim", "realrun", "studies", "dgl")
)
print(json.dumps({"modules": names, "loaded": loaded}))
"""


def test_importing_workbench_loads_no_executor_study_or_dgl() -> None:
    r = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout.strip().splitlines()[-1])
    # The walk did reach the modules that matter (the graph loaders, the DGL loader, the strategies, the CLI).
    assert {
        "workbench.graph.loaders",
        "workbench.dgl_loader",
        "workbench.strategies.sampling.bulk_matrix",
        "workbench.cli.main",
    } <= set(found["modules"])
    assert found["loaded"] == []


# ---- the import graph, read from the source ------------------------------------------------------
# Every import counts, at module level or inside a function (a lazy import is still a dependency:
# it only moves the moment it fails), relative ones resolved against the importing module.

PACKAGES = ("workbench", "sim", "realrun", "studies")


@dataclass(frozen=True)
class Module:
    """One source module of the packages: its dotted name, its file, and its directory."""

    name: str
    path: Path
    is_package: bool

    @property
    def directory(self) -> str:
        return str(self.path.parent.relative_to(ROOT))

    @property
    def package(self) -> str:
        """The package relative imports start from."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Import:
    """``importer`` imports ``target`` (one of the packages' modules) at ``line``; ``names``: what
    it takes from it by name (empty for ``import target`` or a submodule taken by name)."""

    importer: str
    target: str
    line: int
    names: tuple[str, ...]
    type_only: bool = False  # under ``if TYPE_CHECKING:``: read by type checkers, never run

    def where(self) -> str:
        return f"{self.importer}:{self.line}"


def source_modules() -> dict[str, Module]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = Module(name, path, is_package)
    return modules


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _known(name: str, modules: dict[str, Module]) -> str | None:
    """The longest prefix of ``name`` that is one of the packages' modules."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_only(tree: ast.AST) -> set[ast.AST]:
    """The statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    inside: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for statement in node.body:
                inside.update(ast.walk(statement))
    return inside


def imports_of(module: Module, modules: dict[str, Module]) -> list[Import]:
    """Every import of one of the packages' modules that ``module`` makes, anywhere in it."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    type_only = _type_checking_only(tree)
    found = []
    for node in ast.walk(tree):
        typing_only = node in type_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _known(alias.name, modules)
                if target:
                    found.append(Import(module.name, target, node.lineno, (), typing_only))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            names: list[str] = []
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:  # a submodule, taken by name
                    found.append(Import(module.name, f"{source}.{alias.name}", node.lineno, (), typing_only))
                else:
                    names.append(alias.name)
            target = _known(source, modules)
            if names and target:
                found.append(Import(module.name, target, node.lineno, tuple(names), typing_only))
    return [i for i in found if i.target != module.name]


def import_graph() -> tuple[dict[str, Module], list[Import]]:
    modules = source_modules()
    return modules, [i for m in modules.values() for i in imports_of(m, modules)]


def layer(name: str) -> tuple[int, str]:
    """The module's layer: its rank (higher layers may import lower ones only) and its group."""
    top = name.split(".")[0]
    if name == "workbench.cli" or name.startswith("workbench.cli."):
        return 3, "workbench.cli"
    if top == "studies":
        return 2, "studies"
    if top in ("sim", "realrun"):
        return 1, top  # beside each other: neither may import the other
    return 0, "workbench"  # the core vocabulary, the strategies and the run spine


def test_no_module_imports_from_a_higher_layer_and_sim_and_realrun_stay_apart() -> None:
    _, imports = import_graph()
    offenders = []
    for i in imports:
        (rank, group), (target_rank, target_group) = layer(i.importer), layer(i.target)
        if target_rank > rank or (target_rank == rank and group != target_group):
            offenders.append(f"{i.where()} ({group}) imports {i.target} ({target_group})")
    assert not offenders, "imports that run up the layers or across sim/realrun:\n" + "\n".join(offenders)


def test_the_layers_rank_as_documented() -> None:
    ranks = [layer(m)[0] for m in ("workbench.plan", "sim.engine", "realrun.worker", "studies.runner")]
    assert ranks == [0, 1, 1, 2] and layer("workbench.cli.fidelity")[0] == 3
    assert layer("sim.engine")[1] != layer("realrun.worker")[1]


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan), as a path that ends
    where it starts."""
    edges: dict[str, set[str]] = {}
    for i in imports:
        edges.setdefault(i.importer, set()).add(i.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # the graph has a few hundred modules: recursion is fine
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_cycle_in(group, edges) for group in groups]


def _cycle_in(group: set[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the group's first module (breadth-first, inside the group)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, set()) & group):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in {sorted(group)}")


def test_no_import_cycle_among_modules() -> None:
    _, imports = import_graph()
    # An import under TYPE_CHECKING never runs: it is how an annotation names a type of a module
    # that imports this one. It still counts for the layers (above), not for cycles.
    cycles = import_cycles([i for i in imports if not i.type_only])
    offenders = [c for c in cycles if frozenset(c) not in KNOWN_CYCLES]
    assert not offenders, "import cycles (function-level imports count):\n" + "\n".join(
        " -> ".join(c) for c in offenders
    )
    fixed = set(KNOWN_CYCLES) - {frozenset(c) for c in cycles}
    assert not fixed, f"fixed: delete from KNOWN_CYCLES: {[sorted(c) for c in fixed]}"


def test_the_cycle_finder_reports_the_cycle() -> None:
    imports = [
        Import("a", "b", 1, ()),
        Import("b", "c", 1, ()),
        Import("c", "a", 1, ()),
        Import("c", "d", 1, ()),
    ]
    assert import_cycles(imports) == [["a", "b", "c", "a"]]
    assert import_cycles(imports[1:]) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


# Names a namedtuple (pandas' itertuples rows among them) makes public despite the underscore.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}

# Third-party internals the workbench relies on knowingly, by module and expression, each with why.
THIRD_PARTY_INTERNALS = {
    ("workbench/cli/common.py", "parser._negative_number_matcher"): "argparse has no public switch "
    "to take option values that start like a negative number",
    ("workbench/cli/common.py", "parser._actions"): "argparse has no public list of a parser's options",
    ("sim/clock.py", "event._ok"): "sim.clock's step replaces simpy's Environment.step, which reads "
    "the event's outcome the same way",
    ("sim/clock.py", "event._value"): "as event._ok",
}


def _defined_here(tree: ast.AST) -> set[str]:
    """Private names the module defines itself: functions, classes, assigned names and attributes
    (``self._x = ...``, dataclass fields), which it may read on any object of its own making."""
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                defined.add(node.attr)
    return {n for n in defined if _private(n)}


def _bound_modules(tree: ast.AST, module: Module, modules: dict[str, Module]) -> dict[str, str | None]:
    """Local names bound to a module by an import: the packages' module, or None for a third-party one."""
    bound: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name if alias.asname else alias.name.split(".")[0]
                local = alias.asname or name
                bound[local] = name if name in modules else None
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, node)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif source.split(".")[0] not in PACKAGES:
                    bound[alias.asname or alias.name] = None
    return bound


def private_crossings(module: Module, modules: dict[str, Module]) -> list[tuple[str, int, str]]:
    """Where ``module`` uses a private name of another package, as (module, line, what): imports
    one from (or imports a private module of) a module in another directory, reads one off such
    a module, or reads one off an object that its own module did not define (a class of another
    module's)."""
    tree = ast.parse(module.path.read_text(), str(module.path))
    rel = str(module.path.relative_to(ROOT))
    found = []
    for i in imports_of(module, modules):
        if modules[i.target].directory == module.directory:
            continue
        if _private(i.target.rpartition(".")[2]):
            found.append((module.name, i.line, f"imports the private module {i.target}"))
        found += [
            (module.name, i.line, f"imports the private {i.target}.{n}") for n in i.names if _private(n)
        ]
    own, bound = _defined_here(tree), _bound_modules(tree, module, modules)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        value, text = node.value, ast.unparse(node)
        if isinstance(value, ast.Name) and value.id in bound:
            target = bound[value.id]  # a module's attribute: third-party modules' are their business
            if target and modules[target].directory != module.directory:
                found.append((module.name, node.lineno, f"reads the private {target}.{node.attr}"))
            continue
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "super":
            continue
        if node.attr in own or node.attr in NAMEDTUPLE_API or node.attr[1:].isdigit():
            continue
        if (rel, text) not in THIRD_PARTY_INTERNALS:
            found.append((module.name, node.lineno, f"reads {text}, private to another module's class"))
    return found


# Offenders in files other work is changing right now, each to be deleted when its file is
# fixed (a fixed one left here fails the test below, so the lists only shrink).
KNOWN_CYCLES: dict[frozenset[str], str] = {}
KNOWN_PRIVATE: dict[tuple[str, str], str] = {}


def test_no_private_name_crosses_packages() -> None:
    modules = source_modules()
    found = [o for m in modules.values() for o in private_crossings(m, modules)]
    offenders = [f"{m}:{line} {what}" for m, line, what in found if (m, what) not in KNOWN_PRIVATE]
    assert not offenders, "private names used outside their package:\n" + "\n".join(offenders)
    fixed = set(KNOWN_PRIVATE) - {(m, what) for m, _, what in found}
    assert not fixed, f"fixed: delete from KNOWN_PRIVATE: {sorted(fixed)}"
