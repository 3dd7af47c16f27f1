"""The command line's package keeps its floors: plumbing at the bottom, command groups
side by side over it, and the library below both.

Read from the source (no import), so a new arrow fails here before anyone runs it.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "sync_client"
CLI = CLIENT / "cli"


def imported(path: Path) -> set[str]:
    """The `sync_client...` modules `path` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module in {"sync_client", "sync_client.cli"}:
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("sync_client")}


def test_no_library_module_imports_the_command_line() -> None:
    offenders = {
        path.name: sorted(name for name in imported(path) if name.startswith("sync_client.cli"))
        for path in CLIENT.glob("*.py")
        if path.name != "launch.py"  # the console script is the command line's door
    }
    assert {name: cli for name, cli in offenders.items() if cli} == {}


def test_command_modules_import_only_the_plumbing_of_the_package() -> None:
    modules = sorted(path for path in CLI.glob("*.py") if path.name != "__init__.py")
    assert {path.stem for path in modules} >= {"_common", "sync", "history", "index", "agents"}
    reaching = {
        path.name: sorted(
            name
            for name in imported(path)
            if name.startswith("sync_client.cli") and name != "sync_client.cli._common"
        )
        for path in modules
    }
    assert {name: arrows for name, arrows in reaching.items() if arrows} == {}
    assert not any(name.startswith("sync_client.cli") for name in imported(CLI / "_common.py"))
