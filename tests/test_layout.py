"""The package's shape: no import circle in acxfs/, no import hidden inside a function (but
the few named here, each with its reason)."""

from __future__ import annotations

import ast
from pathlib import Path

from scripts.import_graph import module_names

PACKAGE = Path(__file__).resolve().parent.parent / "acxfs"

# Imported where used: `fuse` (fusepy) loads libfuse2 as it is imported and raises without
# it, `mfusepy` picks its libfuse when first imported; commands that never mount must run
# without either.  The HTTP client's modules (urllib.request, http.client, ssl, email) and
# PyYAML are imported by their first use in acxfs.sources.http and acxfs.skills: most
# commands neither connect nor read a SKILL.md, and loading them is over a tenth of every
# command's start-up.  None of these is an acxfs module, so the import graph above is whole.
LOCAL_IMPORTS_ALLOWED = {"fuse", "mfusepy", "urllib", "http", "ssl", "email", "yaml"}

# acxfs modules a function may import, by the module importing them: a layer that only some
# command lines reach, loaded by the one place that reaches it, so that `acxfs list`,
# `remove`, `add` of a file and `up` with a daemon running load neither the formats nor the
# daemon and its mount stack nor the sources (tests/cli/test_library_commands_load_what_they_
# use.py holds that).  The formats (SQLite, zip, Ed25519, the SKILL.md reader) load when a
# bundle is checked; the daemon's module and the mount stack under it (libfuse's binding, the
# operations) when a command starts or stops a daemon, every other one asks a running daemon
# over its socket; the projects and the sources (every registry kind, the OCI client) when a
# command line names a project, a source or an `oci://` reference, or updates from sources.
# The import graph sees these imports too, so the circle and layer tests hold them as well.
LOCAL_ACXFS_IMPORTS_ALLOWED = {
    "acxfs.library.store.bundles": {"acxfs.formats"},
    "acxfs.library.manager": {"acxfs.library.serving.daemon"},
    "acxfs.cli.library_cmds": {"acxfs.library.projects.project", "acxfs.library.updates.remote",
                               "acxfs.library.updates.updates"},
}


MODULES = module_names()  # dotted name -> file, as the graph script names them
Packages = dict[str, bool]  # module name -> whether it is a package


def _targets(module: str, node: ast.Import | ast.ImportFrom, modules: Packages) -> list[str]:
    """The acxfs modules an import statement in `module` names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module if modules[module] else module.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                 for alias in node.names]
    found = []
    for name in names:
        if name.split(".")[0] != "acxfs":
            continue
        while name not in modules:  # an attribute of a module: that module
            name = name.rpartition(".")[0]
        found.append(name)
    return found


def _graph(sources: dict[str, str], modules: Packages) -> dict[str, set[str]]:
    """Module -> the acxfs modules importing it runs: every import statement, at any depth
    (functions and TYPE_CHECKING blocks too), plus the parent packages an import of a
    submodule initialises (except the importer's own, which are initialised already)."""
    graph: dict[str, set[str]] = {}
    for module, text in sources.items():
        edges: set[str] = set()
        own = module.split(".")
        ancestors = {".".join(own[:i]) for i in range(1, len(own) + modules[module])}
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(module, node, modules):
                edges.add(target)
                parts = target.split(".")
                edges.update(p for p in (".".join(parts[:i]) for i in range(1, len(parts)))
                             if p not in ancestors)
        edges.discard(module)
        graph[module] = edges
    return graph


def _package_graph() -> dict[str, set[str]]:
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    return _graph(sources, {name: path.name == "__init__.py" for name, path in MODULES.items()})


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_acxfs_has_no_import_circle() -> None:
    assert _cycles(_package_graph()) == []


FAKE = {"acxfs": True, "acxfs.fmt": True, "acxfs.fmt.one": False, "acxfs.base": False,
        "acxfs.cli": False}


def test_a_circle_through_a_function_local_import_is_found() -> None:
    graph = _graph({
        "acxfs": "", "acxfs.fmt": "", "acxfs.fmt.one": "",
        "acxfs.base": "def f():\n    from acxfs import cli\n",
        "acxfs.cli": "from acxfs.base import f\n",
    }, FAKE)
    assert _cycles(graph) == [["acxfs.base", "acxfs.cli"]]


def test_a_circle_through_a_type_checking_import_is_found() -> None:
    graph = _graph({
        "acxfs": "", "acxfs.fmt": "", "acxfs.fmt.one": "from acxfs.base import X\n",
        "acxfs.base": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from .fmt.one import Y\n",
        "acxfs.cli": "",
    }, FAKE)
    assert _cycles(graph) == [["acxfs.base", "acxfs.fmt.one"]]


def test_a_circle_through_a_parent_package_is_found_but_not_a_sibling_import() -> None:
    sources = {
        "acxfs": "", "acxfs.fmt": "from acxfs.fmt import one\n",
        "acxfs.fmt.one": "from acxfs.fmt.one import x\n", "acxfs.cli": "",
        "acxfs.base": "",
    }
    assert _cycles(_graph(sources, FAKE)) == []
    sources["acxfs.base"] = "from acxfs.fmt.one import x\n"  # runs acxfs/fmt/__init__ first
    sources["acxfs.fmt"] = "from acxfs.fmt import one\nfrom acxfs import base\n"
    assert _cycles(_graph(sources, FAKE)) == [["acxfs.base", "acxfs.fmt"]]


def _local_imports(sources: dict[str, str], modules: Packages) -> list[str]:
    """`module:line name` of every import inside a function of acxfs/ not allowed there."""
    found = []
    for module, text in sources.items():
        allowed = LOCAL_ACXFS_IMPORTS_ALLOWED.get(module, set())
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = ["." * node.level + (node.module or "")]
                else:
                    continue
                if names[0].split(".")[0] in ("acxfs", ""):  # the acxfs modules it names
                    names = _targets(module, node, modules)
                found += [f"{module}:{node.lineno} {name}" for name in names
                          if name.split(".")[0] not in LOCAL_IMPORTS_ALLOWED
                          and name not in allowed]
    return sorted(set(found))


def test_no_import_inside_a_function_but_optional_libraries_and_late_layers() -> None:
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    assert _local_imports(sources, {n: p.name == "__init__.py" for n, p in MODULES.items()}) == []


def test_a_local_import_is_allowed_only_of_the_module_named_for_its_importer() -> None:
    modules = {"acxfs": True, "acxfs.formats": True, "acxfs.formats.acx": True,
               "acxfs.library": True, "acxfs.library.store": True,
               "acxfs.library.store.bundles": False, "acxfs.cli": False}
    body = ("def f():\n    from acxfs import formats\n    from acxfs.formats import acx\n"
            "    import yaml\n")
    sources = {"acxfs": "", "acxfs.formats": "", "acxfs.formats.acx": "", "acxfs.library": "",
               "acxfs.library.store": "", "acxfs.library.store.bundles": body,
               "acxfs.cli": body.replace("from acxfs import", "from . import")}
    assert _local_imports(sources, modules) == [
        "acxfs.cli:2 acxfs.formats", "acxfs.cli:3 acxfs.formats.acx",
        "acxfs.library.store.bundles:3 acxfs.formats.acx"]


# --------------------------------------------------------------------------------------------
# Which modules know about formats and stored bytes, and how long a module may be.  (Above:
# import circles and local imports; below: format names, stored bytes, module length.)

FORMAT_NAMES = frozenset({"acx", "azp"})
FORMATS_DIR = PACKAGE / "formats"


def _inside_formats(path: Path) -> bool:
    """The modules of acxfs/formats/ (the table, the base source) and of each format package
    acxfs/formats/<fmt>/."""
    return path.parent == FORMATS_DIR or path.parent.parent == FORMATS_DIR


def _constants(node: ast.AST) -> list[object]:
    """The constant values an operand of a comparison names, also inside a tuple/list/set."""
    if isinstance(node, ast.Constant):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [value for item in node.elts for value in _constants(item)]
    return []


def _format_compares(text: str, filename: str = "<test>") -> list[int]:
    """Lines where something is compared (==, !=, in, is, match/case) with a format name."""
    lines = []
    for node in ast.walk(ast.parse(text, filename)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(value in FORMAT_NAMES for op in operands for value in _constants(op)):
                lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant) \
                and node.value.value in FORMAT_NAMES:
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_format_table_compares_a_format_name() -> None:
    found = [f"{module}:{line}" for module, path in MODULES.items() if not _inside_formats(path)
             for line in _format_compares(path.read_text(encoding="utf-8"), str(path))]
    assert found == []


def test_a_format_compare_is_found_whatever_the_variable_is_called() -> None:
    text = ('def f(kind, fmt):\n    if kind == "azp":\n        return 1\n'
            '    if fmt in ("x", "acx"):\n        return 2\n'
            '    match fmt:\n        case "acx":\n            return 3\n'
            '    return "acx" != fmt.name\n')
    assert _format_compares(text) == [2, 4, 7, 9]
    assert _format_compares('label = "acx"\nprint(label.upper())\n') == []


# Only the content package and the formats reach stored bytes: they alone may import the
# libraries that read them (SQLite, zip, zlib) or name a function that yields or verifies them.
STORED_BYTES_MODULES = frozenset({"sqlite3", "zipfile", "zlib"})
STORED_BYTES_NAMES = frozenset({
    "verify_content", "stored_chunks", "small_rows", "package_chunks", "read_small",
    "connect_readonly", "ConnectionPool", "read_members", "_chunks", "_inflate_into",
    "_inflate_with", "_inflate_whole", "_read_small", "_verify_small",
})


def _reaches_stored_bytes(text: str, filename: str = "<test>") -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
            names = [n for n in names if n in STORED_BYTES_MODULES]
        elif isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] in STORED_BYTES_MODULES:
                names = [node.module or ""]
            names += [a.name for a in node.names if a.name in STORED_BYTES_NAMES]
        elif isinstance(node, ast.Name) and node.id in STORED_BYTES_NAMES:
            names = [node.id]
        elif isinstance(node, ast.Attribute) and node.attr in STORED_BYTES_NAMES:
            names = [node.attr]
        found += [f"{getattr(node, 'lineno', 0)} {name}" for name in names]
    return found


def test_only_content_and_the_formats_reach_stored_bytes() -> None:
    found = [f"{module}:{hit}" for module, path in MODULES.items()
             if not (_inside_formats(path) or path.parent == PACKAGE / "content")
             for hit in _reaches_stored_bytes(path.read_text(encoding="utf-8"), str(path))]
    assert found == []


def test_a_reach_for_stored_bytes_is_found() -> None:
    text = ("import zlib\nfrom sqlite3 import connect\n"
            "from acxfs.content.cache import verify_content\n"
            "from acxfs.formats.acx import source\n"
            "def f(s, e):\n    return source.stored_chunks(s, e, 1), s._chunks(e)\n")
    assert _reaches_stored_bytes(text) == [
        "1 zlib", "2 sqlite3", "3 verify_content", "6 stored_chunks", "6 _chunks"]
    assert _reaches_stored_bytes("def f(source, e):\n    return source.read(e, 0, 9)\n") == []


def test_a_source_offers_verified_bytes_only() -> None:
    from acxfs.container import Source
    from acxfs.formats.acx.source import CartridgeSource
    from acxfs.formats.azp.source import AzpSource

    verified = {"blob", "read", "close"}
    protocol = {n for n, v in vars(Source).items() if callable(v) and not n.startswith("_")}
    assert protocol == verified
    for cls in (CartridgeSource, AzpSource):  # what they define or inherit
        public = {n for n in dir(cls) if callable(getattr(cls, n)) and not n.startswith("_")}
        assert public == verified, cls


MAX_MODULE_LINES = 550


def test_no_module_is_over_550_lines() -> None:
    long = {module: n for module, path in MODULES.items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_every_public_error_class_lives_in_errors_py() -> None:
    """An error a caller may catch is defined once, in acxfs/errors.py (private helpers of one
    module, and FUSE's errno answer, excepted)."""
    allowed = {"FuseOSError"}  # the errno answer fusepy and mfusepy turn into a reply
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
            if node.name not in allowed and any(
                    b.endswith(("Error", "Exception", "Problem", "Down", "Refused"))
                    for b in bases):
                stray.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert stray == []


def _outside_importers(package: str, graph: dict[str, set[str]],
                       allowed: tuple[str, ...]) -> list[str]:
    """The modules, other than `package`'s own and `allowed` packages', importing `package`."""
    def within(module: str, prefix: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    return sorted(m for m, edges in graph.items()
                  if not any(within(m, a) for a in (package, *allowed))
                  and any(within(e, package) for e in edges))


def test_only_the_library_and_the_cli_import_the_library() -> None:
    """The library builds on the mount stack, the formats and trust, never the reverse: what a
    lower layer needs of it (its reserved mountpoint) the library passes down."""
    assert _outside_importers("acxfs.library", _package_graph(), ("acxfs.cli",)) == []


def test_an_import_of_the_library_from_below_is_found() -> None:
    modules = {"acxfs": True, "acxfs.library": True, "acxfs.library.x": False,
               "acxfs.mount": False, "acxfs.cli": False}
    graph = _graph({"acxfs": "", "acxfs.library": "", "acxfs.library.x": "import acxfs.mount\n",
                    "acxfs.mount": "def f():\n    from acxfs.library import x\n",
                    "acxfs.cli": "from acxfs.library.x import y\n"}, modules)
    assert _outside_importers("acxfs.library", graph, ("acxfs.cli",)) == ["acxfs.mount"]


MAX_TOP_MODULES = 8


def test_at_most_eight_plain_modules_at_the_top_of_the_package() -> None:
    """Everything else lives in a package that says what it is part of."""
    plain = sorted(p.name for p in PACKAGE.glob("*.py")
                   if p.name not in ("__init__.py", "__main__.py"))
    assert len(plain) <= MAX_TOP_MODULES, plain


SCRIPTS = PACKAGE.parent / "scripts"


def test_no_script_is_over_550_lines() -> None:
    long = {str(p.relative_to(SCRIPTS)): n for p in sorted(SCRIPTS.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def _imports_tests(text: str) -> list[int]:
    """Lines of `text` that import the tests package (scripts stand alone)."""
    lines = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            lines.append(node.lineno)
    return lines


def test_no_script_imports_the_tests() -> None:
    found = [f"{p.relative_to(SCRIPTS)}:{line}" for p in sorted(SCRIPTS.rglob("*.py"))
             for line in _imports_tests(p.read_text(encoding="utf-8"))]
    assert found == []


def test_an_import_of_the_tests_is_found() -> None:
    text = "import tests.support\nfrom tests import x\nfrom testsuite import y\nimport os\n"
    assert _imports_tests(text) == [1, 2]


# The skills library's own layers, lowest first: each part imports only parts on its left.
LIBRARY_LAYERS = (("links",), ("store",), ("changes",), ("serving",), ("manager",),
                  ("projects", "updates"), ("report", "repair"))


def _library_part(module: str) -> str | None:
    """The part of the library (`acxfs.library.PART[.MODULE]`) a module belongs to."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["acxfs", "library"] else None


def _upward_library_imports(graph: dict[str, set[str]]) -> list[str]:
    """`importer -> imported` for every import from a library part to one of the same or a
    higher layer than its own (a part's modules may import each other)."""
    rank = {part: i for i, layer in enumerate(LIBRARY_LAYERS) for part in layer}
    found = []
    for module, edges in graph.items():
        mine = _library_part(module)
        for edge in edges:
            theirs = _library_part(edge)
            if mine is None or theirs is None or theirs == mine:
                continue
            if theirs not in rank or mine not in rank or rank[theirs] >= rank[mine]:
                found.append(f"{module} -> {edge}")
    return sorted(found)


def test_the_library_parts_import_one_way() -> None:
    """links < store < changes < serving < manager < projects, updates < report, repair."""
    assert _upward_library_imports(_package_graph()) == []


def test_an_upward_library_import_is_found() -> None:
    graph = {"acxfs.library.store.state": {"acxfs.library.changes.journal"},
             "acxfs.library.changes.journal": {"acxfs.library.store.state"},
             "acxfs.library.updates.a": {"acxfs.library.projects.b"},
             "acxfs.library.odd.x": {"acxfs.library.links.agents"}}
    assert _upward_library_imports(graph) == [
        "acxfs.library.odd.x -> acxfs.library.links.agents",
        "acxfs.library.store.state -> acxfs.library.changes.journal",
        "acxfs.library.updates.a -> acxfs.library.projects.b"]
