"""The team index on disk: the guard every index write goes through, the team's index
read from the base store when the file is missing here, `index --fix` over it, and the
watcher's restore of files deleted here (no request: any request fails the test)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from sync_client.api import Api
from sync_client.index import team as team_index
from sync_client.notes import NoteCache, index_view
from sync_client.pull import restore_missing
from sync_client.state import SyncState, load_state, save_state
from sync_client.workspace import Workspace

INDEX = "# Team\n\n- [A](a.md) — alpha\n- [B](b.md) — beta\n"


def no_request(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"no request expected: {request.method} {request.url}")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A synced team dir: the index and two notes, each with its base text kept."""
    api = Api("http://memsync.test", "token", "acme/app", transport=httpx.MockTransport(no_request))
    opened = Workspace.open(tmp_path / "team", tmp_path / "state", api)
    for key, text in {"MEMORY.md": INDEX, "a.md": "alpha\n", "b.md": "beta\n"}.items():
        path = opened.team_dir / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        opened.set_base(key, text)
    opened.save()
    return opened


def test_the_guard_keeps_only_lines_of_live_notes_and_needs_an_old_text() -> None:
    text, kept = team_index.keep_team_lines("MEMORY.md", INDEX, "# new\n", {"a.md"})
    assert text == "# new\n- [A](a.md) — alpha\n"
    assert kept == [{"index": "MEMORY.md", "line": "- [A](a.md) — alpha", "targets": ["a.md"]}]
    assert team_index.keep_team_lines("MEMORY.md", None, "# new\n", {"a.md"}) == ("# new\n", [])
    assert team_index.keep_team_lines("a.md", INDEX, "# new\n", {"a.md"}) == ("# new\n", [])


def test_live_notes_are_the_teams_and_ours_less_those_the_team_deleted() -> None:
    state = SyncState()
    state.bases = {"a.md": "sha256:1", "gone-here.md": "sha256:2"}
    state.deleted_on_server = {"edited.md": {"version": 3}}
    assert team_index.live_notes(state, ["new.md", "edited.md"]) == {
        "a.md",
        "gone-here.md",
        "new.md",
    }


def test_a_missing_index_is_read_from_the_team_and_fixed_on_top_of_it(
    workspace: Workspace,
) -> None:
    team, state_dir = workspace.team_dir, workspace.state_dir
    assert team_index.missing_team_index(team, state_dir) is None  # here: nothing to do
    (team / "MEMORY.md").unlink()
    (team / "c.md").write_text("---\nname: C\ndescription: gamma\n---\n", encoding="utf-8")
    assert team_index.missing_team_index(team, state_dir) == INDEX
    assert team_index.team_text(None) is None

    view = index_view(team, NoteCache(team).notes(), state_dir)
    assert (view.exists, view.from_team, view.text) == (True, True, INDEX)
    assert "missing here, so this is the team's" in view.summary()
    assert "no MEMORY.md" not in view.summary()

    scanned = team_index.scan_alone(team)
    fixed = team_index.fix(team, scanned, team_text=team_index.missing_team_index(team, state_dir))
    assert fixed["restored"] is True
    assert fixed["added"] == ["c.md"]
    assert (team / "MEMORY.md").read_text(encoding="utf-8") == INDEX + "- [C](c.md) — gamma\n"


def test_files_deleted_here_are_written_back_from_the_base_store_without_a_request(
    workspace: Workspace,
) -> None:
    assert restore_missing(workspace) == ([], [])
    (workspace.team_dir / "MEMORY.md").unlink()
    (workspace.team_dir / "a.md").unlink()
    assert restore_missing(workspace) == (["MEMORY.md", "a.md"], [])
    assert (workspace.team_dir / "MEMORY.md").read_text(encoding="utf-8") == INDEX
    # What it wrote is what the stat cache holds: a scan finds no local edit.
    assert workspace.scan().checksums == workspace.state.bases

    # A base whose text the store lacks is left to a pull (which fetches it).
    workspace.state.bases["lost.md"] = "sha256:" + "0" * 64
    workspace.save()
    assert restore_missing(workspace) == ([], ["lost.md"])
    assert not (workspace.team_dir / "lost.md").exists()


def test_a_file_another_process_deleted_for_the_team_is_not_written_back(
    workspace: Workspace,
) -> None:
    """`memsync rm a.md` beside a running watcher: its saved state lost a.md's base."""
    (workspace.team_dir / "a.md").unlink()
    saved = load_state(workspace.state_dir)
    del saved.bases["a.md"]
    save_state(workspace.state_dir, saved)
    assert restore_missing(workspace) == ([], [])
    assert not (workspace.team_dir / "a.md").exists()
