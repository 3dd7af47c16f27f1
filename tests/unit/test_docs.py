"""Every command of both CLIs, and every server setting, is documented in the README."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from sync_client.cli import main as client_main
from sync_server.cli import main as server_main
from sync_server.config import Settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


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
