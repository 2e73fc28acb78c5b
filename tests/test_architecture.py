"""The layers of ARCHITECTURE.md hold: import-linter's contracts pass, no module of kbench takes part in an
import cycle (imports inside functions count), and imports inside functions stay few, each one deferring an
optional or heavy dependency rather than dodging a cycle."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "kbench"
MAX_IMPORTS_IN_FUNCTIONS = 15


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """Module -> kbench modules it imports (anywhere in the file); and the imports found inside functions."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    in_functions: list[str] = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        inside = {id(node) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for node in ast.walk(f)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base] * bool(base))
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            targets = {t for n in names if n.split(".")[0] == "kbench" and (t := resolve(n)) and t != mod}
            graph[mod] |= targets
            if targets and id(node) in inside:
                in_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {ast.unparse(node)}")
    return graph, in_functions


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_counting_imports_inside_functions():
    graph, _ = import_graph()
    assert len(graph) > 100  # the scan saw the package
    assert strongly_connected(graph) == []


def test_imports_inside_functions_are_few():
    _, in_functions = import_graph()
    assert len(in_functions) < MAX_IMPORTS_IN_FUNCTIONS, "\n".join(in_functions)


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache", "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "BROKEN" not in done.stdout and "KEPT" in done.stdout


def test_the_public_api_is_importable_from_kbench():
    import kbench

    missing = [name for name in kbench.__all__ if not hasattr(kbench, name)]
    assert missing == []
    for name in ("load_experiment", "run_experiment", "run_sweep", "compare_runs", "export_run", "Run"):
        assert name in kbench.__all__
