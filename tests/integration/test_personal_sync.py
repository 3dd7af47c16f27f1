"""Your own memory on every machine, with the real CLI and watchers: alice's laptop and
desktop (two HOMEs, two tokens of person alice, the repo's team dir at different
paths) share her private memory folder and her agent memory; nothing of it leaves a
machine until she turns it on; a credential in a private note never leaves."""

from __future__ import annotations

import functools
import json
import random
import string
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

from tests.integration.conftest import API, REPO
from tests.integration.users import User, make_user
from tests.integration.watchkit import Proxy, WatchProcess, server_entries, wait_until
from tests.liveserver import LiveServer

PERSONAL = {"repo": REPO, "space": "personal"}


def alice_machine(live: LiveServer, root: Path, name: str, project: str) -> User:
    """A machine of alice: her own HOME, a token of person alice, the team dir in
    Claude Code's layout (`.../memory/team`) below a project folder of its own."""
    user = make_user(name, root, live, live.token(REPO, name=name, person="alice"))
    user.team = user.home / ".claude" / "projects" / project / "memory" / "team"
    user.team.mkdir(parents=True)
    user.env["MEMSYNC_DIR"] = str(user.team)
    return user


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _both_lines(index: Path) -> bool:
    text = _text(index)
    return "laptop line" in text and "desk line" in text


def test_private_and_agent_memory_reach_the_other_machine(
    live: LiveServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    laptop = alice_machine(live, tmp_path, "alice-laptop", "-home-alice-src-app")
    desktop = alice_machine(live, tmp_path, "alice-desktop", "-work-clones-app")
    # A project's own agent memory (in the repository, shared by git) is never touched.
    project_agents = laptop.home / "src" / "app" / ".claude" / "agent-memory" / "reviewer"
    project_agents.mkdir(parents=True)
    (project_agents / "team-notes.md").write_text("shared by git\n", encoding="utf-8")
    laptop.write("team.md", "for the team\n")
    for machine in (laptop, desktop):
        enabled = machine.run("enable", "--personal")
        assert enabled.returncode == 0, enabled.stderr
        assert "personal: syncs your private memory folder" in enabled.stdout
        watchers.append(WatchProcess(machine.env, machine.home, "--all", "--debounce", "0.2"))
    laptop_private, desktop_private = laptop.team.parent, desktop.team.parent
    (laptop_private / "notes").mkdir()
    (laptop_private / "notes" / "build.md").write_text("use make -j8\n", encoding="utf-8")
    assert wait_until(lambda: _text(desktop_private / "notes" / "build.md") == "use make -j8\n")
    # Both machines append to the private index at once: both lines are kept.
    for folder, line in ((laptop_private, "- laptop line\n"), (desktop_private, "- desk line\n")):
        (folder / "MEMORY.md").write_text("# Memory\n" + line, encoding="utf-8")
    for folder in (laptop_private, desktop_private):
        assert wait_until(functools.partial(_both_lines, folder / "MEMORY.md")), (
            _text(folder / "MEMORY.md"),
            [w.log() for w in watchers],
        )
    # The user-scope agent memory goes to alice's global space.
    agent_notes = laptop.home / ".claude" / "agent-memory" / "reviewer" / "notes.md"
    agent_notes.parent.mkdir(parents=True)
    agent_notes.write_text("prefer small diffs\n", encoding="utf-8")
    synced = desktop.home / ".claude" / "agent-memory" / "reviewer" / "notes.md"
    assert wait_until(lambda: _text(synced) == "prefer small diffs\n")
    # The team dir is the team's: nothing private in it, and the private folder's
    # `team/` never went to the personal space.
    with live.client(live.token(REPO, name="alice-check", person="alice")) as client:
        personal = client.get(API, params=PERSONAL).json()["content"]["entries"]
        assert sorted(personal) == ["MEMORY.md", "notes/build.md"]
        team = client.get(API, params={"repo": REPO}).json()["content"]["entries"]
        assert sorted(team) == ["team.md"]
    assert sorted(p.name for p in project_agents.iterdir()) == ["team-notes.md"]
    assert wait_until(lambda: _text(desktop.team / "team.md") == "for the team\n")
    status = desktop.run("status")
    assert f"synced: {desktop_private} (minus team/) <-> your personal memory for {REPO}" in (
        status.stdout
    )
    shown = desktop.run("show", "--personal", "notes/build.md")
    assert shown.returncode == 0, shown.stderr
    assert "use make -j8" in shown.stdout
    assert desktop.run("show", "notes/build.md").returncode != 0  # not a team note
    logged = desktop.run("log", "--personal", "--json")
    log = json.loads(logged.stdout)
    assert {key for commit in log["commits"] for key in commit["keys"]} >= {"notes/build.md"}
    # Every word said on the way names her spaces as she knows them, never by the
    # server's ids (`~alice/acme/app`, `~alice/~`): the watchers' lines included.
    said = [status.stdout, shown.stderr, logged.stdout, *(w.log() for w in watchers)]
    assert "your personal memory for acme/app: pushed" in "".join(said)
    assert "your agent memory: pushed" in "".join(said)
    named = [line for text in said for line in text.splitlines() if "~" in line]
    assert not named, named


# What lives only on alice's laptop while personal sync is off: names and texts that
# must never be seen in a request.
PRIVATE = {
    "MEMORY.md": "- private index line\n",
    "private-note.md": "mine only, from the laptop\n",
}
AGENT_NOTE = ("reviewer/agent-habit.md", "agent habit: read the diff twice\n")


def _team_only(sent: list[tuple[str, str, bytes]]) -> list[str]:
    """What in `sent` is not a team-space request of REPO, or carries a private key
    name or text: one line each, none expected."""
    wrong = []
    private = [*PRIVATE, *PRIVATE.values(), *AGENT_NOTE]
    private.remove("MEMORY.md")  # (a team may have one too: its text tells them apart)
    for method, target, body in sent:
        query = parse_qs(urlsplit(target).query)
        if query.get("space") or query.get("repo", [REPO]) != [REPO]:
            wrong.append(f"{method} {target}: not the team's space of {REPO}")
        for marker in private:
            if marker.encode() in body or quote(marker) in target or marker in target:
                wrong.append(f"{method} {target}: carries {marker!r}")
    return wrong


def test_personal_off_sends_only_team_requests_and_secrets_never_leave(
    live: LiveServer, tmp_path: Path, watchers: list[WatchProcess]
) -> None:
    laptop = alice_machine(live, tmp_path, "alice-laptop", "-home-alice-src-app")
    private = laptop.team.parent
    proxy = Proxy(live.base_url)  # every request of the laptop, recorded on the wire
    try:
        laptop.env["MEMSYNC_SERVER"] = proxy.url
        for key, text in PRIVATE.items():
            (private / key).write_text(text, encoding="utf-8")
        agent_note = laptop.home / ".claude" / "agent-memory" / AGENT_NOTE[0]
        agent_note.parent.mkdir(parents=True)
        agent_note.write_text(AGENT_NOTE[1], encoding="utf-8")
        # Off (the default): the watcher and every command send the team dir alone.
        assert laptop.run("enable").returncode == 0
        watchers.append(WatchProcess(laptop.env, laptop.home, "--all", "--debounce", "0.2"))
        laptop.write("team-note.md", "for the team\n")
        assert wait_until(lambda: "team-note.md" in server_entries(live))
        for command in ("push", "pull", "sync"):
            done = laptop.run(command)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
        assert any(method == "PUT" for method, _, _ in proxy.control.sent)
        assert _team_only(proxy.control.sent) == []
        with live.client(live.token(REPO, name="alice-check", person="alice")) as client:
            assert client.get(API, params=PERSONAL).status_code == 404
            assert client.get(API, params={"repo": "~", "space": "personal"}).status_code == 404
        assert [row.repo for row in live.store.list_repos()] == [REPO]
        # Turned on, the running watcher takes the private folder up: the same watch
        # of the wire sees it (so the check above can fail).
        assert laptop.run("enable", "--personal").returncode == 0
        uploaded = "PUT /v1/team_memory?repo=acme%2Fapp&space=personal: carries 'private-note.md'"
        assert wait_until(lambda: uploaded in _team_only(proxy.control.sent)), _team_only(
            proxy.control.sent
        )
    finally:
        proxy.close()
    laptop.env["MEMSYNC_SERVER"] = live.base_url
    # A credential in a private note is refused before upload.
    with live.client(live.token(REPO, name="alice-check3", person="alice")) as client:
        assert wait_until(lambda: client.get(API, params=PERSONAL).status_code == 200)
    rng = random.Random(30)
    key_id = "AKIA" + "".join(rng.choices(string.ascii_uppercase + "234567", k=16))
    (private / "aws.md").write_text(f"key: {key_id}\n", encoding="utf-8")
    refused = laptop.run("push", "--personal")
    assert refused.returncode == 3, (refused.stdout, refused.stderr)
    assert "aws.md" in refused.stdout + refused.stderr
    with live.client(live.token(REPO, name="alice-check2", person="alice")) as client:
        entries = client.get(API, params=PERSONAL).json()["content"]["entries"]
    assert sorted(entries) == ["MEMORY.md", "private-note.md"]
    assert key_id not in str(entries)
