"""Check the package layout: ``python -m tools.check_layout`` (exit 1 and one line per problem).

Rules, read statically from the source (nothing is imported):

1. No import cycle among the modules of ``cdc/`` and ``streaming/`` (imports anywhere in a
   module count, function-level ones too: a lazy import does not make a cycle go away).
2. No module imports another module's private name (``from cdc.x import _y``); a package may
   import its own private submodule (the compiled ``cdc.rows._rowdecode``).
3. Layers: ``cdc/`` imports neither ``streaming`` nor ``pyspark`` nor ``pyarrow`` (they are the
   ``spark`` extra); the sans-IO layers ``cdc.binlog``, ``cdc.values``, ``cdc.rows`` and
   ``cdc.positions`` import nothing of ``cdc.replica``, ``cdc.cli`` or ``cdc.embedded``;
   ``cdc.replica`` imports nothing of ``cdc.cli``. In ``streaming/`` (:data:`STREAMING_LAYERS`):
   ``contract`` (what the source emits and the sinks consume) imports no other part of it, the
   ``source`` and the ``sinks`` never import each other, and only ``apps`` (and the package's
   re-exports) import the applications.
4. No module over :data:`MAX_LINES` lines (C files and generated tables aside).
5. PySpark APIs that differ between the supported releases (:data:`VERSIONED`) are imported by
   :data:`COMPAT` alone; the rest of the code takes them from there.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cdc", "streaming")
MAX_LINES = 650
SANS_IO = ("cdc.binlog", "cdc.values", "cdc.rows", "cdc.positions")
IO_LAYERS = ("cdc.replica", "cdc.cli", "cdc.embedded")
SPARK_ONLY = ("streaming", "pyspark", "pyarrow")
COMPAT = "streaming._compat"
#: not the same in every supported PySpark (4.0-4.3): admission control came in 4.2, pipelines
#: in 4.1, the Arrow conversions' arguments changed in 4.2
VERSIONED = ("pyspark.sql.streaming.datasource", "pyspark.pipelines",
             "pyspark.sql.pandas.types")
#: the project's other Python that runs on those releases (benchmarks, tools): the rule above
#: holds there too (the package rules do not)
ALSO_VERSIONED = ("bench", "tools")
#: the parts of ``streaming/`` and the parts each must not import
STREAMING_LAYERS = {
    "streaming.contract": ("streaming.source", "streaming.sinks", "streaming.apps",
                           "streaming.metrics"),
    "streaming.source": ("streaming.sinks", "streaming.apps"),
    "streaming.sinks": ("streaming.source", "streaming.apps"),
    "streaming.metrics": ("streaming.source", "streaming.sinks", "streaming.apps"),
}


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def imports(path: Path, name: str) -> list[tuple[str, list[str], int]]:
    """(module imported, names imported from it, line) for every import in *path*."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([mod] if mod else []))
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


def _within(mod: str, prefixes) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def _resolve(target: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """The internal modules an import statement loads (``from pkg import submodule`` too)."""
    out = []
    if target in known:
        out.append(target)
    for n in names:
        if f"{target}.{n}" in known:
            out.append(f"{target}.{n}")
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def _versioned(rel: Path, line: int, target: str, names: list[str]) -> list[str]:
    """The problem of an import of a version-dependent PySpark API outside :data:`COMPAT`."""
    versioned = [m for m in [target] + [f"{target}.{n}" for n in names] if _within(m, VERSIONED)]
    return [f"{rel}:{line}: imports {versioned[0]}, which not every supported PySpark has: take "
            f"it from {COMPAT}"] if versioned else []


def problems(root: Path = ROOT) -> list[str]:
    known = modules(root)
    graph: dict[str, set[str]] = {m: set() for m in known}
    found: list[str] = []
    for name, path in known.items():
        rel = path.relative_to(root)
        for target, names, line in imports(path, name):
            for dep in _resolve(target, names, known):
                if dep != name and not (path.name == "__init__.py"
                                        and dep.startswith(name + ".")):
                    graph[name].add(dep)
            if target in known or _within(target, PACKAGES):
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for n in names:
                    if n.startswith("_") and not n.startswith("__") \
                            and not (target == package and f"{target}.{n}" in known) \
                            and not (target == package and n == "_rowdecode"):
                        found.append(f"{rel}:{line}: imports the private name {n} of {target}")
            if name.startswith("cdc") and _within(target, SPARK_ONLY):
                found.append(f"{rel}:{line}: cdc/ imports {target} (Spark/Arrow belong in "
                             f"streaming/ and the spark extra)")
            if name != COMPAT:
                found += _versioned(rel, line, target, names)
            if _within(name, SANS_IO) and _within(target, IO_LAYERS):
                found.append(f"{rel}:{line}: the sans-IO layer {name} imports {target}")
            if _within(name, ("cdc.replica",)) and _within(target, ("cdc.cli",)):
                found.append(f"{rel}:{line}: {name} imports the CLI ({target})")
            for layer, banned in STREAMING_LAYERS.items():
                if _within(name, (layer,)) and _within(target, banned):
                    found.append(f"{rel}:{line}: {name} ({layer}) imports {target}")
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_LINES:
            found.append(f"{rel}: {lines} lines (more than {MAX_LINES}: split it by job)")
    for folder in ALSO_VERSIONED:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            for target, names, line in imports(path, module_name(path, root)):
                found += _versioned(rel, line, target, names)
    for comp in _cycles(graph):
        found.append("import cycle: " + " -> ".join(comp + comp[:1]))
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line)
    if found:
        print(f"check_layout: {len(found)} problem(s)", file=sys.stderr)
        return 1
    print(f"check_layout: {len(modules())} modules, no cycle, no private import, layers kept")
    return 0


if __name__ == "__main__":
    sys.exit(main())
