"""Resolution: which server, token, repo and team dir a command uses, each from the first
trusted source that has it (flag, environment, the user's config files, then derived
from the git checkout; see the package docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_client.config.credentials import _check_token, normalize_server, read_credentials
from sync_client.config.git import (
    _local_remote_path,
    _shown_remote,
    git_root,
    origin_url,
    parse_remote_url,
)
from sync_client.config.paths import (
    CONFIG_FILE,
    CREDENTIALS_FILE,
    _read_toml_strings,
    _state_dir,
    config_home,
    user_home,
)
from sync_client.config.team_dir import _check_team_dir, default_team_dir, validate_team_dir
from sync_client.errors import ConfigError, NoCredentials, NoRepoIdentity

_CONFIG_KEYS = ("server", "repo", "dir")

_LOGIN_HINT = "set MEMSYNC_SERVER/MEMSYNC_TOKEN or run `memsync login`"


@dataclass(frozen=True)
class ClientConfig:
    """Everything the client needs to talk to a server about one team dir.

    `state_dir` is where the client keeps its local state (docs/protocol.md 4.1), outside the
    team dir and distinct for every (server, repo, team dir).
    """

    server: str
    token: str = field(repr=False)
    repo: str
    team_dir: Path
    state_dir: Path
    # Where `repo` came from, in words (`memsync doctor` prints it): "--repo",
    # "MEMSYNC_REPO", the config file's path, or "git remote origin <url>".
    repo_source: str = ""
    # None: the team's memory; "personal": the person's own space (`sync_client.personal`).
    space: str | None = None


@dataclass(frozen=True)
class RepoIdentity:
    """The repo a checkout syncs as, and where that name came from, in words."""

    name: str
    source: str


def _first(*candidates: tuple[str | None, str]) -> tuple[str, str] | None:
    """The first (value, source) whose value is not None."""
    for value, source in candidates:
        if value is not None:
            return value, source
    return None


def _resolve_token(
    token: str | None,
    env: Mapping[str, str],
    server: str | None,
    credentials: Mapping[str, str],
    credentials_path: Path,
) -> str:
    """The token: `--token`, MEMSYNC_TOKEN, or the one saved for `server` (for any
    server when `server` is None, i.e. unknown)."""
    chosen = _first((token, "--token"), (env.get("MEMSYNC_TOKEN") or None, "MEMSYNC_TOKEN"))
    if chosen is not None:
        return _check_token(*chosen)
    saved_token = credentials.get("token")
    if saved_token is None:
        raise NoCredentials(f"no token: {_LOGIN_HINT}")
    saved_server = credentials.get("server")
    if (
        server is not None
        and saved_server is not None
        and normalize_server(saved_server, str(credentials_path)) != server
    ):
        raise NoCredentials(
            f"the token in {credentials_path} is for {saved_server}, not {server}: {_LOGIN_HINT}"
        )
    return _check_token(saved_token, str(credentials_path))


def _repo_from_origin(cwd: Path) -> RepoIdentity:
    """The repo the git remote `origin` of the checkout holding `cwd` names."""
    url = origin_url(cwd)
    if url is None:
        where = (
            "this git repository has no remote origin"
            if git_root(cwd)
            else f"{cwd} is not inside a git repository"
        )
        raise NoRepoIdentity(f"no repo: {where}; pass --repo owner/name or set MEMSYNC_REPO")
    derived = parse_remote_url(url)
    if derived is not None:
        return RepoIdentity(derived, f"git remote origin {_shown_remote(url)}")
    local = _local_remote_path(url)
    if local is not None:
        # A path names one machine's folder: teammates' clones would each derive a
        # different name, or none, so the team must agree on one explicitly.
        shown = local if local.isprintable() else repr(local)
        raise NoRepoIdentity(
            f"the git remote origin is a local path ({shown}), not a hosted repo:"
            " set MEMSYNC_REPO=owner/name so teammates share one memory"
        )
    # The URL is not shown: it may carry a password or token.
    raise NoRepoIdentity(
        "no repo: the git remote origin does not name host/owner/name;"
        " pass --repo owner/name or set MEMSYNC_REPO"
    )


def _resolve_repo(
    repo: str | None, env: Mapping[str, str], user_config: Mapping[str, str], source: str, cwd: Path
) -> RepoIdentity:
    """`owner/name`: `--repo`, MEMSYNC_REPO, config.toml, or the git remote `origin`."""
    chosen = _first(
        (repo, "--repo"),
        (env.get("MEMSYNC_REPO") or None, "MEMSYNC_REPO"),
        (user_config.get("repo"), source),
    )
    if chosen is None:
        return _repo_from_origin(cwd)
    value, value_source = chosen
    try:
        return RepoIdentity(normalize_repo(value), value_source)
    except InvalidRepoError as error:
        raise ConfigError(
            f"{value_source}: repo must be owner/name (letters, digits, '.', '_', '-'),"
            f" got {value!r}"
        ) from error


def _resolve_team_dir(
    team_dir: str | None,
    env: Mapping[str, str],
    user_config: Mapping[str, str],
    source: str,
    cwd: Path,
    home: Path,
    *,
    flag_source: str = "--dir",
    sensitive: bool = True,
) -> Path:
    """The team dir: `--dir`, MEMSYNC_DIR, config.toml, or Claude Code's for the git root.

    Unless not `sensitive`, a folder `team_dir_refusal` refuses is a `RefusedTeamDir`,
    wherever it came from; this costs a few `realpath` calls and one bounded listing,
    once per resolve (a watcher resolves when it starts and on its signals only).
    `flag_source` names the first source in messages (an enrolment passes its entry).
    """
    chosen = _first(
        (team_dir, flag_source),
        (env.get("MEMSYNC_DIR") or None, "MEMSYNC_DIR"),
        (user_config.get("dir"), source),
    )
    if chosen is not None:
        value, value_source = chosen
        try:
            path = validate_team_dir(value, home)
        except ConfigError as error:
            raise ConfigError(f"{value_source}: {error}") from error
        return _check_team_dir(path, home, env, value, value_source) if sensitive else path
    root = git_root(cwd)
    if root is None:
        raise ConfigError(
            f"no team dir: {cwd} is not inside a git repository; pass --dir or set MEMSYNC_DIR"
        )
    path = default_team_dir(root, home, env)
    return _check_team_dir(path, home, env, str(path), None) if sensitive else path


def _choose_server(
    server: str | None,
    env: Mapping[str, str],
    user_config: Mapping[str, str],
    config_path: Path,
    credentials: Mapping[str, str],
) -> tuple[str, str] | None:
    """(server URL, where it came from): the flag, MEMSYNC_SERVER, config.toml, then the
    server saved with the credentials; None when none of them names one."""
    return _first(
        (server, "--server"),
        (env.get("MEMSYNC_SERVER") or None, "MEMSYNC_SERVER"),
        (user_config.get("server"), str(config_path)),
        (credentials.get("server"), str(config_path.with_name(CREDENTIALS_FILE))),
    )


def resolve_server(server: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(normalized server URL, where it came from) as every command chooses it, or None
    when no flag, variable or file names one (for `memsync login`).

    Raises `ConfigError` for a bad URL (naming its source) or a malformed user file.
    """
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    chosen = _choose_server(server, env, user_config, config_path, read_credentials(directory))
    if chosen is None:
        return None
    return normalize_server(*chosen), chosen[1]


def resolve_repo(repo: str | None, *, cwd: Path, env: Mapping[str, str]) -> RepoIdentity:
    """The repo `cwd` syncs as and where the name came from: `--repo`, MEMSYNC_REPO,
    config.toml, or the git remote `origin`. Raises `NoRepoIdentity` or `ConfigError`."""
    config_path = config_home(env) / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    return _resolve_repo(repo, env, user_config, str(config_path), cwd)


T = TypeVar("T")


def _attempt(step: Callable[[], T]) -> T | ConfigError:
    """`step()`, or the `ConfigError` it raised."""
    try:
        return step()
    except ConfigError as error:
        return error


@dataclass(frozen=True)
class ConfigParts:
    """Each part of a `ClientConfig` resolved on its own: its value, or the `ConfigError`
    that part met. `memsync doctor` reports every part even when one fails."""

    server: str | ConfigError
    token: str | ConfigError = field(repr=False)
    repo: RepoIdentity | ConfigError
    team_dir: Path | ConfigError

    def config(self, env: Mapping[str, str]) -> ClientConfig:
        """The whole `ClientConfig`; raises the first error, in the order server, token,
        repo, team dir."""
        server, token, repo, team_dir = self.server, self.token, self.repo, self.team_dir
        if isinstance(server, ConfigError):
            raise server
        if isinstance(token, ConfigError):
            raise token
        if isinstance(repo, ConfigError):
            raise repo
        if isinstance(team_dir, ConfigError):
            raise team_dir
        return ClientConfig(
            server=server,
            token=token,
            repo=repo.name,
            team_dir=team_dir,
            state_dir=_state_dir(env, server, repo.name, team_dir),
            repo_source=repo.source,
        )


def resolve_parts(
    *,
    server: str | None,
    token: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    team_dir_source: str | None = None,
) -> ConfigParts:
    """Server, token, repo and team dir, each resolved as `resolve` does, each on its own:
    a part that fails does not stop the others (a malformed user file fails every part
    read from it). `team_dir_source` names where `team_dir` came from in messages
    (default `--dir`)."""
    home = user_home(env)
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    credentials_path = directory / CREDENTIALS_FILE
    user_config = _attempt(lambda: _read_toml_strings(config_path, _CONFIG_KEYS))
    credentials = _attempt(lambda: read_credentials(directory))

    def choose_server() -> str:
        if isinstance(user_config, ConfigError):
            raise user_config
        if isinstance(credentials, ConfigError):
            raise credentials
        chosen = _choose_server(server, env, user_config, config_path, credentials)
        if chosen is None:
            raise NoCredentials(f"no server URL: {_LOGIN_HINT}")
        return normalize_server(*chosen)

    resolved_server = _attempt(choose_server)

    def choose_token() -> str:
        if isinstance(credentials, ConfigError):
            raise credentials
        known_server = resolved_server if isinstance(resolved_server, str) else None
        return _resolve_token(token, env, known_server, credentials, credentials_path)

    def choose_repo() -> RepoIdentity:
        if isinstance(user_config, ConfigError):
            raise user_config
        return _resolve_repo(repo, env, user_config, str(config_path), cwd)

    def choose_team_dir() -> Path:
        if isinstance(user_config, ConfigError):
            raise user_config
        return _resolve_team_dir(
            team_dir,
            env,
            user_config,
            str(config_path),
            cwd,
            home,
            flag_source=team_dir_source or "--dir",
        )

    return ConfigParts(
        server=resolved_server,
        token=_attempt(choose_token),
        repo=_attempt(choose_repo),
        team_dir=_attempt(choose_team_dir),
    )


def resolve(
    *,
    server: str | None,
    token: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    team_dir_source: str | None = None,
) -> ClientConfig:
    """The configuration for working in `cwd`: flags > environment > user config > derived.

    The explicit arguments are the command-line flags (None when not given). Raises
    `NoCredentials` without a server or token, `NoRepoIdentity` without a repo, and
    `ConfigError` for a bad value, naming where the value came from (`RefusedTeamDir`
    for a team dir that would share keys or credentials, see `team_dir_refusal`).
    """
    parts = resolve_parts(
        server=server,
        token=token,
        repo=repo,
        team_dir=team_dir,
        cwd=cwd,
        env=env,
        team_dir_source=team_dir_source,
    )
    return parts.config(env)


def _flags(options: Mapping[str, object]) -> dict[str, str | None]:
    """The global flags as the CLI collects them (`server`, `token`, `repo`, `team_dir`);
    absent or non-text ones count as not given."""

    def flag(name: str) -> str | None:
        value = options.get(name)
        return value if isinstance(value, str) else None

    return {name: flag(name) for name in ("server", "token", "repo", "team_dir")}


def resolve_options(
    options: Mapping[str, object], *, cwd: Path, env: Mapping[str, str]
) -> ClientConfig:
    """`resolve` with the global flags as the CLI collects them (`server`, `token`,
    `repo`, `team_dir`; absent or non-text ones count as not given)."""
    return resolve(**_flags(options), cwd=cwd, env=env)


def resolve_options_parts(
    options: Mapping[str, object], *, cwd: Path, env: Mapping[str, str]
) -> ConfigParts:
    """`resolve_parts` with the global flags as the CLI collects them (for doctor)."""
    return resolve_parts(**_flags(options), cwd=cwd, env=env)
