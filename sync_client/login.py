"""`memsync login`: check a server URL and a token against the server, then save them.

Nothing is saved when a check fails. The token's form is checked first, without a
request: a memsync token is `mst_` + 36 characters + a 6-character checksum, so a
token cut short or mistyped while copying is named as such. Then the server: its
liveness answer (`/healthz`), then what it says the token may do (`/v1/token`), then,
when the current directory has a repo identity, whether the token reaches that repo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync_protocol.tokens import TOKEN_PREFIX, is_well_formed_token
from sync_client.errors import ConfigError

if TYPE_CHECKING:
    from sync_client.answers import TokenInfo
    from sync_client.config import RepoIdentity

LOGIN_TIMEOUT_SECONDS = 10.0


def clean_token(raw: str) -> str:
    """The token in `raw`, without the spaces or newline a paste brings along.

    Raises `ConfigError` (exit 2) for a value that is not a memsync token, and for one
    whose checksum does not match (a character lost or changed while copying). The
    value itself is never shown.
    """
    token = raw.strip()
    if not token.startswith(TOKEN_PREFIX):
        raise ConfigError(
            f"this is not a memsync token: it does not start with {TOKEN_PREFIX};"
            " copy the whole token the server's operator gave you"
        )
    if not is_well_formed_token(token):
        raise ConfigError("this token is mistyped: its checksum does not match; copy it again")
    return token


@dataclass(frozen=True)
class LoginResult:
    """What `login` saved and learned.

    `token` is None with `verify=False`. `repo` is the current directory's identity (None
    outside a checkout or without one; `repo_problem` then says why, inside a checkout),
    and `covered` whether the token reaches it (None when not checked).
    """

    server: str
    credentials: Path
    token: TokenInfo | None
    repo: RepoIdentity | None
    covered: bool | None
    repo_problem: str | None

    def as_json(self) -> dict[str, Any]:
        """`{credentials, server, verified, token, repo, note}` for `memsync login --json`."""
        return {
            "credentials": str(self.credentials),
            "server": self.server,
            "verified": self.token is not None,
            "token": None if self.token is None else self.token.as_json(),
            "repo": None
            if self.repo is None
            else {"name": self.repo.name, "source": self.repo.source, "covered": self.covered},
            "note": self.repo_problem,
        }


def _current_repo(
    repo: str | None, cwd: Path, env: Mapping[str, str]
) -> tuple[RepoIdentity | None, str | None]:
    """(the repo identity of `cwd` or None, why there is none inside a git checkout)."""
    from sync_client.config import git_root, resolve_repo
    from sync_client.errors import NoRepoIdentity

    try:
        return resolve_repo(repo, cwd=cwd, env=env), None
    except NoRepoIdentity as error:
        return None, (str(error) if git_root(cwd) is not None else None)


def login(
    *,
    server: str,
    token: str,
    repo: str | None,
    cwd: Path,
    env: Mapping[str, str],
    verify: bool = True,
) -> LoginResult:
    """Check `token` (its form, then with `server` unless `verify` is False) and save both
    in the user's credentials file.

    `server` is a normalized base URL (`config.resolve_server`, `config.normalize_server`).
    Raises `ConfigError` for a malformed token or a bad `--repo`, and the failures of
    `Api` (`NotAMemsyncServer`, `NetworkError`, `AuthError`, ...) when a check fails; in
    every such case nothing is written.
    """
    from sync_client.api import Api
    from sync_client.config import config_home, write_credentials
    from sync_client.errors import AuthError

    token = clean_token(token)
    identity, repo_problem = _current_repo(repo, cwd, env)
    info = None
    covered = None
    if verify:
        with Api(
            server, token, identity.name if identity else "", timeout=LOGIN_TIMEOUT_SECONDS
        ) as api:
            api.health()
            info = api.token_info()
            if identity is not None:
                try:
                    api.hashes()
                    covered = True
                except AuthError as error:
                    if error.status != 403:
                        raise
                    covered = False
    path = write_credentials(config_home(env), server=server, token=token)
    return LoginResult(
        server=server,
        credentials=path,
        token=info,
        repo=identity,
        covered=covered,
        repo_problem=repo_problem,
    )
