"""The client's configuration, from trusted sources only (docs/protocol.md 2, 4.1, 4.7).

Each of server URL, token, repo and team dir is taken from the first source that has it:

1. a command-line flag (the explicit arguments of `resolve`);
2. the environment: `MEMSYNC_SERVER`, `MEMSYNC_TOKEN`, `MEMSYNC_REPO`, `MEMSYNC_DIR`
   (an empty variable counts as unset);
3. the user's own files in `config_home` (`~/.config/memsync/`): `config.toml` may hold
   `server`, `repo` and `dir`; `credentials.toml` holds `server` and `token` and is
   written by `write_credentials` with mode 0600;
4. derived: the repo from the git remote `origin`, the team dir from the canonical git
   root in Claude Code's layout (`~/.claude/projects/<sanitized root>/memory/team`,
   `sync_client.claude_code`, where Claude Code's own facts live).

Nothing is ever read from a file inside a repository or a team dir. Anyone who can push
to the repository controls those, and could otherwise send the team's memory and the
token to their own server, or turn `~/.ssh` into the team dir.

A token stays with the server it was saved for: the token in `credentials.toml` is used
only when the resolved server is the one saved next to it (or none is saved there), so
pointing `MEMSYNC_SERVER` or `--server` somewhere else never sends that token there.

The work is split by concern, one module each: `paths` (the config and state folders),
`git` (the checkout's root and origin, from git's files), `team_dir` (the default team
dir and the safety refusals), `credentials` (the saved server and token), `resolution`
(flags, environment, files and git, in that order) and `enrollment` (`repos.toml`).
Every public name is importable from `sync_client.config` itself, as before the split.
"""

from __future__ import annotations

from sync_client.config.credentials import (
    normalize_server,
    read_credentials,
    remove_credentials,
    write_credentials,
)
from sync_client.config.enrollment import (
    ENROLLED_FILE,
    Enrollment,
    enroll,
    enrolled_config,
    read_enrolled,
    resolve_target,
    unenroll,
)
from sync_client.config.git import (
    GIT_TIMEOUT_SECONDS,
    _AskGit,
    _origin_from_config,
    _parse_git_config,
    _read_checkout,
    git_config_path,
    git_root,
    origin_url,
    parse_remote_url,
)
from sync_client.config.paths import (
    CONFIG_FILE,
    CREDENTIALS_FILE,
    config_home,
    state_dir_for,
    state_home,
    user_home,
)
from sync_client.config.resolution import (
    ClientConfig,
    ConfigParts,
    RepoIdentity,
    resolve,
    resolve_options,
    resolve_options_parts,
    resolve_parts,
    resolve_repo,
    resolve_server,
)
from sync_client.config.team_dir import (
    RefusedTeamDir,
    TeamDirRefusal,
    _starts_like_a_key,
    default_team_dir,
    team_dir_refusal,
    validate_team_dir,
)

# The private names above are kept for the tests that reach into the git reader and the
# key sniffer through this package; patch them in their own module.
__all__ = [
    "CONFIG_FILE",
    "CREDENTIALS_FILE",
    "ENROLLED_FILE",
    "GIT_TIMEOUT_SECONDS",
    "ClientConfig",
    "ConfigParts",
    "Enrollment",
    "RefusedTeamDir",
    "RepoIdentity",
    "TeamDirRefusal",
    "_AskGit",
    "_origin_from_config",
    "_parse_git_config",
    "_read_checkout",
    "_starts_like_a_key",
    "config_home",
    "default_team_dir",
    "enroll",
    "enrolled_config",
    "git_config_path",
    "git_root",
    "normalize_server",
    "origin_url",
    "parse_remote_url",
    "read_credentials",
    "read_enrolled",
    "remove_credentials",
    "resolve",
    "resolve_options",
    "resolve_options_parts",
    "resolve_parts",
    "resolve_repo",
    "resolve_server",
    "resolve_target",
    "state_dir_for",
    "state_home",
    "team_dir_refusal",
    "unenroll",
    "user_home",
    "validate_team_dir",
    "write_credentials",
]
