"""The house's structure: peagle_deploy's imports run down its floors and close no circle.

The import graph is read from the source with `ast`: every `import` and `from ... import` of a peagle_deploy
module, at module level or inside a function (a lazy import is still an arrow in the drawing) or under
`if TYPE_CHECKING:`, relative ones resolved. A name imported from a package (`from ..lifecycle import verify`)
counts as its submodule when it is one, else as the package itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Floors, top first: a module may import its own floor and those below it, never one above. A name is a package
# (all of its modules) or a top-level module. Every module not named here is on the bottom floor (the small value
# modules: errors, output, redaction, tags, catalog, speculative, inputs, locks, container/, ...), so a new module
# that imports anything above the bottom must be placed here on purpose.
#   cli/                         the command line: parse, call, render
#   sweep/                       many deploys and benches under a budget
#   bench/, testing/             load generation and reports; the emulator and test doubles
#   local/                       the deployment plan's container on this machine
#   lifecycle/                   deploy, verify, update, status, cleanup, recover
#   plan.py, plan_component.py,  the deployment plan (its classic and its inference-component shape); the
#   plan_pools.py                decisions on each instance pool's facts
#   runtime/, pricing.py, ...    one request to a target; prices; what an endpoint serves; JumpStart specs;
#                                one SageMaker resource described; validated input (a region's partition is
#                                botocore's, its error through aws.py); instance pools' values (a pool's price)
#   aws.py                       the AWS session and the translation of AWS errors
FLOORS: list[tuple[str, ...]] = [
    ("cli",),
    ("sweep",),
    ("bench", "testing"),
    ("local",),
    ("lifecycle",),
    ("plan", "plan_component", "plan_pools"),
    ("runtime", "pricing", "served_config", "jumpstart", "describe", "pools"),
    ("aws",),
]
BOTTOM = len(FLOORS)


def modules(package_dir: Path) -> dict[str, tuple[Path, list[str]]]:
    """Dotted module name -> (its file, the package its relative imports start from)."""
    found = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
            package = parts
        else:
            package = parts[:-1]
        found[".".join(parts)] = (path, package)
    return found


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (anywhere in its body)."""
    known = modules(package_dir)
    top = package_dir.name

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (path, package) in known.items():
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(owner(alias.name) for alias in node.names if alias.name.split(".")[0] == top)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != top:
                    continue
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.add(submodule if submodule in known else owner(source))
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def floor_of(module: str, floors: list[tuple[str, ...]] = FLOORS) -> int:
    """The floor of a dotted module name: its package's, or its own for a top-level module (0 is the top)."""
    parts = module.split(".")
    first = parts[1] if len(parts) > 1 else ""
    for index, names in enumerate(floors):
        if first in names:
            return index
    return len(floors)


def arrows_up(graph: dict[str, set[str]], floors: list[tuple[str, ...]] = FLOORS) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if floor_of(b, floors) < floor_of(a, floors))


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT / "peagle_deploy")


def test_no_import_runs_up_a_floor(graph):
    found = arrows_up(graph)
    assert not found, "imports that run up a floor (see FLOORS):\n" + "\n".join(found)


def test_no_import_circle(graph):
    found = [" <-> ".join(sorted(c)) for c in circles(graph)]
    assert not found, "modules that import each other (directly or round a longer loop):\n" + "\n".join(found)


def test_botocore_exceptions_are_imported_by_aws_py_alone():
    """Everything else catches them through `aws.botocore_exceptions()`, the one lazy door (aws.py's docstring)."""
    importers = set()
    for name, (path, _) in modules(ROOT / "peagle_deploy").items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name == "botocore.exceptions" for a in node.names):
                importers.add(name)
            elif isinstance(node, ast.ImportFrom) and not node.level and (
                    node.module == "botocore.exceptions"
                    or (node.module == "botocore" and any(a.name == "exceptions" for a in node.names))):
                importers.add(name)
    assert importers == {"peagle_deploy.aws"}


def test_the_graph_sees_lazy_relative_and_package_imports(graph):
    """The reader finds what the checks rely on: relative imports at module level and inside a function, a
    submodule named through its package, a name from a package's __init__."""
    assert "peagle_deploy.errors" in graph["peagle_deploy.aws"]  # from .errors import ...
    assert "peagle_deploy" in graph["peagle_deploy.aws"]  # from . import __version__
    assert "peagle_deploy.local.state" in graph["peagle_deploy.local.runner"]  # from . import state
    assert "peagle_deploy.local.runner" in graph["peagle_deploy.cli.local"]  # in a function: from ..local import runner
    assert "peagle_deploy.lifecycle.verify" in graph["peagle_deploy.sweep.runner"]  # in a function
    assert "peagle_deploy.lifecycle" in graph["peagle_deploy.sweep.runner"]  # from ..lifecycle import deploy


def test_the_checks_find_an_arrow_up_and_a_circle(tmp_path):
    """A made-up package with one arrow up (a lazy, relative one) and one circle (closed by a deferred import)."""
    package = tmp_path / "house"
    (package / "top").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "top" / "__init__.py").write_text("")
    (package / "top" / "a.py").write_text("from . import b\n")
    (package / "top" / "b.py").write_text("def f():\n    from .a import thing\n")
    (package / "low.py").write_text("def g():\n    from .top import a\n")
    floors = [("top",), ("low",)]
    graph = import_graph(package)
    assert arrows_up(graph, floors) == ["house.low -> house.top.a"]
    assert circles(graph) == [frozenset({"house.top.a", "house.top.b"})]
