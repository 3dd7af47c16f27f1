"""A cold pull of many notes (the bulk path: new files created in place, each folder
opened once) writes exactly the server's texts, and still never writes through a
symlink, over a file it did not create, or outside the team dir."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.integration.users import User

NOTES = 60


def push_notes(alice: User) -> dict[str, str]:
    texts = {
        f"topic-{index % 7}/sub-{index % 3}/note-{index:03}.md": f"# note {index}\n\nbody {index}\n"
        for index in range(NOTES)
    }
    texts["top.md"] = "at the top\n"
    texts["linked/x.md"] = "would land outside\n"
    for key, text in texts.items():
        alice.write(key, text)
    alice.json("push")
    return texts


def files_under(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


def test_a_cold_pull_writes_every_note_once_and_leaves_nothing_else(alice: User, bob: User) -> None:
    texts = push_notes(alice)

    result = bob.json("pull")

    assert sorted(result["written"]) == sorted(texts)
    assert files_under(bob.team) == texts  # no temp file, nothing else
    mode = stat.S_IMODE((bob.team / "top.md").stat().st_mode)
    assert mode == 0o644 & ~current_umask()
    again = bob.json("pull")
    assert (again["written"], again["merged"], again["conflicts"]) == ([], [], [])
    status = bob.json("status")
    assert (status["modified"], status["new"], status["server_changed"]) == ([], [], [])


def test_a_cold_pull_refuses_symlinks_and_keeps_a_file_already_there(
    alice: User, bob: User, tmp_path: Path
) -> None:
    texts = push_notes(alice)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("not the team's\n", encoding="utf-8")
    (bob.team / "linked").symlink_to(outside)
    (bob.team / "topic-1").mkdir()
    (bob.team / "topic-1" / "sub-1").mkdir()
    (bob.team / "topic-1" / "sub-1" / "note-001.md").symlink_to(outside / "secret.md")
    bob.write("topic-2/sub-2/note-002.md", "bob's own words\n")

    result = bob.json("pull", expect=3)

    refused = {row["key"] for row in result["refused"]}
    assert refused == {"linked/x.md", "topic-1/sub-1/note-001.md"}
    assert sorted(os.listdir(outside)) == ["secret.md"]
    assert (outside / "secret.md").read_text(encoding="utf-8") == "not the team's\n"
    [conflict] = result["conflicts"]
    assert conflict["key"] == "topic-2/sub-2/note-002.md"
    assert Path(conflict["saved_to"]).read_text(encoding="utf-8") == "bob's own words\n"
    written = files_under(bob.team)
    expected = {key: text for key, text in texts.items() if key not in refused}
    assert written == expected


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
