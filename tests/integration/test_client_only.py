"""`pip install memsync` without the `server` extra: a real client-only install.

A wheel of this checkout is built once, installed without the extra into a fresh venv
(its dependencies come from the index, through pip's cache), and that venv's `memsync`
pushes, pulls, reports status and watches against a real server run from this
environment. The server's libraries are absent there, and its `memsync-server` says in
one line how to get the server.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sync_server.launch import NOT_INSTALLED
from tests.integration.users import User, make_user
from tests.integration.watchkit import WatchProcess, wait_until, watch_state
from tests.liveserver import LiveServer

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT = 300

pytestmark = pytest.mark.slow


def _run(command: list[str]) -> None:
    """Run a setup step; its output only when it fails."""
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
    )
    assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-2000:])


def _source_copy(target: Path) -> Path:
    """The files a wheel is built from, copied so the build leaves this checkout alone."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    target.mkdir()
    for name in ("pyproject.toml", pyproject["project"]["readme"]):
        shutil.copy2(ROOT / name, target / name)
    for pattern in patterns:
        for package in glob.glob(pattern, root_dir=ROOT):
            if (ROOT / package / "__init__.py").exists():
                shutil.copytree(
                    ROOT / package,
                    target / package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                )
    return target


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `bin/` of a venv holding `pip install memsync` (no extra) of this checkout."""
    root = tmp_path_factory.mktemp("client-only")
    source = _source_copy(root / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    _run([*pip, "wheel", "--no-deps", "--wheel-dir", str(root / "wheels"), str(source)])
    (wheel,) = (root / "wheels").glob("memsync-*.whl")
    # No pip inside the new venv: this environment's pip installs into it (`--python`).
    _run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")])
    bin_dir = root / "venv" / "bin"
    _run([*pip, "--python", str(bin_dir / "python"), "install", str(wheel)])
    return bin_dir


def _client_user(name: str, root: Path, live: LiveServer, bin_dir: Path) -> User:
    user = make_user(name, root, live, live.token(name=name))
    user.script = bin_dir / "memsync"
    return user


@pytest.mark.parametrize(
    "module", ["fastapi", "sqlalchemy", "uvicorn", "pydantic", "sync_server.app", "sync_server.cli"]
)
def test_the_server_is_not_importable_in_a_client_only_install(
    client_venv: Path, module: str
) -> None:
    result = subprocess.run(
        [str(client_venv / "python"), "-c", f"import {module}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "ModuleNotFoundError" in result.stderr


def test_memsync_server_in_a_client_only_install_says_how_to_get_the_server(
    client_venv: Path,
) -> None:
    result = subprocess.run(
        [str(client_venv / "memsync-server"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == NOT_INSTALLED + "\n"


def test_a_client_only_install_pushes_pulls_reports_status_and_watches(
    client_venv: Path, live: LiveServer, tmp_path: Path
) -> None:
    alice = _client_user("alice", tmp_path, live, client_venv)
    bob = _client_user("bob", tmp_path, live, client_venv)
    # What the client runs by name (a `memsync` it spawns) is found in its own venv first.
    for user in (alice, bob):
        user.env["PATH"] = os.pathsep.join([str(client_venv), user.env["PATH"]])

    alice.write("decisions/db.md", "Use PostgreSQL.\n")
    assert alice.json("push")["uploaded"] == ["decisions/db.md"]
    bob.json("pull")
    assert bob.read("decisions/db.md") == "Use PostgreSQL.\n"
    bob.write("decisions/db.md", "Use PostgreSQL 16.\n")
    status = bob.json("status")
    assert status["modified"] == ["decisions/db.md"]

    watcher = WatchProcess(
        alice.env,
        alice.home,
        "--debounce",
        "0.3",
        "--poll-interval",
        "600",
        command=[str(client_venv / "memsync")],
    )
    try:
        assert wait_until(lambda: (watch_state(alice) or {}).get("live") == "events"), watcher.log()
        bob.json("push")
        assert wait_until(
            lambda: alice.read("decisions/db.md") == "Use PostgreSQL 16.\n", timeout=10
        ), watcher.log()
        code, _ = watcher.terminate()
        assert code == 0, watcher.log()
    finally:
        watcher.kill()
