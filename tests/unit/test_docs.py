"""Every command of both CLIs, and every server setting, is documented in the README."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx
import pytest

from sync_client.cli import main as client_main
from sync_server.cli import main as server_main
from sync_server.config import Settings
from tests.liveserver import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def command_paths(group: click.Group, prefix: str) -> list[str]:
    paths = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, path))
        else:
            paths.append(path)
    return paths


@pytest.mark.parametrize(
    "command",
    command_paths(server_main, "memsync-server") + command_paths(client_main, "memsync"),
)
def test_command_is_in_readme(command: str) -> None:
    assert f"`{command}" in README, f"README does not document `{command}`"


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_setting_is_in_readme(field: str) -> None:
    variable = f"MEMSYNC_{field.upper()}"
    assert f"| `{variable}` |" in README, f"README's Settings table lacks `{variable}`"


def test_the_quick_start_puts_memsync_on_path(tmp_path: Path) -> None:
    """A new user runs `scripts/dev-server` (its set-up step already done) and pastes
    what it prints into a fresh shell, whose PATH lacks the checkout's .venv: `memsync`
    is found, and the printed `memsync login` line saves the server and token."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("needs the checkout's virtualenv")
    checkout = tmp_path / "my checkout"  # a space: the printed lines still paste as words
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "dev-server", checkout / "scripts" / "dev-server")
    (checkout / "scripts" / "setup").write_text("#!/bin/sh\n", encoding="utf-8")
    (checkout / "scripts" / "setup").chmod(0o755)
    (checkout / ".venv").symlink_to(sys.prefix)
    home = tmp_path / "home"
    home.mkdir()
    shell_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    port = free_port()
    server = subprocess.Popen(
        ["bash", str(checkout / "scripts" / "dev-server")],
        env={**shell_env, "MEMSYNC_PORT": str(port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None
        printed = []
        for line in server.stdout:
            printed.append(line)
            if line.startswith("Try it:"):
                break
        commands = [line.strip() for line in printed if line.startswith("    ")]
        exports = [line for line in commands if line.startswith("export ")]
        assert [line.split("=", 1)[0] for line in exports] == [
            "export PATH",
            "export MEMSYNC_SERVER",
            "export MEMSYNC_TOKEN",
        ]
        (login,) = [line for line in commands if " login " in line]
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not _answers(url) and time.monotonic() < deadline:
            time.sleep(0.1)
        script = "\n".join([*exports, f"cd {shlex.quote(str(home))}", "memsync --version"])
        pasted = subprocess.run(
            ["bash", "-euc", script], env=shell_env, capture_output=True, text=True, timeout=60
        )
        assert pasted.returncode == 0, pasted.stderr
        assert pasted.stdout.startswith("memsync, version ")
        saved = subprocess.run(
            ["bash", "-euc", login], env=shell_env, capture_output=True, text=True, timeout=60
        )
        assert saved.returncode == 0, saved.stderr
        credentials = (home / ".config" / "memsync" / "credentials.toml").read_text()
        assert f'server = "{url}"' in credentials
        (page,) = [line.split()[2] for line in printed if line.startswith("Web page: ")]
        assert httpx.get(page, timeout=10).status_code == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        if server.stdout is not None:
            server.stdout.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
