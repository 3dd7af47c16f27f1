"""`memsync doctor`: one row per check, every check run even after one fails.

The rows, in order: config (server URL and token), repo (its identity and where it came
from), team dir, server (a memsync server answers at the URL), auth (what the token may
do, and whether it reaches the repo), clock, index (the team MEMORY.md as Claude Code
reads it: a `warning` row for its health, a failed one when it cannot be shared) and
claude code (memsync's hook installed, the team dir where Claude Code looks), then a
row for each other agent with a team dir of its own whose hook is installed (qwen). A
check that cannot run because one it needs failed is a row too, `skipped: needs ...`,
never left out. A failed row carries a fix: an action to take (a command, a variable
to set), never the problem said again.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from sync_client.agents import Agent
    from sync_client.answers import Health, RemoteState, TokenInfo
    from sync_client.api import Api
    from sync_client.config import ConfigParts, RepoIdentity
    from sync_client.errors import ConfigError, MemsyncError

CLOCK_SKEW_SECONDS = 300
DOCTOR_TIMEOUT_SECONDS = 10.0
NEEDS_SERVER = "skipped: needs a working server"
_WRONG_SERVER_FIX = (
    "point MEMSYNC_SERVER (or `memsync login --server`) at the base URL the server's"
    " operator gave, e.g. https://memsync.example.com, without /v1/..."
)
_LOGIN_FIX = "run `memsync login` with the token the server's operator gave you"


def _row(
    check: str, ok: bool, detail: str, fix: str = "", *, skipped: bool = False
) -> dict[str, Any]:
    return {"check": check, "ok": ok, "detail": detail, "fix": fix, "skipped": skipped}


def _skipped(check: str, needs: str = NEEDS_SERVER) -> dict[str, Any]:
    return _row(check, False, needs, skipped=True)


def describe_token(info: TokenInfo) -> str:
    """What a token may do, in words: `token 'alice' may read and write acme/*`."""
    repos = "every repo" if info.repos == "*" else info.repos
    if info.read_only:
        text = f"token '{info.name}' is read-only ({repos}): pull works, push will be refused"
    else:
        text = f"token '{info.name}' may read and write {repos}"
    if info.expires_at:
        text += f" (expires {info.expires_at})"
    return text


def _config_fix(error: ConfigError) -> str:
    """An action for a failed server or token setting."""
    from sync_client.errors import NoCredentials

    message = str(error)
    if message.startswith("no server URL"):
        return "run `memsync login --server https://memsync.example.com` (your team's server)"
    if message.startswith("no token"):
        return f"{_LOGIN_FIX} (or export MEMSYNC_TOKEN=mst_...)"
    if isinstance(error, NoCredentials):  # a saved token for another server
        return "run `memsync login --server URL` for the server you mean to use"
    return "edit or unset the value named there, then run `memsync doctor` again"


def _config_row(parts: ConfigParts) -> dict[str, Any]:
    from sync_client.errors import ConfigError, NoCredentials

    problems: list[ConfigError] = []
    for part in (parts.server, parts.token):
        # A malformed credentials file is the error of both parts: say it once. Without
        # a server URL, a missing token is part of the same story (`memsync login`).
        if isinstance(part, ConfigError) and all(
            part is not seen and not (type(part) is type(seen) is NoCredentials)
            for seen in problems
        ):
            problems.append(part)
    if not problems:
        return _row("config", True, f"server {parts.server}")
    return _row(
        "config",
        False,
        "; ".join(str(problem) for problem in problems),
        _config_fix(problems[0]),
    )


def _repo_fix(error: ConfigError) -> str:
    """An action for a repo identity that could not be found."""
    message = str(error)
    if "local path" in message:
        return (
            "export MEMSYNC_REPO=owner/name, the name your team uses for this repo"
            " (every teammate sets the same one)"
        )
    if "no remote origin" in message:
        return "git remote add origin git@HOST:owner/name.git (or export MEMSYNC_REPO=owner/name)"
    if "not inside a git repository" in message:
        return "cd into the repository's checkout (or export MEMSYNC_REPO=owner/name)"
    if "does not name" in message:
        return (
            "git remote set-url origin git@HOST:owner/name.git (or export MEMSYNC_REPO=owner/name)"
        )
    return "give the repo as owner/name, e.g. --repo acme/app or MEMSYNC_REPO=acme/app"


def _repo_row(repo: RepoIdentity | ConfigError) -> dict[str, Any]:
    from sync_client.errors import ConfigError

    if isinstance(repo, ConfigError):
        return _row("repo", False, str(repo), _repo_fix(repo))
    return _row("repo", True, f"{repo.name} (from {repo.source})")


def _nearest_existing(path: Path) -> Path:
    for folder in (path, *path.parents):
        if folder.exists():
            return folder
    return Path(path.anchor)


def _team_dir_row(team_dir: Path | ConfigError) -> dict[str, Any]:
    from sync_client.config import RefusedTeamDir
    from sync_client.errors import ConfigError

    if isinstance(team_dir, ConfigError):
        detail = str(team_dir)
        fix = "export MEMSYNC_DIR=/absolute/folder (a folder of its own, e.g. ~/memsync/app)"
        if isinstance(team_dir, RefusedTeamDir):
            # Keys, credentials or the home folder: the fix is a folder of its own.
            detail = team_dir.problem
            key = team_dir.refusal.private_key
            if key is not None:
                fix = f"move {key} out of that folder, or {fix}"
        elif "not inside a git repository" in detail:
            fix = "cd into the repository's checkout (or export MEMSYNC_DIR=/absolute/folder)"
        return _row("team dir", False, detail, fix)
    if team_dir.exists() and not team_dir.is_dir():
        return _row(
            "team dir",
            False,
            f"{team_dir} is a file, not a folder",
            f"move {team_dir} away, or pass --dir to use another folder",
        )
    if team_dir.is_dir():
        from sync_client.ignore_rules import IGNORE_FILE, IgnoreFileError, read_ignore_rules

        try:
            read_ignore_rules(team_dir)
        except IgnoreFileError as error:
            return _row(
                "team dir",
                False,
                str(error),
                f"fix that line of {team_dir / IGNORE_FILE}, or remove the file",
            )
        if os.access(team_dir, os.W_OK):
            return _row("team dir", True, str(team_dir))
        return _row("team dir", False, f"{team_dir} is not writable", f"chmod u+w {team_dir}")
    parent = _nearest_existing(team_dir)
    if os.access(parent, os.W_OK):
        return _row("team dir", True, f"{team_dir} (created by the first pull)")
    return _row(
        "team dir",
        False,
        f"{team_dir} does not exist and {parent} is not writable",
        f"mkdir -p {team_dir} as a user who may write {parent}, or pass --dir",
    )


def _server_fix(error: MemsyncError) -> str:
    from sync_client.errors import NetworkError, NotAMemsyncServer

    if isinstance(error, NotAMemsyncServer):
        return _WRONG_SERVER_FIX
    if isinstance(error, NetworkError):
        return (
            "start the server (`memsync-server serve`),"
            " or fix the URL: `memsync login --server URL`"
        )
    return "retry in a minute; if it persists, ask the server's operator to read its log"


def _auth_fix(error: MemsyncError, repo: str | None) -> str:
    from sync_client.errors import AuthError

    if isinstance(error, AuthError) and error.status == 403 and repo is not None:
        return (
            f"ask the server's operator for a token that reaches {repo}"
            f" (`memsync-server token create --repo {repo}`), then run `memsync login`"
        )
    return _LOGIN_FIX


def _server_clock(dates: tuple[str, ...]) -> datetime | None:
    """The first of the `Date` values that is a date with a zone (HTTP's form), in UTC;
    None when none is."""
    from datetime import UTC

    for value in dates:
        try:
            stamp = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            continue
        if stamp.tzinfo is not None:
            return stamp.astimezone(UTC)
    return None


def _clock_row(health: Health | None) -> dict[str, Any]:
    from datetime import UTC, datetime

    if health is None:
        return _skipped("clock")
    if not health.dates:
        return _row("clock", True, "the server sent no Date header: not compared")
    server_clock = _server_clock(health.dates)
    if server_clock is None:
        return _row("clock", True, "the server's Date header is not a date: not compared")
    skew = abs((datetime.now(UTC) - server_clock).total_seconds())
    return _row(
        "clock",
        skew < CLOCK_SKEW_SECONDS,
        f"{skew:.0f} s from the server's clock",
        "turn on network time: `sudo timedatectl set-ntp true` (macOS: System Settings,"
        " Date & Time, set automatically)",
    )


def _remote_rows(
    api: Api, token: str | None, repo: str | None
) -> tuple[dict[str, Any], dict[str, Any], Health | None]:
    """The server and auth rows, and the liveness answer (None unless the server passed).

    The server check must tell a memsync server from any other HTTP server: its
    liveness object first, then the API's own answers. Auth is judged only once the
    server passed, so a wrong URL never shows an "ok auth".
    """
    from sync_client.errors import AuthError, MemsyncError

    server = api.server
    try:
        health = api.health()
    except MemsyncError as error:
        return _row("server", False, str(error), _server_fix(error)), _skipped("auth"), None
    if token is None:
        return (
            _row("server", True, f"memsync server at {server} (liveness only: no token)"),
            _skipped("auth", "skipped: needs a token (see config)"),
            health,
        )
    info: TokenInfo | None = None
    remote: RemoteState | None = None
    try:
        info = api.token_info()
        if repo is not None:
            remote = api.hashes()
    except AuthError as error:
        detail = str(error) if info is None else f"{describe_token(info)}: it does not reach {repo}"
        return (
            _row("server", True, f"memsync server at {server}"),
            _row("auth", False, detail, _auth_fix(error, repo)),
            health,
        )
    except MemsyncError as error:
        # Not the server it claims to be: its clock says nothing either.
        return _row("server", False, str(error), _server_fix(error)), _skipped("auth"), None
    assert info is not None
    detail = describe_token(info)
    if remote is not None:
        detail += f"; {repo} holds {len(remote.entry_checksums)} entries on the server"
    else:
        detail += "; access to the repo not checked (no repo identity)"
    return _row("server", True, f"memsync server at {server}"), _row("auth", True, detail), health


def _index_row(team_dir: Path | ConfigError, state_dir: Path | None = None) -> dict[str, Any]:
    """The team's MEMORY.md as Claude Code reads it: a warning row for its health, a
    failed one when it cannot be shared at all. A MEMORY.md missing here is never "no
    index" when the last sync kept the team's (`state_dir`), and never said to be absent
    for the team: only the server knows that, and a pull brings it."""
    from sync_client.errors import ConfigError
    from sync_client.index import team as team_index
    from sync_client.state import load_state

    if isinstance(team_dir, ConfigError):
        return _skipped("index", "skipped: needs a team dir")
    try:
        scanned = team_index.scan_alone(team_dir)
    except (OSError, ConfigError) as error:
        return _skipped("index", f"skipped: the team dir cannot be read ({error})")
    blocked = team_index.blocked(item.as_row() for item in scanned.skipped)
    if blocked is not None:
        why = blocked.get("label") or str(blocked["reason"]).replace("-", " ")
        return _row(
            "index",
            False,
            f"MEMORY.md is not being shared with the team ({why})",
            "run `memsync status` for the line and the fix",
        )
    team_text = team_index.missing_team_index(team_dir, state_dir)
    if team_text is not None:
        lines = len(team_text.splitlines())
        return _row(
            "index",
            True,
            f"MEMORY.md is missing here; the team's has {lines:,} lines: the next pull (or a "
            "running watcher) writes it back",
        )
    deleted = None if state_dir is None else team_index.team_deleted(load_state(state_dir))
    if deleted is not None:
        from sync_client.index.deleted import RESTORE, who

        return _row(
            "index",
            False,
            f"the team's MEMORY.md was deleted for the team {who(deleted)}: Claude Code "
            "finds no note through it",
            f"run `{RESTORE}` (never start a new one)",
        )
    report = team_index.health(team_dir, scanned, state_dir)
    if not report.problems:
        if report.load is None:
            return _row(
                "index", True, "no MEMORY.md here yet (`memsync pull` brings the team's, if any)"
            )
        return _row("index", True, f"MEMORY.md: {report.load.lines:,} lines, every note listed")
    counts: dict[str, int] = {}
    for problem in report.problems:
        counts[problem.kind] = counts.get(problem.kind, 0) + 1
    words = {
        "too-long": "longer than Claude Code loads",
        "dangling": "line(s) linking to missing notes",
        "orphan": "note(s) no line lists",
        "no-frontmatter": "note(s) without name/description",
    }
    detail = "; ".join(
        words[kind] if kind == "too-long" else f"{count} {words.get(kind, kind)}"
        for kind, count in counts.items()
    )
    row = _row("index", True, f"MEMORY.md: {detail}", "run `memsync index` (and `--fix`)")
    row["warning"] = True
    row["index"] = report.as_json()
    return row


def _claude_code_row(
    team_dir: Path | ConfigError, cwd: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    """Whether Claude Code sessions here will see the team index: memsync's hook in the
    user's settings, and the team dir where Claude Code keeps this project's memory."""
    from sync_client.agents import agent
    from sync_client.config import git_root, user_home
    from sync_client.errors import ConfigError

    if isinstance(team_dir, ConfigError):
        return _skipped("claude code", "skipped: needs a team dir")
    integration = agent("claude-code")
    if not integration.hook_installed(env, user_home(env)):
        others = _hooked_agents(env)
        if others:
            where = ", ".join(other.name for other in others)
            return _row(
                "claude code",
                True,
                f"no memsync hook in Claude Code's settings (memsync is set up in {where})",
                "run `memsync setup claude-code` if Claude Code is used here too",
            )
        row = _row(
            "claude code",
            True,
            "no memsync hook in Claude Code's settings: its sessions do not load the team index",
            "run `memsync setup claude-code`",
        )
        row["warning"] = True
        return row
    root = git_root(cwd)
    expected = None if root is None else integration.team_dir(root, user_home(env), env)
    if expected is not None and expected != team_dir:
        row = _row(
            "claude code",
            True,
            f"sessions get the team index, but the team dir is not Claude Code's folder for "
            f"this checkout ({expected})",
            "unset MEMSYNC_DIR (or `--dir`) to sync Claude Code's own folder",
        )
        row["warning"] = True
        return row
    has_tool_use = getattr(integration, "tool_use_hook_installed", None)
    if has_tool_use is not None and not has_tool_use(env, user_home(env)):
        row = _row(
            "claude code",
            True,
            "sessions get the team index, but no PostToolUse hook: the notes they write "
            "do not name their session in history",
            "run `memsync setup claude-code` again",
        )
        row["warning"] = True
        return row
    return _row("claude code", True, "sessions here start with the team index (`memsync context`)")


def _hooked_agents(env: Mapping[str, str]) -> list[Agent]:
    """The agents other than Claude Code with memsync's session hook in their settings
    (Codex, Gemini CLI, Qwen Code): a person who uses only those is not warned about
    Claude Code's."""
    from sync_client.agents import AGENTS, agent
    from sync_client.config import user_home

    home = user_home(env)
    return [
        agent(name)
        for name in AGENTS
        if name != "claude-code" and agent(name).hook_installed(env, home) is True
    ]


def _folder_agents(env: Mapping[str, str]) -> list[Agent]:
    """The agents other than Claude Code that keep a team dir of their own and have
    memsync's session hook in their settings (Qwen Code)."""
    from sync_client.agents import AGENTS, agent
    from sync_client.config import user_home

    home = user_home(env)
    found = []
    for name in AGENTS:
        integration = agent(name)
        # Any folder asks whether the agent keeps a team dir at all (a pure path rule).
        has_folder = integration.team_dir(home, home, env) is not None
        if name != "claude-code" and has_folder and integration.hook_installed(env, home):
            found.append(integration)
    return found


def _folder_agent_rows(
    team_dir: Path | ConfigError, cwd: Path, env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per agent of `_folder_agents`: its sessions get the team index, and
    whether the team dir is that agent's own folder for this checkout (its tools write
    there without asking)."""
    from sync_client.config import git_root, user_home
    from sync_client.errors import ConfigError

    rows = []
    for integration in _folder_agents(env):
        root = git_root(cwd)
        if isinstance(team_dir, ConfigError) or root is None:
            rows.append(_skipped(integration.name, "skipped: needs a team dir"))
            continue
        expected = integration.team_dir(root, user_home(env), env)
        if expected is not None and expected != team_dir:
            row = _row(
                integration.name,
                True,
                f"sessions get the team index, but the team dir is not its own folder for "
                f"this checkout ({expected}): it asks before writing a note there",
                "nothing to do when Claude Code shares the checkout; otherwise unset "
                "MEMSYNC_DIR (or `--dir`)",
            )
            row["warning"] = True
        else:
            row = _row(integration.name, True, "sessions here start with the team index")
        rows.append(row)
    return rows


def run_checks(options: Mapping[str, Any], *, cwd: Path, env: Mapping[str, str]) -> dict[str, Any]:
    """Every check, as `memsync doctor --json` prints it: `{ok, checks, repo}`.

    `checks` is one row per check, `{check, ok, detail, fix, skipped}`; `repo` is the
    identity the other commands would use, `{name, source}`, or None when there is none.
    """
    from sync_client.api import Api
    from sync_client.config import RepoIdentity, resolve_options_parts

    parts = resolve_options_parts(options, cwd=cwd, env=env)
    rows = [_config_row(parts), _repo_row(parts.repo), _team_dir_row(parts.team_dir)]
    repo = parts.repo.name if isinstance(parts.repo, RepoIdentity) else None
    if isinstance(parts.server, str):
        token = parts.token if isinstance(parts.token, str) else None
        # Api needs a repo; without one only the repo-free requests are made.
        with Api(parts.server, token or "", repo or "", timeout=DOCTOR_TIMEOUT_SECONDS) as api:
            server_row, auth_row, health = _remote_rows(api, token, repo)
        rows += [server_row, auth_row, _clock_row(health)]
    else:
        needs_url = "skipped: needs a server URL (see config)"
        rows += [_skipped("server", needs_url), _skipped("auth"), _skipped("clock")]
    state_dir = None
    if isinstance(parts.server, str) and repo is not None and isinstance(parts.team_dir, Path):
        from sync_client.config import state_dir_for

        state_dir = state_dir_for(env, parts.server, repo, parts.team_dir)
    rows.append(_index_row(parts.team_dir, state_dir))
    rows.append(_claude_code_row(parts.team_dir, cwd, env))
    rows += _folder_agent_rows(parts.team_dir, cwd, env)
    identity = (
        {"name": parts.repo.name, "source": parts.repo.source}
        if isinstance(parts.repo, RepoIdentity)
        else None
    )
    return {"ok": all(row["ok"] for row in rows), "checks": rows, "repo": identity}
