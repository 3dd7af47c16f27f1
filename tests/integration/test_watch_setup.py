"""Setting the watcher up: `enable`, `disable`, `status --all`, the user service, the
signals that need no server (credentials, git config), and a clean stop in-process."""

from __future__ import annotations

import functools
import json
import plistlib
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsync_protocol.tokens import TOKEN_PREFIX, token_checksum
from sync_client.config import resolve
from sync_client.watch.login_service import launchd_plist, watch_command
from sync_client.watch.watcher import Target, Watcher, WatchSettings
from tests.integration.users import User, make_user
from tests.integration.watchkit import (
    Proxy,
    WatchProcess,
    server_entries,
    wait_until,
    watch_server,
    watch_state,
)
from tests.liveserver import LiveServer


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    with watch_server(tmp_path) as server:
        yield server


@pytest.fixture
def carol(live: LiveServer, tmp_path: Path) -> User:
    """A user who has not logged in: no token, no repo, no team dir in the environment."""
    user = make_user("carol", tmp_path, live, live.token(name="unused"))
    for name in ("MEMSYNC_TOKEN", "MEMSYNC_REPO", "MEMSYNC_DIR"):
        user.env.pop(name)
    return user


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def test_enable_disable_and_status_all(carol: User, live: LiveServer) -> None:
    team = carol.home / "notes"
    enabled = carol.json("enable", "--repo", "acme/one", "--dir", str(team))
    assert enabled["added"] is True
    assert enabled["enabled"] == {
        "server": live.base_url,
        "repo": "acme/one",
        "dir": str(team),
        "root": None,
    }
    assert "memsync login" in enabled["note"]  # no token yet: the watcher will wait
    assert carol.json("enable", "--repo", "acme/one", "--dir", str(team))["added"] is False
    carol.json("enable", "--repo", "acme/two", "--dir", str(carol.home / "other"))
    listed = carol.json("status", "--all")["repos"]
    assert [row["repo"] for row in listed] == ["acme/one", "acme/two"]
    assert all(row["watcher"] is None for row in listed)
    human = carol.run("status", "--all")
    assert "acme/one" in human.stdout
    assert "not running" in human.stdout

    removed = carol.json("disable", "--repo", "acme/one")["removed"]
    assert [row["repo"] for row in removed] == ["acme/one"]
    assert carol.json("disable", "--repo", "acme/one")["removed"] == []
    assert [row["repo"] for row in carol.json("status", "--all")["repos"]] == ["acme/two"]
    # The file lives in the user's own config folder, private.
    enrolled = carol.home / ".config" / "memsync" / "repos.toml"
    assert enrolled.stat().st_mode & 0o777 == 0o600


def _checkout(user: User, origin: str) -> Path:
    """A git checkout at ~/src/app whose origin is `origin`."""
    checkout = user.home / "src" / "app"
    checkout.mkdir(parents=True)
    _git(checkout, "init", "-q")
    _git(checkout, "remote", "add", "origin", origin)
    return checkout


def _enable_in(user: User, cwd: Path) -> dict[str, Any]:
    """`memsync enable --json` run in `cwd`; its object (exit 0 asserted)."""
    result = subprocess.run(
        [*_memsync(), "enable", "--json"],
        cwd=cwd,
        env=user.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_enable_in_a_repository_takes_its_identity_and_team_dir(carol: User) -> None:
    checkout = _checkout(carol, "git@github.com:Acme/App.git")
    enabled = _enable_in(carol, checkout)["enabled"]
    assert enabled["repo"] == "acme/app"
    assert enabled["root"] == str(checkout.resolve())
    assert enabled["dir"].startswith(str(carol.home / ".claude" / "projects"))
    assert enabled["dir"].endswith("/memory/team")


def test_enable_in_a_worktree_enrolls_the_main_checkout_once(carol: User) -> None:
    checkout = _checkout(carol, "git@github.com:acme/app.git")
    identity = ("-c", "user.name=c", "-c", "user.email=c@c")
    _git(checkout, *identity, "commit", "-q", "--allow-empty", "-m", "x")
    _git(checkout, "worktree", "add", "-q", "--detach", str(carol.home / "src" / "app-feature"))
    first = _enable_in(carol, checkout)
    second = _enable_in(carol, carol.home / "src" / "app-feature")
    assert first["added"] is True
    assert second["added"] is False
    assert second["enabled"] == first["enabled"]
    assert len(carol.json("status", "--all")["repos"]) == 1


def _memsync() -> list[str]:
    return watch_command()[:-2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("enable", "--repo", "acme/x", "--server", "ftp://x"), "http:// or https://"),
        (("enable", "--repo", "not a repo", "--dir", "/tmp/x/team"), "owner/name"),
        (("enable", "--repo", "acme/x", "--dir", "relative"), "relative"),
        (("watch", "--install", "--uninstall"), "exclude each other"),
    ],
)
def test_bad_setup_is_one_line_and_exit_2(carol: User, args: tuple[str, ...], message: str) -> None:
    result = carol.run(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (carol.home / ".config" / "memsync" / "repos.toml").exists()


def test_a_damaged_enrolled_file_is_one_line_and_exit_2(carol: User) -> None:
    enrolled = carol.home / ".config" / "memsync" / "repos.toml"
    enrolled.parent.mkdir(parents=True)
    enrolled.write_text('[[repo]]\nrepo = "acme/x"\n')
    for args in (("status", "--all"), ("watch", "--all")):
        result = carol.run(*args)
        assert result.returncode == 2
        assert "server, repo and dir are required" in result.stderr
        assert "Traceback" not in result.stderr


# Setting the service up asks no server: the URL is saved, never called.
OFFLINE_SERVER = "http://127.0.0.1:9"
UNIT = "memsync-watch.service"
START = f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT}"
NO_BUS = "Failed to connect to bus: No such file or directory"


@pytest.fixture
def dana(tmp_path: Path) -> User:
    """A user with no token and no server in reach, whose PATH is one empty folder
    (`dana.env["PATH"]`): no systemctl, until a test puts one there."""
    home = tmp_path / "dana"
    (home / "team").mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {
        "PATH": str(bin_dir),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
    }
    return User(name="dana", home=home, team=home / "team", env=env)


def _no_user_bus(user: User) -> None:
    """Put on `user`'s PATH a `systemctl` that answers as one does on a machine without a
    user session bus (an ssh or su session, a container, a CI runner)."""
    script = Path(user.env["PATH"]) / "systemctl"
    script.write_text(f"#!/bin/sh\necho '{NO_BUS}' >&2\nexit 1\n")
    script.chmod(0o755)


def _a_token() -> str:
    body = "dana" * 9
    return f"{TOKEN_PREFIX}{body}{token_checksum(body)}"


def _unit(user: User) -> Path:
    return user.home / ".config" / "systemd" / "user" / UNIT


def _stderr_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stderr.strip().splitlines()


def test_install_writes_a_valid_systemd_user_unit_and_uninstall_removes_it(
    dana: User,
) -> None:
    installed = dana.json("watch", "--install", "--no-start")
    unit = Path(installed["path"])
    assert unit == _unit(dana)
    text = unit.read_text()
    assert f"ExecStart={' '.join(watch_command())}\n" in text
    assert "WantedBy=default.target" in text
    assert "Restart=on-failure\nRestartSec=10\n" in text
    # A user manager cannot order on the system's targets; the watcher retries itself.
    assert "network-online" not in text
    assert "After=" not in text
    assert "MEMSYNC_TOKEN" not in text
    assert installed["activated"] is False
    assert installed["activation_error"] is None  # --no-start: not asked to start
    assert START in installed["command"]
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(
            ["systemd-analyze", "verify", str(unit)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert verified.returncode == 0, verified.stderr
    assert dana.json("watch", "--install", "--no-start")["changed"] is False
    removed = dana.json("watch", "--uninstall", "--no-start")
    assert removed["changed"] is True
    assert not unit.exists()
    assert dana.json("watch", "--uninstall", "--no-start")["changed"] is False


def test_install_without_a_user_bus_writes_the_unit_says_why_and_exits_3(dana: User) -> None:
    _no_user_bus(dana)
    why = f"`systemctl --user daemon-reload` failed: {NO_BUS}"
    installed = dana.run("watch", "--install", "--json")
    assert installed.returncode == 3, installed.stderr
    answer = json.loads(installed.stdout)
    assert answer["activated"] is False
    assert answer["activation_error"] == why
    assert answer["command"] == START
    assert _unit(dana).is_file()
    assert _stderr_lines(installed) == [f"memsync: the service is installed but not started: {why}"]

    human = dana.run("watch", "--install")
    assert human.returncode == 3
    assert human.stdout.splitlines() == [
        f"{_unit(dana)} is up to date",
        "once you have a user session bus (log in as yourself; on a machine nobody logs in"
        f" to, `loginctl enable-linger $USER` first), run: `{START}`",
        "or run `memsync watch --all` yourself, in a terminal or tmux",
    ]
    assert _stderr_lines(human) == _stderr_lines(installed)

    # --no-start asks nothing of systemctl and says nothing about starting.
    quiet = dana.run("watch", "--install", "--no-start", "--json")
    assert quiet.returncode == 0
    assert json.loads(quiet.stdout)["activation_error"] is None
    assert quiet.stderr == ""

    # Removing it needs nothing running: the file goes, exit 0, and the reason is shown.
    removed = dana.run("watch", "--uninstall")
    assert removed.returncode == 0
    assert f"not stopped: `systemctl --user disable --now {UNIT}` failed: {NO_BUS}" in (
        removed.stdout
    )
    assert not _unit(dana).exists()


def test_install_without_systemctl_says_so_and_exits_3(dana: User) -> None:
    installed = dana.run("watch", "--install", "--json")
    assert installed.returncode == 3, installed.stderr
    answer = json.loads(installed.stdout)
    assert answer["activated"] is False
    assert answer["activation_error"] == "systemctl not found"
    assert _unit(dana).is_file()
    assert _stderr_lines(installed) == [
        "memsync: the service is installed but not started: systemctl not found"
    ]
    human = dana.run("watch", "--install")
    assert human.returncode == 3
    assert "run `memsync watch --all` in a terminal or tmux" in human.stdout
    assert "systemctl --user" not in human.stdout  # no use without systemctl


def test_a_token_only_in_the_environment_is_warned_about_until_login_saves_it(
    dana: User,
) -> None:
    token = _a_token()
    dana.env["MEMSYNC_TOKEN"] = token
    enable = ("enable", "--repo", "acme/app", "--dir", str(dana.team), "--server", OFFLINE_SERVER)
    enabled = dana.run(*enable)
    assert enabled.returncode == 0, enabled.stderr
    warning = (
        "memsync: warning: the token comes only from MEMSYNC_TOKEN, which a service does not"
        f" see: the watcher service will pause with 'no token' ({OFFLINE_SERVER}); run"
        " `memsync login` to save it in credentials.toml"
    )
    assert _stderr_lines(enabled) == [warning]
    installed = dana.run("watch", "--install", "--no-start")
    assert installed.returncode == 0
    assert _stderr_lines(installed) == [warning]
    # A --token given to enable is not saved either.
    del dana.env["MEMSYNC_TOKEN"]
    flagged = dana.run(*enable, "--token", token, "--json")
    assert _stderr_lines(flagged) == [warning.replace("MEMSYNC_TOKEN", "--token")]
    for result in (enabled, installed, flagged):
        assert token not in result.stdout + result.stderr

    # Saved for that server, the token reaches the service: no warning, even with the
    # variable still set.
    dana.env["MEMSYNC_TOKEN"] = token
    login = dana.run("login", "--no-verify", "--server", OFFLINE_SERVER, "--token", token)
    assert login.returncode == 0, login.stderr
    for args in (enable, ("watch", "--install", "--no-start")):
        result = dana.run(*args)
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", args


def test_the_launchd_agent_runs_watch_all_at_login(tmp_path: Path) -> None:
    agent = plistlib.loads(launchd_plist(["/opt/memsync/bin/memsync", "watch", "--all"], tmp_path))
    assert agent["Label"] == "dev.memsync.watch"
    assert agent["ProgramArguments"] == ["/opt/memsync/bin/memsync", "watch", "--all"]
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == str(tmp_path / "Library" / "Logs" / "memsync-watch.log")
    if shutil.which("plutil"):
        path = tmp_path / "agent.plist"
        path.write_bytes(launchd_plist(watch_command(), tmp_path))
        assert subprocess.run(["plutil", "-lint", str(path)], check=False).returncode == 0


def test_without_credentials_the_watcher_waits_for_login_without_a_request(
    carol: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    proxy = Proxy(live.base_url)
    try:
        carol.env["MEMSYNC_SERVER"] = proxy.url
        team = carol.home / "team"
        carol.json("enable", "--repo", "acme/app", "--dir", str(team))
        watcher = WatchProcess(carol.env, carol.home, "--all", "--debounce", "0.2")
        watchers.append(watcher)
        assert wait_until(lambda: "memsync login" in watcher.log()), watcher.log()
        for index in range(50):
            (team / f"n{index}.md").write_text(f"{index}\n")
        time.sleep(2)
        assert proxy.control.count() == 0
        state = watch_state(carol)
        assert state is not None
        assert state["suppressed"]["reason"] == "no-credentials"
        assert carol.run("login", "--token", live.token(name="carol")).returncode == 0
        assert wait_until(lambda: len(server_entries(live)) == 50), watcher.log()
        code, _ = watcher.terminate()
        assert code == 0
    finally:
        proxy.close()


def test_without_a_git_remote_the_watcher_waits_for_the_git_config(
    carol: User, live: LiveServer, watchers: list[WatchProcess]
) -> None:
    checkout = carol.home / "src" / "app"
    checkout.mkdir(parents=True)
    _git(checkout, "init", "-q")
    carol.env["MEMSYNC_TOKEN"] = live.token(name="carol")
    carol.env["MEMSYNC_DIR"] = str(carol.home / "team")
    watcher = WatchProcess(carol.env, checkout, "--debounce", "0.2")
    watchers.append(watcher)
    assert wait_until(lambda: "git config" in watcher.log()), watcher.log()
    (carol.home / "team").mkdir(exist_ok=True)
    (carol.home / "team" / "n.md").write_text("waiting for a remote\n")
    time.sleep(1.5)
    assert server_entries(live, "acme/app") == {}
    _git(checkout, "remote", "add", "origin", "https://github.com/acme/app.git")
    assert wait_until(lambda: "n.md" in server_entries(live, "acme/app")), watcher.log()
    code, _ = watcher.terminate()
    assert code == 0


def test_an_in_process_watcher_stops_every_thread_it_started(
    live: LiveServer, tmp_path: Path
) -> None:
    team = tmp_path / "team"
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    target = Target(
        label="acme/app",
        resolve=functools.partial(
            resolve,
            server=live.base_url,
            token=live.token(name="in-process"),
            repo="acme/app",
            team_dir=str(team),
            cwd=tmp_path,
            env=env,
        ),
        identity=("acme/app",),
    )
    before = set(threading.enumerate())
    watcher = Watcher(lambda: [target], WatchSettings(debounce=0.1, poll_interval=1.0), env=env)
    watcher.start()
    try:
        assert wait_until(lambda: team.is_dir())
        (team / "note.md").write_text("in process\n")
        deadline = time.monotonic() + 15
        while "note.md" not in server_entries(live) and time.monotonic() < deadline:
            watcher.tick()
            time.sleep(0.1)
        assert "note.md" in server_entries(live)
    finally:
        assert watcher.stop()

    def left() -> list[str]:
        # The live server runs in this process too: its worker pool is not ours.
        started = set(threading.enumerate()) - before
        return [thread.name for thread in started if not thread.name.startswith("AnyIO")]

    assert wait_until(lambda: not left(), timeout=3), left()
