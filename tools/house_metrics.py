"""Print the shape of the climnb package: the module tree, the import-graph floors, arrows up
and cycles, long modules and functions, imports inside functions and private names that cross
a module. Reads the source only (``ast``); imports nothing of climnb.

Usage: ``python tools/house_metrics.py [--root climnb] [--readme README.md]``
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

#: The facade: what a user calls. ``versions`` (the version string, stdlib only) is ground floor.
FACADE = {"accessor", "cli", "commands", "demo", "doctor", "__main__", "__init__"}
SHIM = "this path warns, and works for one release"
HEAVY = {
    "tensorflow",
    "horovod",
    "holoviews",
    "hvplot",
    "panel",
    "bokeh",
    "ipyparallel",
    "mpi4py",
    "matplotlib",
    "cartopy",
    "keras",
    "papermill",
    "nbformat",
    "nbclient",
    "playwright",
    "selenium",
    "jupyter_client",
    "ipykernel",
    "ipywidgets",
    "cfgrib",
    "pyresample",
    "regionmask",
    "shapely",
    "zarr",
    "h5py",
    "dask",
    "distributed",
    "scipy",
    "skimage",
    "sklearn",
    "pandas",
    "xarray",
    "netCDF4",
    "tqdm",
    "psutil",
}
LONG_MODULE, LONG_FUNCTION = 600, 80


def modules(root: Path) -> dict[str, Path]:
    """``{dotted name: path}`` of every module under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The climnb module that ``name`` (a module or a name in one) lives in."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(tree: ast.Module, mods, here: str):
    """``(target module, imported names, inside a function, the import's top package)``."""
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def in_function(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return True
        return False

    def type_checking(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                return True
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not type_checking(node):
                    yield a.name, [], in_function(node), a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not type_checking(node):
            base = node.module
            if node.level:
                pkg = here.split(".")[: -node.level or None]
                base = ".".join(pkg + [node.module])
            for a in node.names:
                full = f"{base}.{a.name}"
                target = full if full in mods else base
                yield target, [a.name], in_function(node), base.split(".")[0]


def unit(mod: str) -> str:
    """The floor unit of a module: its subpackage, or the top-level module itself."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
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
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Floor of each node: 0 when it imports nothing of climnb, else one above its highest
    import (nodes of a cycle share the floor of the cycle)."""
    memo: dict[str, int] = {}

    def floor(v, seen=()):
        if v in memo:
            return memo[v]
        deps = [w for w in graph.get(v, ()) if w != v and w not in seen]
        memo[v] = 1 + max((floor(w, (*seen, v)) for w in deps), default=-1)
        return memo[v]

    for v in graph:
        floor(v)
    return memo


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="climnb")
    parser.add_argument("--readme", default="README.md")
    args = parser.parse_args(argv)
    root = Path(args.root)
    mods = modules(root)
    shims = sorted(m for m, p in mods.items() if SHIM in p.read_text())
    mods = {m: p for m, p in mods.items() if m not in shims}
    trees = {m: ast.parse(p.read_text(), str(p)) for m, p in mods.items()}
    lines = {m: len(p.read_text().splitlines()) for m, p in mods.items()}

    print("== module tree (modules, lines)")
    groups = defaultdict(list)
    for m in mods:
        parts = m.split(".")
        is_pkg = mods[m].name == "__init__.py"
        groups[parts[1] if len(parts) > 2 or (len(parts) == 2 and is_pkg) else "."].append(m)
    top = " ".join(m[7:] or "__init__" for m in groups["."])
    print(f"   top level: {len(groups['.'])} modules: {top}")
    for g in sorted(k for k in groups if k != "."):
        print(f"   {g}/: {len(groups[g])} modules, {sum(lines[m] for m in groups[g])} lines")
    print(f"   total: {len(mods)} modules, {sum(lines.values())} lines")
    if shims:
        names = " ".join(m[7:] for m in shims)
        print(f"   old paths kept as warning shims: {len(shims)}: {names}")

    mod_graph: dict[str, set[str]] = defaultdict(set)
    unit_graph: dict[str, set[str]] = defaultdict(set)
    inner = {"own light": 0, "own heavy": 0, "third-party heavy": 0, "other": 0}
    inner_light: list[str] = []
    private: list[str] = []
    top_third: dict[str, set[str]] = defaultdict(set)
    found = {m: list(imports(trees[m], mods, m)) for m in mods}
    for m, found_imports in found.items():
        for target, names, inside, top in found_imports:
            if top != "climnb":
                if not inside:
                    top_third[m].add(top)
                continue
            t = resolve(target, mods)
            if t is None or t == m:
                continue
            if not inside:
                mod_graph[m].add(t)
            if unit(t) != unit(m):
                unit_graph[unit(m)].add(unit(t))
            for n in names:
                if n.startswith("_") and not n.startswith("__") and f"{t}.{n}" not in mods:
                    private.append(f"{m} imports {t}.{n}")
        mod_graph.setdefault(m, set())
    # attribute access to private names of an imported climnb module
    for m, tree in trees.items():
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("climnb.") and a.asname:
                        aliases[a.asname] = a.name
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("climnb")
            ):
                for a in node.names:
                    if f"{node.module}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != m
            ):
                private.append(f"{m} uses {aliases[node.value.id]}.{node.attr}")

    def loads_heavy(m, seen=None) -> bool:
        seen = set() if seen is None else seen
        if m in seen:
            return False
        seen.add(m)
        if top_third.get(m, set()) & HEAVY - {"tqdm", "psutil"}:
            return True
        return any(loads_heavy(t, seen) for t in mod_graph.get(m, ()))

    for m, found_imports in found.items():
        for target, _names, inside, top in found_imports:
            if not inside:
                continue
            if top == "climnb":
                t = resolve(target, mods)
                if t is None:
                    inner["other"] += 1
                elif loads_heavy(t):
                    inner["own heavy"] += 1
                else:
                    inner["own light"] += 1
                    inner_light.append(f"{m} -> {t}")
            elif top in HEAVY:
                inner["third-party heavy"] += 1
            else:
                inner["other"] += 1

    print("\n== import graph (top-level imports, by subpackage or top-level module)")
    fl = floors({u: set(v) for u, v in unit_graph.items()})
    for u in list(unit_graph):
        fl.setdefault(u, 0)
    by_floor = defaultdict(list)
    for u, f in fl.items():
        by_floor[f].append(u)
    for f in sorted(by_floor, reverse=True):
        print(f"   floor {f}: {' '.join(sorted(by_floor[f]))}")
    up = sorted(
        f"{m} -> {t}"
        for m, ts in mod_graph.items()
        for t in ts
        if unit(t) in FACADE - {"__init__"} and unit(m) not in FACADE
    )
    up += sorted(
        f"{m} -> {t} (in a function)"
        for m, found_imports in found.items()
        for target, _n, inside, top in found_imports
        if inside and top == "climnb"
        for t in [resolve(target, mods)]
        if t and unit(t) in FACADE - {"__init__"} and unit(m) not in FACADE
    )
    print(f"   arrows up (below the facade into it): {len(up)}")
    for a in up:
        print(f"      {a}")
    folder_cycles = sccs({u: set(v) for u, v in unit_graph.items()})
    module_cycles = sccs(mod_graph)
    print(f"   folder cycles (any import): {len(folder_cycles)}")
    for c in folder_cycles:
        print(f"      {' <-> '.join(c)}")
    print(f"   module cycles (top-level imports): {len(module_cycles)}")
    for c in module_cycles:
        print(f"      {' <-> '.join(c)}")

    print(f"\n== modules over {LONG_MODULE} lines")
    for m in sorted(mods, key=lambda m: -lines[m]):
        if lines[m] > LONG_MODULE:
            print(f"   {lines[m]:5d} {m}")
    print(f"\n== functions over {LONG_FUNCTION} lines (and classes over 300)")
    for m, tree in trees.items():
        for node in ast.walk(tree):
            n = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and n > LONG_FUNCTION:
                print(f"   {n:5d} {m}.{node.name}")
            elif isinstance(node, ast.ClassDef) and n > 300:
                print(f"   {n:5d} {m}.{node.name} (class)")

    print("\n== imports inside functions")
    for k, v in inner.items():
        print(f"   {k}: {v}")
    for s in inner_light:
        print(f"      own light: {s}")
    print(f"\n== private names across modules: {len(private)}")
    for p in private:
        print(f"   {p}")
    readme = Path(args.readme)
    if readme.exists():
        print(f"\n== README lines: {len(readme.read_text().splitlines())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
