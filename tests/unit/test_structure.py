"""The import structure holds (docs/architecture.md): each floor imports only downwards.

The imports are read from the source with `ast`, not by importing anything, so the test
sees every import, the ones inside functions too, and stays fast. The rules:

- no import cycle among our modules at module level (a cycle makes import order matter);
- `memsync_protocol` imports nothing of ours; `scanner` imports only `memsync_protocol`;
- the client never imports the server, nor the server the client;
- library modules never import the command line (`sync_client.cli`, `sync_client.cli.*`
  or a `*_cli` module): the CLI words things, the library returns data;
- no product module is over `MAX_LINES` lines, except the scanner's rule table;
- the client's packages by concern (`LIGHT_PACKAGES`) import nothing in `__init__.py`,
  so loading one part (as `memsync context` does) never loads its siblings, and no
  module beside a package carries its name as a prefix (`watch_follow.py` next to
  `watch/`): it belongs in the package.

Today's exceptions are listed by name below. They may only shrink: a list entry that no
longer matches fails too, so fixing one means deleting its line.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("memsync_protocol", "scanner", "sync_client", "sync_server")
OURS = (*PRODUCT, "bench", "tests")
MAX_LINES = 900

# Cycles that exist today once imports inside functions count too (none at module
# level): each is the set of its modules. None since `state` and `watch_lock` both
# write through `durable`.
KNOWN_CYCLES: set[frozenset[str]] = set()

# Library -> CLI arrows that exist today: none since the CLI became a package.
KNOWN_CLI_ARROWS: set[tuple[str, str]] = set()

# The client's packages by concern whose `__init__.py` only documents them.
LIGHT_PACKAGES = (
    "sync_client.freshness",
    "sync_client.index",
    "sync_client.review",
    "sync_client.watch",
)

# Product modules over MAX_LINES today; each is being split.
KNOWN_LARGE: set[str] = {
    "scanner.rules",  # the rule table: one entry per secret kind, kept whole on purpose
}


def _top(name: str) -> str:
    return name.split(".")[0]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _sources() -> dict[str, Path]:
    """Every product module, by dotted name (bench and tests import, nothing imports them)."""
    found: dict[str, Path] = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _imports(tree: ast.Module, *, module_level: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports of a module: at module level only (outside functions, classes and
    `if TYPE_CHECKING:`), or all of them."""
    if not module_level:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node
        return
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _type_checking(node.test):
            pending.extend(node.orelse)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    pending.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])


def _targets(name: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules of ours that `node`, in module `name`, imports."""
    modules = _sources()
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = name.split(".")
            is_package = _sources()[name].name == "__init__.py"
            anchor = package[: len(package) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, base] if base else anchor)
        wanted = [f"{base}.{alias.name}" for alias in node.names]
        wanted = [target if target in modules else base for target in wanted]
    found = set()
    for target in wanted:
        if _top(target) in OURS:
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            found.add(target)
    return found


@cache
def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_bytes()) for name, path in _sources().items()}


@cache
def _graph(module_level: bool) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (at module level, or anywhere)."""
    graph: dict[str, set[str]] = {}
    for name, tree in _trees().items():
        arrows: set[str] = set()
        for node in _imports(tree, module_level=module_level):
            arrows |= _targets(name, node)
        arrows.discard(name)
        graph[name] = arrows
    return graph


def _cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

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
                found.add(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _is_cli(name: str) -> bool:
    """The command line, and the entry points above it (`python -m`, the console script)."""
    return (
        name in ("sync_client.cli", "sync_client.__main__", "sync_client.launch")
        or name.startswith("sync_client.cli.")
        or name.rpartition(".")[2].endswith("_cli")
    )


def _arrows(package: str) -> set[tuple[str, str]]:
    """Every import arrow (module level or in a function) out of `package`'s modules."""
    return {
        (source, target)
        for source, targets in _graph(False).items()
        if source == package or source.startswith(package + ".")
        for target in targets
    }


def _product_graph(module_level: bool) -> dict[str, set[str]]:
    # A package importing its submodules to re-export them is no cycle of note: a
    # submodule's `from package.sibling import x` runs the package first by design.
    return {
        source: {
            target
            for target in targets
            if not (
                target in _sources()
                and _sources()[target].name == "__init__.py"
                and source.startswith(target + ".")
            )
        }
        for source, targets in _graph(module_level).items()
    }


def test_no_import_cycle_at_module_level() -> None:
    assert _cycles(_product_graph(True)) == set()


def test_import_cycles_through_functions_are_only_the_known_ones() -> None:
    assert _cycles(_product_graph(False)) == KNOWN_CYCLES


def test_the_protocol_imports_nothing_of_ours() -> None:
    assert {
        arrow for arrow in _arrows("memsync_protocol") if _top(arrow[1]) != "memsync_protocol"
    } == set()


def test_the_scanner_imports_only_the_protocol() -> None:
    allowed = {"scanner", "memsync_protocol"}
    assert {arrow for arrow in _arrows("scanner") if _top(arrow[1]) not in allowed} == set()


def test_client_and_server_never_import_each_other() -> None:
    assert {arrow for arrow in _arrows("sync_client") if _top(arrow[1]) == "sync_server"} == set()
    assert {arrow for arrow in _arrows("sync_server") if _top(arrow[1]) == "sync_client"} == set()


def test_product_code_never_imports_bench_or_tests() -> None:
    arrows = set().union(*(_arrows(package) for package in PRODUCT))
    assert {arrow for arrow in arrows if _top(arrow[1]) in ("bench", "tests")} == set()


def test_library_modules_never_import_the_command_line() -> None:
    arrows = {
        (source, target)
        for source, target in _arrows("sync_client")
        if _is_cli(target) and not _is_cli(source)
    }
    assert arrows == KNOWN_CLI_ARROWS


def test_the_cli_rule_covers_the_cli_package_and_cli_modules() -> None:
    assert _is_cli("sync_client.cli")
    assert _is_cli("sync_client.cli.sync")
    assert _is_cli("sync_client.index_cli")
    assert not _is_cli("sync_client.client")
    assert not _is_cli("sync_client.watch.notices")


def test_no_product_module_is_over_the_limit() -> None:
    large = {
        name
        for name, path in _sources().items()
        if _top(name) in PRODUCT and len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    assert large == KNOWN_LARGE


def test_the_walk_sees_function_level_and_relative_imports() -> None:
    """The reader finds what the rules depend on: an import inside a function, and a
    `from package import submodule`."""
    everywhere = _graph(False)
    assert "sync_client.config" in everywhere["sync_client.context"]  # inside a function
    assert "sync_client.config" not in _graph(True)["sync_client.context"]
    assert "sync_client.config.paths" in everywhere["sync_client.config.credentials"]
    assert "memsync_protocol.repos" in everywhere["sync_client.config.git"]


def test_the_client_packages_by_concern_import_nothing_in_their_init() -> None:
    for package in LIGHT_PACKAGES:
        assert _sources()[package].name == "__init__.py", package
        assert list(_imports(_trees()[package], module_level=False)) == [], package


def test_no_client_module_beside_a_package_is_named_as_its_part() -> None:
    packages = {path.parent.name for path in (ROOT / "sync_client").glob("*/__init__.py")}
    prefixed = {
        path.name
        for path in (ROOT / "sync_client").glob("*.py")
        if path.stem.partition("_")[0] in packages and "_" in path.stem
    }
    assert prefixed == set()
