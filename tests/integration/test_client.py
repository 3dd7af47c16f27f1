"""Two users, two team dirs, one real server: the client's semantics end to end.

Every test drives the real `memsync` CLI in a subprocess against a real server on
loopback, with its own HOME, XDG folders and team dir per user.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sync_server.auth import mint_token
from sync_server.config import Settings
from tests.integration.users import REPO, User, make_user
from tests.integration.watchkit import Proxy
from tests.liveserver import LiveServer, run_live_server


def test_push_then_pull_reaches_a_teammate(alice: User, bob: User) -> None:
    alice.write("decisions/db.md", "Use PostgreSQL.\n")
    alice.write("été.md", "accents ✓\n")
    pushed = alice.json("push")
    assert pushed["uploaded"] == ["decisions/db.md", "été.md"]
    assert pushed["conflicts"] == []
    assert pushed["batches"] == 1
    pulled = bob.json("pull")
    assert pulled["written"] == ["decisions/db.md", "été.md"]
    assert bob.read("decisions/db.md") == "Use PostgreSQL.\n"
    assert bob.json("pull")["not_modified"] is True


def test_noop_and_one_file_pushes_send_only_the_delta(alice: User) -> None:
    for index in range(5):
        alice.write(f"n{index}.md", f"note {index}\n")
    assert len(alice.json("push")["uploaded"]) == 5
    noop = alice.json("push")
    assert noop["uploaded"] == []
    assert noop["batches"] == 0
    alice.write("n3.md", "changed\n")
    assert alice.json("push")["uploaded"] == ["n3.md"]


def test_same_key_edited_by_both_is_a_conflict_never_an_overwrite(
    alice: User, bob: User, live: LiveServer
) -> None:
    alice.write("shared.md", "v1\n")
    alice.json("push")
    bob.json("pull")
    bob.write("shared.md", "bob's edit\n")
    bob.json("push")
    alice.write("shared.md", "alice's edit\n")
    alice.write("other.md", "unrelated\n")
    pushed = alice.json("push", expect=3)
    assert pushed["conflicts"] == ["shared.md"]
    assert pushed["uploaded"] == ["other.md"]
    again = alice.run("push")
    assert again.returncode == 3
    assert again.stdout.splitlines()[:2] == [
        "pushed nothing: 1 file(s) changed on the server too",
        "conflict: shared.md changed on the server too; run `memsync pull` to settle it",
    ]
    with live.client(live.token()) as client:
        entries = client.get("/v1/team_memory", params={"repo": REPO}).json()["content"]["entries"]
    assert entries["shared.md"] == "bob's edit\n"
    pulled = alice.json("pull", expect=3)
    assert [item["key"] for item in pulled["conflicts"]] == ["shared.md"]
    saved = Path(pulled["conflicts"][0]["saved_to"])
    assert saved.read_text() == "alice's edit\n"
    assert not saved.is_relative_to(alice.team)
    assert alice.read("shared.md") == "bob's edit\n"
    listed = alice.json("conflicts")["conflicts"]
    assert [row["key"] for row in listed] == ["shared.md"]


def test_pull_keeps_a_local_edit_the_server_did_not_change(alice: User, bob: User) -> None:
    alice.write("a.md", "1\n")
    alice.write("b.md", "1\n")
    alice.json("push")
    bob.json("pull")
    bob.write("a.md", "bob local\n")
    alice.write("b.md", "2\n")
    alice.json("push")
    pulled = bob.json("pull")
    assert pulled["written"] == ["b.md"]
    assert pulled["conflicts"] == []
    assert bob.read("a.md") == "bob local\n"
    assert bob.json("status")["modified"] == ["a.md"]
    # Also when the state is lost and the pull has to compare everything.
    for state in (bob.home / ".state").rglob("state.json"):
        state.unlink()
    full = bob.json("pull", expect=3)
    assert bob.read("b.md") == "2\n"
    assert [item["key"] for item in full["conflicts"]] == ["a.md"]
    assert Path(full["conflicts"][0]["saved_to"]).read_text() == "bob local\n"


def test_local_delete_deletes_nothing_and_pull_restores(alice: User) -> None:
    alice.write("keep.md", "precious\n")
    alice.json("push")
    (alice.team / "keep.md").unlink()
    assert alice.json("push")["uploaded"] == []
    assert alice.json("status")["deleted_locally"] == ["keep.md"]
    alice.write("touch.md", "x\n")
    alice.json("push")
    alice.json("pull")
    assert alice.read("keep.md") == "precious\n"


def test_rm_deletes_for_the_team(alice: User, bob: User) -> None:
    alice.write("old.md", "stale\n")
    alice.write("edited.md", "v1\n")
    alice.json("push")
    bob.json("pull")
    bob.write("edited.md", "bob is still editing\n")
    removed = alice.json("rm", "old.md")
    assert removed["key"] == "old.md"
    assert not (alice.team / "old.md").exists()
    alice.json("rm", "edited.md")
    pulled = bob.json("pull", expect=3)  # bob's edit of a deleted note waits for him
    assert pulled["deleted"] == ["old.md"]
    assert pulled["conflicts"] == [{"key": "edited.md", "kind": "deleted", "saved_to": None}]
    assert not (bob.team / "old.md").exists()
    assert bob.read("edited.md") == "bob is still editing\n"
    history = alice.json("log", "old.md")["versions"]
    assert [item["op"] for item in history] == ["put", "delete"]
    restored = alice.json("restore", "old.md", "--version", "1")
    assert restored["key"] == "old.md"
    assert alice.read("old.md") == "stale\n"


def test_a_file_with_a_secret_is_skipped_and_reported_never_its_value(alice: User) -> None:
    token = mint_token().secret
    alice.write("creds.md", f"# Bot\n\nuse {token}\n")
    alice.write("fine.md", "ok\n")
    result = alice.run("push", "--json")
    assert result.returncode == 3
    pushed = json.loads(result.stdout)
    assert pushed["uploaded"] == ["fine.md"]
    [skip] = pushed["skipped"]
    assert skip["key"] == "creds.md"
    assert skip["reason"] == "secret"
    assert skip["line"] == 3
    assert token not in result.stdout + result.stderr
    human = alice.run("push")
    assert human.returncode == 3
    assert "creds.md" in human.stdout
    assert token not in human.stdout + human.stderr


def test_too_many_entries_leaves_out_the_alphabetically_last(
    tmp_path: Path, sqlite_database_url: str
) -> None:
    with run_live_server(Settings(database_url=sqlite_database_url, max_entries=3)) as live:
        alice = make_user("alice", tmp_path, live, live.token())
        for name in ("e", "a", "d", "b", "c"):
            alice.write(f"{name}.md", name)
        first = alice.json("push", expect=3)
        assert sorted(first["uploaded"]) == ["a.md", "b.md", "c.md"]
        left_out = sorted(row["key"] for row in first["skipped"])
        assert left_out == ["d.md", "e.md"]
        again = alice.json("push", expect=3)
        assert again["uploaded"] == []
        assert sorted(row["key"] for row in again["skipped"]) == ["d.md", "e.md"]


def test_sync_is_pull_then_push(alice: User, bob: User) -> None:
    alice.write("a.md", "from alice\n")
    alice.json("push")
    bob.write("b.md", "from bob\n")
    synced = bob.json("sync")
    assert synced["pull"]["written"] == ["a.md"]
    assert synced["push"]["uploaded"] == ["b.md"]


def test_global_options_work_before_and_after_the_subcommand(alice: User) -> None:
    alice.write("a.md", "x\n")
    env = dict(alice.env)
    repo = env.pop("MEMSYNC_REPO")
    plain = User(alice.name, alice.home, alice.team, env)
    before = plain.run("--repo", repo, "--json", "push")
    assert before.returncode == 0, before.stderr
    after = plain.run("push", "--repo", repo, "--json")
    assert json.loads(after.stdout)["uploaded"] == []


@pytest.mark.parametrize("team_dir", ["relative/dir", "/", "~", "~/..", "/a"])
def test_a_refused_team_dir_is_a_usage_error(alice: User, team_dir: str) -> None:
    env = {**alice.env, "MEMSYNC_DIR": team_dir}
    result = User(alice.name, alice.home, alice.team, env).run("push")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_a_credentials_folder_is_refused_as_the_team_dir_and_nothing_is_sent(
    alice: User, live: LiveServer
) -> None:
    ssh = alice.home / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "config").write_text("Host github.com\n  User git\n")
    (ssh / "known_hosts").write_text("github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI\n")
    (ssh / "id_ed25519.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI alice@laptop\n")
    before = sorted(path.name for path in ssh.iterdir())
    user = User(alice.name, alice.home, ssh, {**alice.env, "MEMSYNC_DIR": str(ssh)})
    line = (
        f"memsync: MEMSYNC_DIR: team dir '{ssh}' is refused: ~/.ssh holds SSH keys and config;"
        " choose another team dir (--dir or MEMSYNC_DIR)"
    )
    for command in (["push"], ["push", "--dry-run"], ["pull"], ["status"], ["enable"]):
        result = user.run(*command)
        assert (result.returncode, result.stderr.splitlines()) == (2, [line]), command
        assert result.stdout == ""
    error = json.loads(user.run("push", "--json").stdout)["error"]
    assert error == {"type": "config", "message": line.removeprefix("memsync: ")}
    # A symlink to it is it; a folder holding a private key is refused like it.
    os.symlink(ssh, alice.home / "notes")
    linked = alice.run("--dir", str(alice.home / "notes"), "push")
    assert linked.returncode == 2
    assert linked.stderr.splitlines() == [
        f"memsync: --dir: team dir '{alice.home / 'notes'}' is refused: it resolves to ~/.ssh,"
        " which holds SSH keys and config; choose another team dir (--dir or MEMSYNC_DIR)"
    ]
    doctor = user.run("doctor")
    assert doctor.returncode == 1  # a check failed: doctor's documented exit code
    assert (
        f"FAIL team dir: MEMSYNC_DIR: team dir '{ssh}' is refused: ~/.ssh holds SSH keys and"
        " config  -> export MEMSYNC_DIR=/absolute/folder (a folder of its own, e.g."
        " ~/memsync/app)"
    ) in doctor.stdout.splitlines()
    (alice.team / "notes.md").write_text("a note\n")
    (alice.team / "deploy").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n")
    rows = {row["check"]: row for row in alice.json("doctor", expect=1)["checks"]}
    assert rows["team dir"]["detail"].endswith("is refused: it holds a private key (deploy)")
    assert rows["team dir"]["fix"].startswith(f"move {alice.team / 'deploy'} out of that folder")
    assert alice.run("push").returncode == 2
    # Nothing reached the server, nothing was written into the folder, nothing enrolled.
    with live.client(live.token()) as client:
        answer = client.get("/v1/team_memory", params={"repo": REPO})
    assert answer.status_code == 404
    assert sorted(path.name for path in ssh.iterdir()) == before
    assert not (alice.home / ".config" / "memsync" / "repos.toml").exists()


def test_unreachable_server_is_one_line_exit_1(alice: User) -> None:
    env = {**alice.env, "MEMSYNC_SERVER": "http://127.0.0.1:9"}
    result = User(alice.name, alice.home, alice.team, env).run("pull")
    assert result.returncode == 1
    assert result.stderr.startswith("memsync: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_bad_token_is_exit_1(alice: User) -> None:
    env = {**alice.env, "MEMSYNC_TOKEN": mint_token().secret}
    result = User(alice.name, alice.home, alice.team, env).run("pull")
    assert result.returncode == 1
    assert "refused the token" in result.stderr


def test_login_saves_credentials_0600_and_they_are_used(alice: User) -> None:
    env = dict(alice.env)
    token = env.pop("MEMSYNC_TOKEN")
    server = env.pop("MEMSYNC_SERVER")
    user = User(alice.name, alice.home, alice.team, env)
    assert user.run("pull").returncode == 2
    login = user.run("login", "--server", server, "--token", token)
    assert login.returncode == 0, login.stderr
    credentials = alice.home / ".config" / "memsync" / "credentials.toml"
    assert credentials.stat().st_mode & 0o777 == 0o600
    assert user.run("pull").returncode == 0


def test_doctor_reports_each_check(alice: User) -> None:
    report = alice.json("doctor")
    rows = report["checks"]
    assert report["ok"] is True
    assert [row["check"] for row in rows] == [
        "config",
        "repo",
        "team dir",
        "server",
        "auth",
        "clock",
        "index",
        "claude code",
    ]
    assert all(row["ok"] for row in rows)


def test_doctor_through_a_proxy_sending_two_date_headers(alice: User, live: LiveServer) -> None:
    """The proxy answers with its own `Date` and the server's: the clock is judged from
    the first, never a traceback."""
    proxy = Proxy(live.base_url)
    try:
        alice.env["MEMSYNC_SERVER"] = proxy.url
        shown = alice.run("doctor")
    finally:
        proxy.close()
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "Traceback" not in shown.stderr
    [clock] = [line for line in shown.stdout.splitlines() if "clock" in line]
    assert "s from the server's clock" in clock


def test_diff_shows_local_against_base_and_against_server(alice: User, bob: User) -> None:
    alice.write("a.md", "line one\nline two\n")
    alice.json("push")
    bob.json("pull")
    bob.write("a.md", "line one\nbob's line\n")
    bob.json("push")
    alice.write("a.md", "line one\nalice's line\n")
    [item] = alice.json("diff", "a.md")["diffs"]
    assert item["changed_locally"] is True
    assert item["changed_on_server"] is True
    assert "-line two\n+alice's line\n" in item["against_base"]
    assert "-bob's line\n+alice's line\n" in item["against_server"]
    human = alice.run("diff")
    assert human.returncode == 0
    assert "local against base" in human.stdout
