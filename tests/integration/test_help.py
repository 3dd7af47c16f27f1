"""`memsync --help` and every command's help: order, whole lines, KEY, examples, exit
codes, and no option a command does not use.

Help and usage errors through click's CliRunner on the real command group; the global
options through the real CLI against a real server on loopback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from sync_client.cli import COMMAND_ORDER, main
from tests.integration.users import User

GLOBAL_FLAGS = ("--server", "--token", "--repo", "--dir", "--json")


def help_of(*command: str, columns: int = 80) -> str:
    result = CliRunner().invoke(
        main, [*command, "--help"], prog_name="memsync", env={"COLUMNS": str(columns)}
    )
    assert result.exit_code == 0, result.output
    return result.output


def every_command() -> list[tuple[str, ...]]:
    """Each command's path: `("push",)`, `("snapshot", "export")`, ..."""
    found: list[tuple[str, ...]] = []
    for name, command in main.commands.items():
        found.append((name,))
        if isinstance(command, click.Group):
            found.extend((name, sub) for sub in command.commands)
    return sorted(found)


def commands_section(text: str) -> list[tuple[str, str]]:
    """(name, description) rows of a help's Commands section, wrapped lines joined."""
    section = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    rows: list[tuple[str, str]] = []
    for line in section.splitlines():
        match = re.match(r"  (\S+)\s+(.*)", line)
        if match and not line.startswith("   "):
            rows.append((match.group(1), match.group(2)))
        else:
            name, words = rows[-1]
            rows[-1] = (name, f"{words} {line.strip()}")
    return rows


def options_of(*command: str) -> set[str]:
    return set(re.findall(r"^\s+(--[a-z-]+)", help_of(*command), flags=re.MULTILINE))


@pytest.mark.parametrize("columns", [80, 60, 200])
def test_commands_are_listed_in_workflow_order_with_whole_descriptions(columns: int) -> None:
    text = help_of(columns=columns)
    rows = commands_section(text)
    names = [name for name, _ in rows]
    assert names == [name for name in COMMAND_ORDER if name in main.commands] + sorted(
        set(main.commands) - set(COMMAND_ORDER)
    )
    assert names[:3] == ["login", "doctor", "pull"] or names[:4] == [
        "login",
        "logout",
        "doctor",
        "pull",
    ]
    assert names[-3:] == ["watch", "snapshot", "scan"]
    # Nothing is cut short (the usage line's `[ARGS]...` is click's own notation).
    assert "..." not in text.split("\n", 1)[1]
    for name, words in rows:
        first = " ".join((main.commands[name].help or "").split("\n\n")[0].split())
        assert words == first, name


def test_the_help_says_what_a_key_is_and_ends_with_examples() -> None:
    text = help_of()
    flat = " ".join(text.split())
    assert "A KEY is a file's path relative to the team dir, with `/`" in flat
    assert "`notes/db.md`" in flat
    examples = text.rsplit("Examples:\n", 1)[1]
    assert text.index("Commands:") < text.index("Examples:")
    lines = [line.strip() for line in examples.strip().splitlines()]
    assert len(lines) >= 4
    assert all(line.startswith("memsync ") for line in lines)
    assert max(len(line) for line in text.splitlines()) <= 80  # fits 80 columns


def test_snapshot_lists_its_commands_in_order_uncut() -> None:
    text = help_of("snapshot")
    assert [name for name, _ in commands_section(text)] == ["export", "check", "seed"]
    assert "..." not in text.split("\n", 1)[1]


@pytest.mark.parametrize("command", every_command(), ids=" ".join)
def test_every_command_lists_its_exit_codes(command: tuple[str, ...]) -> None:
    text = help_of(*command)
    assert "Exit codes:" in text
    listed = re.findall(r"^\s+([0-3])  \S", text.split("Exit codes:", 1)[1], flags=re.MULTILINE)
    assert listed[0] == "0"
    assert "2" in listed  # a usage error is possible everywhere
    assert listed == sorted(set(listed))


def test_scan_takes_only_json() -> None:
    assert options_of("scan") == {"--json"}  # and -h, --help
    runner = CliRunner()
    for flag in ("--server", "--token", "--repo", "--dir"):
        result = runner.invoke(main, ["scan", flag, "x", "."])
        assert result.exit_code == 2, (flag, result.output)
        error = result.output.strip().splitlines()[-1]
        assert error.startswith("Error: No such option")
        assert flag in error


def test_no_command_offers_an_option_it_does_not_use() -> None:
    assert options_of("login") >= {"--server", "--token", "--json"}
    # login reports whether the token reaches a repo (--repo), but has no team dir.
    assert "--dir" not in options_of("login")
    assert "--json" in options_of("logout")
    assert options_of("logout").isdisjoint({"--server", "--token", "--repo", "--dir"})
    assert "--token" not in options_of("disable")
    assert options_of("disable") >= {"--server", "--repo", "--dir", "--json"}
    for subcommand in ("check", "seed"):
        assert options_of("snapshot", subcommand).isdisjoint(
            {"--server", "--token", "--repo", "--dir"}
        )
    for command in ("push", "pull", "sync", "status", "diff", "doctor", "watch", "enable"):
        assert options_of(command) >= set(GLOBAL_FLAGS), command
    # The group still takes all of them, before any command.
    assert options_of() >= set(GLOBAL_FLAGS)


def test_scan_json_is_one_object_also_with_the_flag_before_the_command(tmp_path: Path) -> None:
    (tmp_path / "clean.md").write_text("nothing to see\n")
    runner = CliRunner()
    for args in (["scan", "--json", str(tmp_path)], ["--json", "scan", str(tmp_path)]):
        result = runner.invoke(main, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output) == {"findings": []}


def test_global_options_before_the_command_still_reach_the_server(alice: User, bob: User) -> None:
    alice.write("notes/db.md", "Use PostgreSQL.\n")
    env = {name: value for name, value in alice.env.items() if name != "MEMSYNC_DIR"}
    moved = User(alice.name, alice.home, alice.team, env)
    result = moved.run("--dir", str(alice.team), "--json", "push")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["uploaded"] == ["notes/db.md"]
    assert bob.json("pull")["written"] == ["notes/db.md"]


def test_a_command_the_order_does_not_name_comes_last() -> None:
    from sync_client.cli._common import _HelpGroup

    group = _HelpGroup(name="tool", order=("pull", "logout", "push"))
    for name in ("zap", "push", "extra", "pull"):
        group.add_command(click.Command(name, help=f"The {name} command, described in full."))
    result = CliRunner().invoke(group, ["--help"])
    assert [name for name, _ in commands_section(result.output)] == [
        "pull",
        "push",
        "extra",
        "zap",
    ]
