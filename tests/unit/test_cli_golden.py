"""`memsync` says the same words as recorded: every command's help and a few usage errors.

The files under tests/unit/golden/ were recorded from the command line before it was
split into the `sync_client.cli` package; a move that changes one word, option or exit
code fails here. Rerecord on purpose only: `MEMSYNC_RECORD_GOLDEN=1 pytest` this file.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sync_client.cli import main

GOLDEN = Path(__file__).with_name("golden")
RECORD = os.environ.get("MEMSYNC_RECORD_GOLDEN") == "1"


def command_words(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under `group`, as the words that name it."""
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        words = (*prefix, name)
        found.append(words)
        if isinstance(command, click.Group):
            found.extend(command_words(command, words))
    return found


TARGET = ["--server", "http://127.0.0.1:9", "--token", "t", "--repo", "o/r", "--dir", "TMP/team"]
# (golden file, arguments): usage and configuration errors answered before any network.
SAMPLES = [
    ("usage-unknown-command", ["nosuch"]),
    ("usage-unknown-option", ["push", "--nosuch"]),
    ("usage-setup-agent", ["setup", "emacs"]),
    ("usage-restore-both", ["restore", "a.md", "2", "--version", "3"]),
    ("usage-snapshot-no-agent", ["snapshot", "check"]),
    ("config-no-token-json", ["--json", "--server", "http://127.0.0.1:9", "pull"]),
    ("config-bad-timeout-json", ["pull", "--json", *TARGET]),
    ("index-empty-json", ["index", "--json", "--dir", "TMP/team"]),
    ("index-empty", ["index", "--dir", "TMP/team"]),
    ("conflicts-none-json", ["conflicts", "--json", *TARGET]),
    ("status-all-nothing", ["status", "--all"]),
]


def run(arguments: list[str], env: dict[str, str]) -> str:
    """What a person sees: the exit code, stdout and stderr of `memsync ARGUMENTS`."""
    result = CliRunner().invoke(main, arguments, prog_name="memsync", env=env, terminal_width=80)
    return f"exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


def check(name: str, seen: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if RECORD:
        path.write_text(seen, encoding="utf-8")
    assert seen == path.read_text(encoding="utf-8"), name


@pytest.mark.parametrize(
    "words", [(), *command_words(main)], ids=lambda words: " ".join(words) or "memsync"
)
def test_help_is_as_recorded(words: tuple[str, ...]) -> None:
    check("help-" + "-".join(("memsync", *words)), run([*words, "--help"], {}))


def test_no_recorded_help_is_left_over() -> None:
    """A command removed or renamed leaves its recorded help behind: it must go too."""
    expected = {"help-" + "-".join(("memsync", *words)) for words in [(), *command_words(main)]}
    recorded = {path.stem for path in GOLDEN.glob("help-*.txt")}
    assert recorded == expected


@pytest.mark.parametrize(("name", "arguments"), SAMPLES, ids=[name for name, _ in SAMPLES])
def test_errors_are_as_recorded(name: str, arguments: list[str], tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "MEMSYNC_TIMEOUT": "never",
        "MEMSYNC_TOKEN": "",
        "MEMSYNC_SERVER": "",
        "MEMSYNC_REPO": "",
        "MEMSYNC_DIR": "",
    }
    (tmp_path / "team").mkdir()
    arguments = [word.replace("TMP", str(tmp_path)) for word in arguments]
    check(name, run(arguments, env).replace(str(tmp_path), "TMP"))
