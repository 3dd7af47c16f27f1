"""First contact: `memsync login`, `logout`, `doctor` and the repo identity, as a new
user meets them.

Every test runs the real `memsync` command in a subprocess, with its own HOME and
XDG folders, against a real server on loopback (or, for the failures, a port where
nothing listens, a wrong path, another kind of HTTP server).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sync_client.config import default_team_dir
from tests.integration.test_wrong_server import ForeignServer, running_foreign
from tests.integration.users import REPO, User, make_user
from tests.liveserver import LiveServer, free_port

MEMSYNC = str(Path(sys.executable).with_name("memsync"))
MISTYPED = "this token is mistyped: its checksum does not match; copy it again"
NOTHING_SAVED = "(nothing was saved)"
URL_PROMPT = "memsync server URL: "
TOKEN_PROMPT = "token: "


def git(cwd: Path, *arguments: str) -> None:
    subprocess.run(["git", *arguments], cwd=cwd, check=True, capture_output=True, timeout=30)


def newcomer(name: str, root: Path, live: LiveServer) -> User:
    """Someone who has never logged in: a fresh HOME and XDG folders, no MEMSYNC_*."""
    user = make_user(name, root, live, "unused")
    for variable in ("MEMSYNC_SERVER", "MEMSYNC_TOKEN", "MEMSYNC_REPO", "MEMSYNC_DIR"):
        del user.env[variable]
    return user


def run(
    user: User, *args: str, cwd: Path | None = None, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`memsync ARGS` as `user`, with stdin a pipe holding `stdin` (never a terminal)."""
    return subprocess.run(
        [MEMSYNC, *args],
        env={**user.env, **env},
        cwd=cwd or user.home,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def run_json(user: User, *args: str, expect: int = 0, **options: Any) -> Any:
    result = run(user, *args, "--json", **options)
    assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout  # one JSON object, on one line
    return json.loads(lines[0])


def credentials(user: User) -> Path:
    return user.home / ".config" / "memsync" / "credentials.toml"


def checkout(user: User, origin: str | None, folder: str = "app") -> Path:
    """A git checkout in the user's home with remote `origin` (none when None)."""
    path = user.home / "src" / folder
    path.mkdir(parents=True)
    git(path, "init", "-q")
    if origin is not None:
        git(path, "remote", "add", "origin", origin)
    return path


def mistype(token: str) -> str:
    """The token with one character of its body changed, as a bad copy would."""
    index = 10
    replacement = "a" if token[index] != "a" else "b"
    return token[:index] + replacement + token[index + 1 :]


def unreachable_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


@pytest.fixture
def carol(live: LiveServer, tmp_path: Path) -> User:
    return newcomer("carol", tmp_path, live)


@pytest.fixture
def foreign() -> Iterator[ForeignServer]:
    """An HTTP server that answers `/healthz` as memsync would, and every path alike."""
    with running_foreign("status-ok-json") as server:
        yield server


# --- login -------------------------------------------------------------------------


def test_login_checks_the_url_and_token_then_saves_them(carol: User, live: LiveServer) -> None:
    token = live.token("acme/*", name="alice")
    result = run(carol, "login", "--server", live.base_url, "--token", token)
    assert result.returncode == 0, result.stderr
    assert "token 'alice' may read and write acme/*" in result.stdout
    assert f"saved credentials for {live.base_url} to {credentials(carol)}" in result.stdout
    assert result.stderr == ""
    assert token not in result.stdout
    assert credentials(carol).stat().st_mode & 0o777 == 0o600
    saved = credentials(carol).read_text()
    assert f'token = "{token}"' in saved
    assert f'server = "{live.base_url}"' in saved
    # The saved pair is what every later command uses.
    carol.write("notes/db.md", "Use PostgreSQL.\n")
    pushed = run_json(carol, "push", MEMSYNC_REPO=REPO, MEMSYNC_DIR=str(carol.team))
    assert pushed["uploaded"] == ["notes/db.md"]


def test_login_json_is_one_object_naming_the_token(carol: User, live: LiveServer) -> None:
    token = live.token("*", read_only=True, name="ci")
    report = run_json(carol, "login", "--server", live.base_url, "--token", token)
    assert report["verified"] is True
    assert report["server"] == live.base_url
    assert report["credentials"] == str(credentials(carol))
    assert report["token"]["name"] == "ci"
    assert report["token"]["repos"] == "*"
    assert report["token"]["access"] == "read-only"
    assert report["token"]["expiresAt"] is None
    assert token not in json.dumps(report)
    human = run(carol, "login", "--server", live.base_url, "--token", token)
    assert "token 'ci' is read-only (every repo): pull works, push will be refused" in human.stdout


def test_login_in_a_checkout_says_whether_the_token_covers_its_repo(
    carol: User, live: LiveServer
) -> None:
    app = checkout(carol, "git@github.com:acme/app.git")
    token = live.token("acme/*")
    covered = run(carol, "login", "--server", live.base_url, "--token", token, cwd=app)
    assert covered.returncode == 0, covered.stderr
    assert (
        "this repo, acme/app (from git remote origin git@github.com:acme/app.git), is covered"
        in covered.stdout
    )
    other = live.token("other/*", name="other")
    report = run_json(carol, "login", "--server", live.base_url, "--token", other, cwd=app)
    assert report["repo"] == {
        "name": "acme/app",
        "source": "git remote origin git@github.com:acme/app.git",
        "covered": False,
    }
    human = run(carol, "login", "--server", live.base_url, "--token", other, cwd=app)
    assert human.returncode == 0
    assert "acme/app" in human.stdout
    assert "is not covered by this token" in human.stdout
    # Outside a checkout there is no repo to speak of.
    outside = run_json(carol, "login", "--server", live.base_url, "--token", other)
    assert outside["repo"] is None
    assert outside["note"] is None


def test_a_mistyped_token_is_named_before_any_request(carol: User, live: LiveServer) -> None:
    token = live.token(name="alice")
    # Nothing listens there: a request would fail as "connection refused" instead.
    url = unreachable_url()
    for bad, message in (
        (mistype(token), MISTYPED),
        (token[:-1], MISTYPED),
        ("ghp_" + token[4:], "this is not a memsync token: it does not start with mst_"),
        ("hunter2", "this is not a memsync token: it does not start with mst_"),
    ):
        result = run(carol, "login", "--server", url, "--token", bad)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr
        assert "connection refused" not in result.stderr
        assert len(result.stderr.splitlines()) == 1
        assert bad not in result.stderr
        assert not credentials(carol).exists()


def test_pasted_spaces_and_newlines_around_the_token_are_dropped(
    carol: User, live: LiveServer
) -> None:
    token = live.token(name="alice")
    result = run(carol, "login", "--server", f" {live.base_url}/ ", "--token", f"  {token}\n")
    assert result.returncode == 0, result.stderr
    report = run_json(carol, "login", "--server", live.base_url, MEMSYNC_TOKEN=f"{token} \r\n")
    assert report["verified"] is True
    assert f'token = "{token}"\n' in credentials(carol).read_text()


def test_without_a_terminal_a_missing_url_or_token_is_one_line_naming_the_flag(
    carol: User, live: LiveServer
) -> None:
    token = live.token(name="alice")
    no_url = run(carol, "login", "--token", token)
    assert no_url.returncode == 2
    assert no_url.stderr == "memsync: no server URL: give --server URL (or set MEMSYNC_SERVER)\n"
    no_token = run(carol, "login", "--server", live.base_url, stdin="\n")
    assert no_token.returncode == 2
    assert no_token.stderr == (
        "memsync: no token: give --token mst_..., pipe it on stdin (--token-stdin) or set "
        "MEMSYNC_TOKEN\n"
    )
    both = run(carol, "login", "--server", live.base_url, "--token", token, "--token-stdin")
    assert both.returncode == 2
    assert "--token or --token-stdin, not both" in both.stderr
    assert not credentials(carol).exists()


def test_a_token_piped_on_stdin_is_read_and_never_shown(carol: User, live: LiveServer) -> None:
    """`echo mst_... | memsync login --server URL`, as `gh auth login --with-token`:
    the token is checked and saved, and appears in no output."""
    token = live.token(name="alice")
    piped = run(carol, "login", "--server", live.base_url, stdin=f"{token}\n")
    assert piped.returncode == 0, piped.stderr
    assert "token 'alice' may read and write" in piped.stdout
    assert token not in piped.stdout + piped.stderr
    assert f'token = "{token}"\n' in credentials(carol).read_text()
    other = live.token(name="bob")
    explicit = run_json(
        carol, "login", "--server", live.base_url, "--token-stdin", stdin=f"\n  {other} \n"
    )
    assert explicit["token"]["name"] == "bob"
    assert f'token = "{other}"\n' in credentials(carol).read_text()
    # A stdin nobody writes to (a script's inherited pipe) is waited for 2 s, no more.
    held = subprocess.Popen(
        [MEMSYNC, "login", "--server", live.base_url],
        env=carol.env,
        cwd=carol.home,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.wait(timeout=30) == 2  # stdin still open: no end of input came
        assert held.stderr is not None
        assert held.stderr.read().startswith("memsync: no token: ")
    finally:
        held.kill()
        held.wait()
        for stream in (held.stdin, held.stdout, held.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("warnings", ["error", "always"])
def test_login_never_shows_a_python_warning(carol: User, live: LiveServer, warnings: str) -> None:
    """Under `python -W error` (or `always`), with stdin a pipe: getpass's "Can not
    control echo" and any library's deprecation warning would show here."""
    token = live.token(name="alice")
    missing = run(carol, "login", "--server", live.base_url, PYTHONWARNINGS=warnings)
    assert missing.returncode == 2
    assert "Warning" not in missing.stderr
    assert "Traceback" not in missing.stderr
    done = run(carol, "login", "--server", live.base_url, "--token", token, PYTHONWARNINGS=warnings)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    refused = run(
        carol, "login", "--server", unreachable_url(), "--token", token, PYTHONWARNINGS=warnings
    )
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1, refused.stderr


def test_a_failed_check_saves_nothing_and_keeps_the_old_login(
    carol: User, live: LiveServer, foreign: ForeignServer
) -> None:
    good = live.token(name="alice")
    assert run(carol, "login", "--server", live.base_url, "--token", good).returncode == 0
    before = credentials(carol).read_bytes()
    revoked = live.token(name="gone")
    assert live.store.revoke_token("gone") == 1
    url = unreachable_url()
    for server, token, message in (
        (url, good, f"cannot reach {url}: connection refused (is the server running?)"),
        (live.base_url + "/typo", good, f"{live.base_url}/typo is not a memsync server ("),
        (
            live.base_url + "/v1/team_memory",
            good,
            f"give the server's base URL, {live.base_url}, without /v1/team_memory",
        ),
        (
            live.base_url + "/ui/",  # the web page's address, copied from the browser
            good,
            f"give the server's base URL, {live.base_url}, without /ui",
        ),
        (foreign.base_url, good, f"{foreign.base_url} is not a memsync server ("),
        (live.base_url, revoked, "the server refused the token"),
    ):
        result = run(carol, "login", "--server", server, "--token", token)
        assert result.returncode == 1, (server, result.stderr)
        assert message in result.stderr
        assert result.stderr.rstrip("\n").endswith(NOTHING_SAVED)
        assert len(result.stderr.splitlines()) == 1
        assert result.stdout == ""
        assert credentials(carol).read_bytes() == before


def test_no_verify_saves_without_asking_the_server(carol: User, live: LiveServer) -> None:
    token = live.token(name="alice")
    url = unreachable_url()
    report = run_json(carol, "login", "--no-verify", "--server", url, "--token", token)
    assert report["verified"] is False
    assert report["token"] is None
    assert f'server = "{url}"' in credentials(carol).read_text()
    # --no-verify skips the server, never the token's own checksum.
    mistyped = run(carol, "login", "--no-verify", "--server", url, "--token", mistype(token))
    assert mistyped.returncode == 2
    assert MISTYPED in mistyped.stderr
    human = run(carol, "login", "--no-verify", "--server", url, "--token", token)
    assert "not checked with the server" in human.stdout


def _read_until(master: int, wanted: str, timeout: float = 20) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                seen += os.read(master, 4096).decode(errors="replace")
            except OSError:
                break
    return seen


def login_on_a_terminal(user: User, answers: dict[str, str], *args: str) -> tuple[int, str, str]:
    """`memsync login ARGS` with a terminal as stdin and stderr, typing each answer once
    its prompt shows; (exit code, what the terminal showed, stdout)."""
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            [MEMSYNC, "login", *args],
            env={**user.env, "PYTHONWARNINGS": "error"},
            cwd=user.home,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=slave,
            start_new_session=True,
            text=True,
        )
        os.close(slave)
        shown = ""
        for prompt, answer in answers.items():
            shown += _read_until(master, prompt)
            assert prompt in shown, shown
            os.write(master, f"{answer}\n".encode())
        stdout, _ = process.communicate(timeout=30)
        shown += _read_until(master, "\n", timeout=1)
    finally:
        os.close(master)
    return process.returncode, shown, stdout


def test_on_a_terminal_login_asks_for_the_url_and_the_token(carol: User, live: LiveServer) -> None:
    token = live.token("acme/*", name="alice")
    code, shown, stdout = login_on_a_terminal(
        carol, {URL_PROMPT: live.base_url, TOKEN_PROMPT: token}
    )
    assert code == 0, shown
    assert "token 'alice' may read and write acme/*" in stdout
    assert token not in shown  # typed without echo
    assert "Warning" not in shown
    assert f'token = "{token}"' in credentials(carol).read_text()
    # The prompts go to the terminal, never into the JSON on stdout.
    code, shown, stdout = login_on_a_terminal(
        carol, {TOKEN_PROMPT: token}, "--server", live.base_url, "--json"
    )
    assert code == 0, shown
    assert json.loads(stdout)["token"]["name"] == "alice"
    # A mistyped token typed at the prompt is named like one given as a flag (the URL
    # is the one saved by now, so only the token is asked for).
    code, shown, _ = login_on_a_terminal(carol, {TOKEN_PROMPT: mistype(token)})
    assert code == 2
    assert MISTYPED in shown


# --- logout ------------------------------------------------------------------------


def test_logout_removes_the_saved_credentials_and_says_so(carol: User, live: LiveServer) -> None:
    token = live.token(name="alice")
    assert run(carol, "login", "--server", live.base_url, "--token", token).returncode == 0
    result = run(carol, "logout")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"removed the saved credentials for {live.base_url}: {credentials(carol)}\n"
    )
    assert not credentials(carol).exists()
    again = run(carol, "logout")
    assert again.returncode == 0
    assert again.stdout == f"nothing to remove: no saved credentials at {credentials(carol)}\n"
    # Logged out, commands say how to log in again.
    pull = run(carol, "pull", MEMSYNC_REPO=REPO, MEMSYNC_DIR=str(carol.team))
    assert pull.returncode == 2
    assert "memsync login" in pull.stderr


def test_logout_json_is_one_object(carol: User, live: LiveServer) -> None:
    assert run(carol, "login", "--server", live.base_url, "--token", live.token()).returncode == 0
    assert run_json(carol, "logout") == {
        "removed": str(credentials(carol)),
        "server": live.base_url,
        "note": None,
    }
    assert run_json(carol, "logout", MEMSYNC_TOKEN="mst_x") == {
        "removed": None,
        "server": None,
        "note": "MEMSYNC_TOKEN is still set in this environment, and commands use it: unset it too",
    }


# --- doctor ------------------------------------------------------------------------


def doctor(user: User, *args: str, cwd: Path | None = None, **env: str) -> dict[str, Any]:
    result = run(user, "doctor", "--json", *args, cwd=cwd, **env)
    lines = result.stdout.splitlines()
    assert len(lines) == 1, (result.stdout, result.stderr)
    report: dict[str, Any] = json.loads(lines[0])
    assert result.returncode == (0 if report["ok"] else 1)
    assert set(report) == {"ok", "checks", "repo"}
    rows = report["checks"]
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
    for row in rows:
        # Every failed row that ran says what to do, and not by saying the problem again.
        if not row["ok"] and not row["skipped"]:
            assert row["fix"], row
            assert row["fix"] != row["detail"]
            assert row["fix"] not in row["detail"]
            assert row["detail"] not in row["fix"]
    return report


def checks(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["check"]: row for row in report["checks"]}


def test_doctor_names_the_repo_and_where_it_came_from(carol: User, live: LiveServer) -> None:
    carol.env["MEMSYNC_SERVER"] = live.base_url
    carol.env["MEMSYNC_TOKEN"] = live.token("acme/*", name="alice")
    app = checkout(carol, "git@github.com:acme/app.git")
    report = doctor(carol, cwd=app)
    assert report["ok"] is True, report
    assert report["repo"] == {
        "name": "acme/app",
        "source": "git remote origin git@github.com:acme/app.git",
    }
    human = run(carol, "doctor", cwd=app)
    assert human.returncode == 0
    assert "ok   repo: acme/app (from git remote origin git@github.com:acme/app.git)" in (
        human.stdout
    )
    assert "token 'alice' may read and write acme/*" in human.stdout
    env_repo = doctor(carol, cwd=app, MEMSYNC_REPO="acme/other")
    assert env_repo["repo"] == {"name": "acme/other", "source": "MEMSYNC_REPO"}
    flag_repo = doctor(carol, "--repo", "Acme/Third", cwd=app)
    assert flag_repo["repo"] == {"name": "acme/third", "source": "--repo"}
    assert checks(flag_repo)["repo"]["detail"] == "acme/third (from --repo)"


def test_doctor_never_shows_the_password_of_a_remote(carol: User, live: LiveServer) -> None:
    carol.env["MEMSYNC_SERVER"] = live.base_url
    carol.env["MEMSYNC_TOKEN"] = live.token(name="alice")
    app = checkout(carol, "https://carol:s3cr3t@git.example.com/acme/app.git")
    report = doctor(carol, cwd=app)
    assert report["repo"] == {
        "name": "acme/app",
        "source": "git remote origin https://git.example.com/acme/app.git",
    }
    assert "s3cr3t" not in json.dumps(report)


def test_doctor_runs_every_check_after_the_server_fails(carol: User, live: LiveServer) -> None:
    url = unreachable_url()
    carol.env.update(
        MEMSYNC_SERVER=url,
        MEMSYNC_TOKEN=live.token(name="alice"),
        MEMSYNC_REPO=REPO,
        MEMSYNC_DIR=str(carol.team),
    )
    report = doctor(carol)
    assert report["ok"] is False
    rows = checks(report)
    assert rows["config"]["ok"] is True
    assert rows["repo"]["detail"] == "acme/app (from MEMSYNC_REPO)"
    assert rows["team dir"]["ok"] is True
    assert rows["server"]["ok"] is False
    assert "connection refused" in rows["server"]["detail"]
    assert "memsync-server serve" in rows["server"]["fix"]
    for name in ("auth", "clock"):
        assert rows[name] == {
            "check": name,
            "ok": False,
            "detail": "skipped: needs a working server",
            "fix": "",
            "skipped": True,
        }
    human = run(carol, "doctor")
    assert human.returncode == 1
    assert "--   auth: skipped: needs a working server" in human.stdout
    assert "--   clock: skipped: needs a working server" in human.stdout


def test_doctor_with_nothing_set_up_gives_a_row_and_an_action_for_each(carol: User) -> None:
    report = doctor(carol)  # not in a checkout, never logged in
    rows = checks(report)
    assert report["repo"] is None
    assert rows["config"]["ok"] is False
    # Said once: the missing token is part of the same missing login.
    assert rows["config"]["detail"] == (
        "no server URL: set MEMSYNC_SERVER/MEMSYNC_TOKEN or run `memsync login`"
    )
    assert "memsync login --server" in rows["config"]["fix"]
    assert rows["repo"]["ok"] is False
    assert "not inside a git repository" in rows["repo"]["detail"]
    assert rows["repo"]["fix"].startswith("cd into")
    assert rows["team dir"]["ok"] is False
    assert "MEMSYNC_DIR" in rows["team dir"]["fix"]
    assert rows["server"]["detail"] == "skipped: needs a server URL (see config)"
    assert rows["auth"]["skipped"] is True
    assert rows["clock"]["skipped"] is True


def test_doctor_names_a_read_only_token(carol: User, live: LiveServer) -> None:
    carol.env.update(
        MEMSYNC_SERVER=live.base_url,
        MEMSYNC_TOKEN=live.token("acme/*", read_only=True, name="ci"),
        MEMSYNC_REPO=REPO,
        MEMSYNC_DIR=str(carol.team),
    )
    report = doctor(carol)
    assert report["ok"] is True
    auth = checks(report)["auth"]
    assert auth["detail"].startswith(
        "token 'ci' is read-only (acme/*): pull works, push will be refused"
    )
    # What it says is what happens.
    carol.write("a.md", "a\n")
    assert run(carol, "pull").returncode == 0
    push = run(carol, "push")
    assert push.returncode == 1
    assert "read-only" in push.stderr


def test_doctor_tells_a_refused_token_from_one_for_other_repos(
    carol: User, live: LiveServer
) -> None:
    carol.env.update(MEMSYNC_SERVER=live.base_url, MEMSYNC_REPO=REPO, MEMSYNC_DIR=str(carol.team))
    elsewhere = doctor(carol, MEMSYNC_TOKEN=live.token("other/*", name="other"))
    rows = checks(elsewhere)
    assert rows["server"]["ok"] is True
    assert rows["auth"]["ok"] is False
    assert rows["auth"]["detail"] == (
        "token 'other' may read and write other/*: it does not reach acme/app"
    )
    assert "memsync-server token create --repo acme/app" in rows["auth"]["fix"]
    assert rows["clock"]["ok"] is True
    revoked = live.token(name="gone")
    assert live.store.revoke_token("gone") == 1
    rows = checks(doctor(carol, MEMSYNC_TOKEN=revoked))
    assert rows["server"]["ok"] is True
    assert rows["auth"]["ok"] is False
    assert rows["auth"]["detail"].startswith("the server refused the token")
    assert "memsync login" in rows["auth"]["fix"]
    assert rows["clock"]["ok"] is True


# --- repo identity -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "shown"),
    [
        ("/srv/git/app.git", "/srv/git/app.git"),
        ("file:///srv/git/app.git", "/srv/git/app.git"),
        ("../app.git", "../app.git"),
    ],
)
def test_a_local_path_origin_says_so_and_how_to_name_the_repo(
    carol: User, live: LiveServer, origin: str, shown: str
) -> None:
    carol.env.update(MEMSYNC_SERVER=live.base_url, MEMSYNC_TOKEN=live.token(name="alice"))
    app = checkout(carol, origin)
    message = (
        f"the git remote origin is a local path ({shown}), not a hosted repo:"
        " set MEMSYNC_REPO=owner/name so teammates share one memory"
    )
    for command in ("pull", "status", "push"):
        result = run(carol, command, cwd=app)
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"memsync: {message}\n"
    rows = checks(doctor(carol, cwd=app))
    assert rows["repo"]["detail"] == message
    assert "export MEMSYNC_REPO=owner/name" in rows["repo"]["fix"]
    # The rest still ran: the server and the token are fine.
    assert rows["server"]["ok"] is True
    assert rows["auth"]["ok"] is True
    assert "not checked (no repo identity)" in rows["auth"]["detail"]
    # Login still saves (the token is good) and passes the reason on.
    login = run_json(carol, "login", cwd=app)
    assert login["repo"] is None
    assert login["note"] == message
    # The way out the message gives works.
    team = default_team_dir(app.resolve(), carol.home)
    team.mkdir(parents=True)
    (team / "a.md").write_text("a\n", encoding="utf-8")
    named = run_json(carol, "push", cwd=app, MEMSYNC_REPO=REPO)
    assert named["uploaded"] == ["a.md"]
    assert live.store.head(REPO) is not None


def test_doctor_names_a_bad_ignore_file(carol: User, live: LiveServer) -> None:
    carol.env.update(
        MEMSYNC_SERVER=live.base_url,
        MEMSYNC_TOKEN=live.token(name="alice"),
        MEMSYNC_REPO=REPO,
        MEMSYNC_DIR=str(carol.team),
    )
    carol.team.mkdir(parents=True, exist_ok=True)
    (carol.team / ".memsyncignore").write_text("drafts/\n../elsewhere\n")
    report = doctor(carol)
    assert report["ok"] is False
    row = checks(report)["team dir"]
    assert row["ok"] is False
    assert "line 2: '../elsewhere' points outside the team dir" in row["detail"]
    assert row["fix"].startswith("fix that line of ")
    # The other checks still ran.
    assert checks(report)["auth"]["ok"] is True
