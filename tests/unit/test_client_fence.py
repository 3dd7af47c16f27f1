"""The client and the scanner stand without the server: what they import, statically.

Every module of `sync_client/`, `scanner/` and `memsync_protocol/` is parsed (imports
inside functions included). The client side may import the standard library, its own
packages and the base dependencies of pyproject.toml; never `sync_server` nor a library
of the `server` extra. The protocol package imports the standard library only, and
`merge3` (a base dependency, pure Python, itself without dependencies) for the note
merge that the client's pull and the server's accept share.
`tests/integration/test_client_only.py` proves the same in a real client-only install.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

from sync_server.launch import SERVER_MODULES

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SIDE = ("sync_client", "scanner", "memsync_protocol")


def _module_of(requirement: str) -> str:
    """`uvicorn[standard]>=0.30` -> `uvicorn`; `prometheus-client` -> `prometheus_client`."""
    match = re.match(r"[A-Za-z0-9_.-]+", requirement)
    assert match is not None, requirement
    # Each of our dependencies is imported under its project name, `-` as `_`, but for
    # these.
    module = match.group(0).lower().replace("-", "_")
    return {"markdown_it_py": "markdown_it"}.get(module, module)


def _project() -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project


def _base_modules() -> set[str]:
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    return {_module_of(requirement) for requirement in dependencies}


def _server_extra_modules() -> set[str]:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    return {_module_of(requirement) for requirement in extras["server"]}


def _mcp_extra_modules() -> set[str]:
    """The `mcp` extra: `memsync mcp` imports it, only when that command runs."""
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    return {_module_of(requirement) for requirement in extras["mcp"]}


def _imports(package: str) -> list[tuple[str, int, str]]:
    """(file, line, top-level module) for every absolute import under `package`."""
    found: list[tuple[str, int, str]] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            where = str(path.relative_to(ROOT))
            found.extend((where, node.lineno, name.partition(".")[0]) for name in names)
    return found


def test_the_walk_sees_the_client_modules() -> None:
    # A fence over an empty walk would pass for ever.
    modules = {module for _, _, module in _imports("sync_client")}
    assert {"httpx", "click", "memsync_protocol", "sync_client"} <= modules


@pytest.mark.parametrize("package", CLIENT_SIDE)
def test_the_client_side_never_imports_the_server(package: str) -> None:
    allowed = set(sys.stdlib_module_names) | set(CLIENT_SIDE) | _base_modules()
    allowed |= _mcp_extra_modules()
    bad = [
        f"{where}:{line}: {module}"
        for where, line, module in _imports(package)
        if module not in allowed or module == "sync_server" or module in SERVER_MODULES
    ]
    assert bad == []


# The libraries the protocol may import besides the standard library.
PROTOCOL_LIBRARIES = {"merge3"}


def test_the_protocol_imports_the_standard_library_only() -> None:
    assert _base_modules() >= PROTOCOL_LIBRARIES
    bad = [
        f"{where}:{line}: {module}"
        for where, line, module in _imports("memsync_protocol")
        if module not in sys.stdlib_module_names
        and module not in {"memsync_protocol", *PROTOCOL_LIBRARIES}
    ]
    assert bad == []


def test_the_launcher_knows_every_library_of_the_server_extra() -> None:
    # `memsync-server` without one of these says "not installed"; a library added to the
    # extra and missing here would end in a traceback instead.
    assert _server_extra_modules() <= SERVER_MODULES
    assert not SERVER_MODULES & _base_modules()
