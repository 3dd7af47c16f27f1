"""The pure parts of personal spaces: the server's internal ids and persons, the
client's `personal.toml` and the folders it syncs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sync_client.config import Enrollment
from sync_client.errors import ConfigError
from sync_client.personal import (
    is_personal_on,
    private_folder,
    read_personal,
    set_personal,
    space_words,
    synced_folders,
)
from sync_client.watch.personal import personal_rows
from sync_server.auth import scope_allows
from sync_server.personal import (
    is_personal,
    normalize_person,
    owner_person,
    parse_space,
    proposal_owner,
    space_id,
    spoken,
    wire_name,
    wire_repo,
)


def test_a_space_id_parses_back_and_no_scope_reaches_it() -> None:
    assert space_id("alice", "acme/app") == "~alice/acme/app"
    assert parse_space("~alice/acme/app") == ("alice", "acme/app")
    assert parse_space(space_id("alice", None)) == ("alice", None)
    assert is_personal("~alice/~")
    assert not is_personal("acme/app")
    for pattern in ("*", "~alice/*", "~alice/acme/app"):
        assert not scope_allows(pattern, "~alice/acme/app")


def test_answers_name_a_space_as_its_person_knows_it() -> None:
    """Never the internal id, which names the person: the request's own name on the
    wire, and words in a message."""
    assert wire_name("~alice/acme/app") == "acme/app"
    assert wire_name("~alice/~") == "~"
    assert wire_name("acme/app") == "acme/app"
    assert spoken("~alice/acme/app") == "your personal memory for acme/app"
    assert spoken("~alice/~") == "your agent memory"
    assert spoken("acme/app") == "acme/app"


@pytest.mark.parametrize("bad", ["", "a/b", "~a", "-x", "a b", "x" * 101])
def test_a_person_name_cannot_spell_a_separator(bad: str) -> None:
    with pytest.raises(ValueError, match="a person must be"):
        normalize_person(bad)


def test_a_token_without_a_person_owns_its_proposals_alone() -> None:
    """Only `--person` gives a token a person: one named `alice` without it never
    shares alice's proposals."""
    assert normalize_person(" Alice@Acme ") == "alice@acme"
    assert proposal_owner("alice-laptop", "alice") == "alice"
    assert proposal_owner("alice", None) == "~alice" != proposal_owner("x", "alice")
    assert owner_person(proposal_owner("alice", None)) is None
    assert owner_person(proposal_owner("ci bot", "ops")) == "ops"
    assert wire_repo("~") == "~"
    assert wire_repo("Acme/App") == "acme/app"


def test_personal_toml_turns_a_repo_on_and_off(tmp_path: Path) -> None:
    assert read_personal(tmp_path) == []
    assert set_personal(tmp_path, "https://m.example", "acme/app", on=True)
    assert not set_personal(tmp_path, "https://m.example", "acme/app", on=True)
    assert is_personal_on(tmp_path, "https://m.example", "acme/app")
    assert not is_personal_on(tmp_path, "https://m.example", "acme/other")
    assert set_personal(tmp_path, "https://m.example", "acme/app", on=False)
    assert read_personal(tmp_path) == []
    (tmp_path / "personal.toml").write_text('[[personal]]\nrepo = "x/y"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="personal 1"):
        read_personal(tmp_path)


def test_only_claude_codes_team_dir_has_a_private_folder(tmp_path: Path) -> None:
    team = tmp_path / "projects" / "p" / "memory" / "team"
    assert private_folder(team) == team.parent
    with pytest.raises(ConfigError, match="personal sync needs"):
        private_folder(tmp_path / "team")
    server, repo = "https://m.example", "acme/app"
    assert synced_folders(server, repo, team, None, tmp_path) == []
    set_personal(tmp_path, server, repo, on=True)
    rows = synced_folders(server, repo, team, None, tmp_path)
    assert [row["space"] for row in rows] == [
        "the team's memory of acme/app",
        "your personal memory for acme/app",
    ]


def test_a_space_is_named_as_its_person_knows_it_never_by_its_id() -> None:
    assert space_words("acme/app", None) == "the team's memory of acme/app"
    assert space_words("acme/app", "personal") == "your personal memory for acme/app"
    assert space_words("~", "personal") == "your agent memory"


def test_status_all_rows_are_each_personal_folder_and_the_agent_memory_once(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state")}
    server = "https://m.example"
    projects = tmp_path / ".claude" / "projects"
    enrolled = [
        Enrollment(server, repo, projects / repo.replace("/", "-") / "memory" / "team")
        for repo in ("acme/app", "acme/lib", "acme/off")
    ]
    assert personal_rows(enrolled, tmp_path, env) == []
    for repo in ("acme/app", "acme/lib"):
        set_personal(tmp_path, server, repo, on=True)
    rows = personal_rows(enrolled, tmp_path, env)
    assert [(row["space"], row["repo"], row["dir"]) for row in rows] == [
        *(
            (f"your personal memory for {repo}", repo, f"{team.parent} (minus team/)")
            for repo, team in [(item.repo, item.team_dir) for item in enrolled[:2]]
        ),
        ("your agent memory", None, str(tmp_path / ".claude" / "agent-memory")),
    ]
    assert len({row["state_dir"] for row in rows}) == 3
