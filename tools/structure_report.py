"""The structure figures of docs/architecture.md: imports that run up a floor, import circles, the largest
functions and the lines of lifecycle/, measured from a source tree's text (nothing of it is imported or run).

    .venv/bin/python tools/structure_report.py [PACKAGE_DIR]     # default: this checkout's peagle_deploy/

The floors and the import reading are tests/test_import_structure.py's own, so the figures are the ones that
test checks. A function's "logic" lines are its body's, less its signature, docstring, blank lines and
comment-only lines; a nested function's lines count in the function around it too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_import_structure import arrows_up, circles, import_graph  # noqa: E402


def logic_lines(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """The body's lines after its docstring, less blank and comment-only lines (a Typer command's options, in
    its signature, are not logic)."""
    body = node.body
    first = body[0]
    if len(body) > 1 and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        body = body[1:]
    text = (lines[number - 1].strip() for number in range(body[0].lineno, node.end_lineno + 1))
    return sum(1 for line in text if line and not line.startswith("#"))


def functions(package_dir: Path) -> list[tuple[int, int, str]]:
    """(logic lines, all lines, module:qualified name) of every function and method."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        module = path.relative_to(package_dir.parent).as_posix()

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = f"{prefix}{child.name}"
                    found.append((logic_lines(child, lines), child.end_lineno - child.lineno + 1, f"{module}:{name}"))
                    visit(child, f"{name}.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(text, filename=str(path)), "")
    return sorted(found, reverse=True)


def main() -> None:
    package_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "peagle_deploy"
    graph = import_graph(package_dir)
    up = arrows_up(graph)
    loops = [" <-> ".join(sorted(c)) for c in circles(graph)]
    print(f"imports running up a floor: {len(up)}")
    for arrow in up:
        print(f"  {arrow}")
    print(f"import circles: {len(loops)}")
    for loop in loops:
        print(f"  {loop}")
    found = functions(package_dir)
    print("largest functions (logic lines / all lines):")
    for logic, total, name in found[:10]:
        print(f"  {logic:4d} / {total:4d}  {name}")
    print(f"functions over 80 logic lines: {sum(1 for logic, _, _ in found if logic > 80)}")
    lifecycle = sorted((package_dir / "lifecycle").glob("*.py"))
    counts = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in lifecycle}
    print(f"lifecycle/: {sum(counts.values())} lines in {len(counts)} modules")
    for name, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"  {count:5d}  {name}")


if __name__ == "__main__":
    main()
