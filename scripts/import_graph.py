"""Draw acxfs's import graph between its packages: `python3 -m scripts.import_graph`.

Prints one line per package (`acxfs.mount -> acxfs.content, acxfs.formats, ...`), from the AST
of every module (imports inside functions and TYPE_CHECKING blocks included), or with `--dot`
a Graphviz digraph (`python3 -m scripts.import_graph --dot | dot -Tsvg > imports.svg`).
`--modules` draws modules instead of packages.  Only the standard library is used.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "acxfs"


def module_names() -> dict[str, Path]:
    """Every module of acxfs by its dotted name (a package by its own name) -> its file."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The acxfs modules `module` imports anywhere in its text."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package
                for _ in range(node.level - 1):
                    prefix = prefix.rpartition(".")[0]
                base = f"{prefix}.{base}" if base else prefix
            names.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                         for a in node.names)
    found = set()
    for name in names:
        if name.split(".")[0] != "acxfs":
            continue
        while name not in modules:
            name = name.rpartition(".")[0]
        found.add(name)
    return found


def group(module: str) -> str:
    """The package a module belongs to: `acxfs.mount.router` -> `acxfs.mount`; a plain module
    at the top (`acxfs.errors`) is its own node; a format package stays one node."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "formats":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def graph(by_module: bool) -> dict[str, set[str]]:
    modules = module_names()
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        source = module if by_module else group(module)
        targets = {t if by_module else group(t) for t in imported(module, path, modules)}
        edges.setdefault(source, set()).update(targets - {source})
    return edges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot", action="store_true", help="a Graphviz digraph")
    parser.add_argument("--modules", action="store_true", help="modules, not packages")
    args = parser.parse_args()
    edges = graph(args.modules)
    if args.dot:
        print("digraph acxfs {\n  rankdir=LR;")
        for source in sorted(edges):
            for target in sorted(edges[source]):
                print(f'  "{source}" -> "{target}";')
        print("}")
        return
    for source in sorted(edges):
        print(f"{source} -> {', '.join(sorted(edges[source])) or '(nothing)'}")


if __name__ == "__main__":
    main()
