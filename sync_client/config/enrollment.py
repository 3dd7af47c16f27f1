"""Enrolled repos (`memsync enable`), kept in `repos.toml` in the config folder and served
by one `memsync watch --all` per person.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_client.config.credentials import normalize_server, read_credentials
from sync_client.config.paths import (
    CONFIG_FILE,
    _load_toml,
    _make_private_dirs,
    _read_toml_strings,
    _toml_string,
    config_home,
    user_home,
)
from sync_client.config.resolution import (
    _CONFIG_KEYS,
    _LOGIN_HINT,
    ClientConfig,
    _choose_server,
    _resolve_repo,
    _resolve_team_dir,
    resolve,
)
from sync_client.config.team_dir import validate_team_dir
from sync_client.errors import ConfigError, NoCredentials
from sync_client.state import atomic_write

ENROLLED_FILE = "repos.toml"

_ENROLLED_KEYS = ("server", "repo", "dir", "root")


@dataclass(frozen=True)
class Enrollment:
    """One enrolled repo: its team dir on its server (and the git checkout, if known).

    `git_root` is where the repo was enabled: its git config is the watcher's recovery
    signal for a missing repo identity, and the directory a config is resolved in.
    """

    server: str
    repo: str
    team_dir: Path
    git_root: Path | None = None

    def as_json(self) -> dict[str, str | None]:
        """`{server, repo, dir, root}` as `memsync status --all --json` prints it."""
        return {
            "server": self.server,
            "repo": self.repo,
            "dir": str(self.team_dir),
            "root": None if self.git_root is None else str(self.git_root),
        }

    def same_target(self, other: Enrollment) -> bool:
        """The same (server, repo, team dir): the identity of its local state."""
        return (self.server, self.repo, self.team_dir) == (
            other.server,
            other.repo,
            other.team_dir,
        )


def _enrolled_path(home_dir: Path) -> Path:
    return home_dir / ENROLLED_FILE


def read_enrolled(home_dir: Path) -> list[Enrollment]:
    """The repos enrolled in `repos.toml` in `home_dir` (the `config_home`), in order.

    [] when the file does not exist. Raises `ConfigError` (one line, naming the file)
    when it cannot be read or an entry is malformed.
    """
    path = _enrolled_path(home_dir)
    data = _load_toml(path)
    if data is None:
        return []
    unknown = [key for key in data if key != "repo"]
    if unknown or not isinstance(data.get("repo", []), list):
        raise ConfigError(f"{path}: expected only [[repo]] tables")
    home = user_home(os.environ)
    enrolled: list[Enrollment] = []
    for index, table in enumerate(data.get("repo", []), start=1):
        where = f"{path}: repo {index}"
        if not isinstance(table, dict) or any(key not in _ENROLLED_KEYS for key in table):
            raise ConfigError(f"{where}: expected the keys {', '.join(_ENROLLED_KEYS)}")
        if not all(isinstance(value, str) for value in table.values()):
            raise ConfigError(f"{where}: every value must be a string")
        if not all(key in table for key in ("server", "repo", "dir")):
            raise ConfigError(f"{where}: server, repo and dir are required")
        try:
            repo = normalize_repo(table["repo"])
        except InvalidRepoError as error:
            raise ConfigError(f"{where}: repo must be owner/name") from error
        root = table.get("root")
        try:
            team_dir = validate_team_dir(table["dir"], home)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from error
        enrolled.append(
            Enrollment(
                server=normalize_server(table["server"], where),
                repo=repo,
                team_dir=team_dir,
                git_root=Path(root) if root and os.path.isabs(root) else None,
            )
        )
    return enrolled


def _write_enrolled(home_dir: Path, enrolled: list[Enrollment]) -> None:
    lines = ["# Repos served by `memsync watch --all`; written by `memsync enable`.\n"]
    for item in enrolled:
        lines.append("\n[[repo]]\n")
        for key, value in item.as_json().items():
            if value is not None:
                lines.append(f"{key} = {_toml_string(value)}\n")
    path = _enrolled_path(home_dir)
    try:
        _make_private_dirs(home_dir)
        atomic_write(path, "".join(lines).encode("utf-8"), mode=0o600)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error.strerror or error}") from error


def enroll(home_dir: Path, enrollment: Enrollment) -> bool:
    """Add `enrollment` to `repos.toml`; False when that target was enrolled already
    (its git root is then updated)."""
    enrolled = read_enrolled(home_dir)
    for index, item in enumerate(enrolled):
        if item.same_target(enrollment):
            if enrollment.git_root is not None and item.git_root != enrollment.git_root:
                enrolled[index] = enrollment
                _write_enrolled(home_dir, enrolled)
            return False
    _write_enrolled(home_dir, [*enrolled, enrollment])
    return True


def unenroll(
    home_dir: Path, *, repo: str, server: str | None = None, team_dir: Path | None = None
) -> list[Enrollment]:
    """Remove the enrolled entries of `repo` (on `server`, for `team_dir`, when given);
    return the removed ones."""
    enrolled = read_enrolled(home_dir)
    removed = [
        item
        for item in enrolled
        if item.repo == repo
        and (server is None or item.server == server)
        and (team_dir is None or item.team_dir == team_dir)
    ]
    if removed:
        _write_enrolled(home_dir, [item for item in enrolled if item not in removed])
    return removed


def resolve_target(
    *,
    server: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    require_server: bool = True,
    require_team_dir: bool = True,
) -> tuple[str | None, str, Path | None]:
    """(server, repo, team dir) as `resolve` would choose them, without needing a token.

    For `memsync enable` and `disable`. A server or team dir that is not required and
    cannot be found is None. Raises like `resolve`; a team dir that is not required
    (`disable`) is not held to `team_dir_refusal`, so turning off a folder that came to
    hold a key still works.
    """
    home = user_home(env)
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    credentials = read_credentials(directory)
    chosen_server = _choose_server(server, env, user_config, config_path, credentials)
    if chosen_server is None and require_server:
        raise NoCredentials(f"no server URL: {_LOGIN_HINT}")
    resolved_server = None if chosen_server is None else normalize_server(*chosen_server)
    resolved_repo = _resolve_repo(repo, env, user_config, str(config_path), cwd).name
    try:
        resolved_dir: Path | None = _resolve_team_dir(
            team_dir, env, user_config, str(config_path), cwd, home, sensitive=require_team_dir
        )
    except ConfigError:
        if require_team_dir or team_dir is not None or env.get("MEMSYNC_DIR"):
            raise
        resolved_dir = None
    return resolved_server, resolved_repo, resolved_dir


def enrolled_config(
    enrollment: Enrollment, *, token: str | None, env: Mapping[str, str]
) -> ClientConfig:
    """The `ClientConfig` of an enrolled repo: its own server, repo and team dir; the
    token from `token`, MEMSYNC_TOKEN or the credentials saved for that server."""
    return resolve(
        server=enrollment.server,
        token=token,
        repo=enrollment.repo,
        team_dir=str(enrollment.team_dir),
        cwd=enrollment.git_root or user_home(env),
        env=env,
        team_dir_source=f"{_enrolled_path(config_home(env))}: {enrollment.repo}",
    )
