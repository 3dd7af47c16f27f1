"""Names as users have them: repo slugs with a leading dot, and file names a Mac wrote.

Every test drives the real `memsync` CLI against a real server on loopback, two users
with their own HOME and team dir (docs/protocol.md 2, 3 "Keys", 4.2).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from sync_client.config import default_team_dir
from tests.integration.users import User, make_user
from tests.liveserver import LiveServer

CAFE = "caf\u00e9.md"  # the key (NFC)
CAFE_NFD = "cafe\u0301.md"  # the same name as macOS writes it
RESUME = "r\u00e9sum\u00e9"
RESUME_NFD = "re\u0301sume\u0301"


def git(cwd: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True, timeout=30)


def checkout_user(name: str, root: Path, live: LiveServer, token: str, origin: str) -> User:
    """A user whose home is a git checkout with remote `origin`: the repo and the team
    dir are derived from it, as for someone who just cloned the repository."""
    user = make_user(name, root, live, token)
    for variable in ("MEMSYNC_REPO", "MEMSYNC_DIR"):
        del user.env[variable]
    git(user.home, "init", "-q")
    git(user.home, "remote", "add", "origin", origin)
    user.team = default_team_dir(user.home.resolve(), user.home)
    return user


def test_a_repo_named_with_a_leading_dot_pushes_and_pulls(live: LiveServer, tmp_path: Path) -> None:
    # An owner-wide token: `acme/*` covers `acme/.github`.
    token = live.token("acme/*", name="team")
    alice = checkout_user("alice", tmp_path, live, token, "git@github.com:acme/.github.git")
    bob = checkout_user("bob", tmp_path, live, token, "https://github.com/Acme/.github")
    alice.write("profile.md", "The org profile lives here.\n")

    assert alice.json("push")["uploaded"] == ["profile.md"]
    assert bob.json("pull")["written"] == ["profile.md"]

    assert bob.read("profile.md") == "The org profile lives here.\n"
    head = live.store.head("acme/.github")
    assert head is not None
    assert head.version == 1
    assert alice.json("doctor")["repo"]["name"] == "acme/.github"


def test_a_token_for_another_owner_does_not_reach_a_dotted_repo(
    live: LiveServer, tmp_path: Path
) -> None:
    token = live.token(".acme/*", name="lookalike")
    alice = checkout_user("alice", tmp_path, live, token, "git@github.com:acme/.github.git")
    alice.write("profile.md", "text\n")
    result = alice.run("push")
    assert result.returncode == 1
    assert "refused the token" in result.stderr
    assert live.store.head("acme/.github") is None


def files_under(root: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(folder, name), root)
        for folder, _, names in os.walk(root)
        for name in names
    )


def test_a_mac_written_name_syncs_under_its_nfc_key_and_stays_one_file(
    alice: User, bob: User
) -> None:
    # Alice's files came from a Mac: their names on disk are decomposed.
    alice.write(CAFE_NFD, "v1\n")
    alice.write(f"{RESUME_NFD}/notes.md", "notes v1\n")
    assert alice.json("push")["uploaded"] == [CAFE, f"{RESUME}/notes.md"]
    assert bob.json("pull")["written"] == [CAFE, f"{RESUME}/notes.md"]
    assert files_under(bob.team) == [CAFE, f"{RESUME}/notes.md"]

    # A teammate edits both; Alice's pull updates her own files, under their own names.
    bob.write(CAFE, "bob's edit\n")
    bob.write(f"{RESUME}/notes.md", "notes v2\n")
    assert bob.json("push")["uploaded"] == [CAFE, f"{RESUME}/notes.md"]
    pulled = alice.json("pull")

    assert pulled["written"] == [CAFE, f"{RESUME}/notes.md"]
    assert pulled["conflicts"] == []
    assert files_under(alice.team) == [CAFE_NFD, f"{RESUME_NFD}/notes.md"]
    assert alice.read(CAFE_NFD) == "bob's edit\n"
    assert alice.read(f"{RESUME_NFD}/notes.md") == "notes v2\n"
    status = alice.json("status")
    assert status["modified"] == status["new"] == status["server_changed"] == []
    assert status["skipped"] == []

    # Her own next edit goes up under the same key.
    alice.write(CAFE_NFD, "alice again\n")
    assert alice.json("push")["uploaded"] == [CAFE]
    assert bob.json("pull")["written"] == [CAFE]
    assert bob.read(CAFE) == "alice again\n"


def test_an_nfd_twin_of_an_nfc_name_is_skipped_with_its_reason(alice: User, bob: User) -> None:
    alice.write(CAFE, "the entry\n")
    alice.write(CAFE_NFD, "its twin\n")
    pushed = alice.json("push")
    assert pushed["uploaded"] == [CAFE]
    assert {"key": CAFE_NFD, "reason": "duplicate-name"} in pushed["skipped"]
    bob.json("pull")
    assert files_under(bob.team) == [CAFE]
    assert bob.read(CAFE) == "the entry\n"
