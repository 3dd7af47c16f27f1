"""The index check in O(changed files): `team_index.health` with a state dir keeps what
it learnt of each file by checksum (`index_facts`), reads only what changed, and says
what a check over every file's text says."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memsync_protocol.checksums import entry_checksum
from sync_client.index import memory as memory_index
from sync_client.index import team as team_index
from sync_client.index.facts import FACTS_FILE
from sync_client.local import LocalScan, scan_team_dir

NOTE = "---\nname: {name}\ndescription: about {name}\n---\n{name} body\n"
FILES = {
    "MEMORY.md": "# Team\n- [a](a.md) — a\n- [gone](gone.md) — gone\n- [more](topic/MEMORY.md)\n"
    "- [chart](chart.txt) — a chart\n",
    "topic/MEMORY.md": "- [b](b.md) — b\n",
    "a.md": NOTE.format(name="a"),
    "topic/b.md": NOTE.format(name="b"),
    "orphan.md": NOTE.format(name="orphan"),
    "bare.md": "no frontmatter\n",
    "chart.txt": "not Markdown, still here\n",
}


@pytest.fixture
def team(tmp_path: Path) -> Path:
    team = tmp_path / "team"
    for key, text in FILES.items():
        path = team / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        os.utime(path, (path.stat().st_mtime - 3600,) * 2)
    return team


def every_text(team: Path, scan: LocalScan) -> dict[str, Any]:
    """The report of `memory_index.check` over every file's text (what the web page
    runs, and what the client ran before it kept facts)."""
    texts = team_index.markdown_texts(team, scan.checksums)
    present = [key for key in scan.checksums if key not in texts]
    return memory_index.check(texts, present=present).as_json()


def test_kept_facts_give_the_report_every_text_gives(team: Path, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    scan = scan_team_dir(team, {})
    expected = every_text(team, scan)
    kinds = sorted((row["kind"], row["key"]) for row in expected["problems"])
    assert kinds == [
        ("dangling", "MEMORY.md"),
        ("no-frontmatter", "bare.md"),
        ("orphan", "bare.md"),
        ("orphan", "orphan.md"),
    ]
    assert team_index.health(team, scan, state_dir).as_json() == expected  # reads all
    assert (state_dir / FACTS_FILE).exists()
    assert team_index.health(team, scan, state_dir).as_json() == expected  # reads none
    assert team_index.health(team, scan).as_json() == expected  # no state dir: reads all


def _facts_file(state_dir: Path) -> dict[str, list[object]]:
    files: dict[str, list[object]] = json.loads((state_dir / FACTS_FILE).read_text())["files"]
    return files


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(
    team: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    scan = scan_team_dir(team, {})
    team_index.health(team, scan, state_dir)
    # What the check keeps for a.md (same checksum) is what it uses: it never opens
    # the file again. (A fact written here by hand shows it.)
    kept = _facts_file(state_dir)
    kept["a.md"][1] = {"missing": ["description"]}
    (state_dir / FACTS_FILE).write_text(json.dumps({"version": 1, "files": kept}))
    report = team_index.health(team, scan, state_dir)
    assert [problem.key for problem in report.of_kind("no-frontmatter")] == ["a.md", "bare.md"]
    # An edit changes the checksum: the file is read and its facts are current.
    (team / "bare.md").write_text(NOTE.format(name="bare"))
    (team / "a.md").write_text(NOTE.format(name="a, edited"))
    scan = scan_team_dir(team, scan.cache)
    report = team_index.health(team, scan, state_dir)
    assert report.of_kind("no-frontmatter") == []
    assert report.as_json() == every_text(team, scan)
    # A deleted note's facts go with it.
    (team / "orphan.md").unlink()
    scan = scan_team_dir(team, scan.cache)
    assert team_index.health(team, scan, state_dir).as_json() == every_text(team, scan)
    assert "orphan.md" not in _facts_file(state_dir)


def _checksum(key: str) -> str:
    return entry_checksum(FILES[key])


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        json.dumps({"version": 99, "files": {}}),
        json.dumps({"version": 1, "files": {"a.md": "a string", "bare.md": []}}),
        json.dumps({"version": 1, "files": {"orphan.md": [_checksum("orphan.md")]}}),
        json.dumps({"version": 1, "files": {"MEMORY.md": ["sha256:x", {"links": [[-1, 2]]}]}}),
    ],
    ids=["not-json", "other-version", "bad-row", "short-row", "bad-links"],
)
def test_a_damaged_facts_file_costs_a_read_never_a_wrong_report(
    team: Path, tmp_path: Path, damage: str
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / FACTS_FILE).write_text(damage)
    scan = scan_team_dir(team, {})
    assert team_index.health(team, scan, state_dir).as_json() == every_text(team, scan)
