"""Your own memory on every machine: what memsync syncs to the person's personal spaces.

Two folders, each synced with the same workspace machinery as a team dir (push, pull,
merges, conflicts, the secret scan, history), only with the `Api` carrying
`space=personal` (docs/protocol.md 3.14):

- a repo's **private memory folder**, Claude Code's `memory/` beside the team dir
  `memory/team/`, minus `team/` (the `Api` hides that prefix both ways), to the
  person's space of that repo; both are keyed by the repo from the git remote, so every
  clone of it, at any path on any machine, meets the same space;
- the **user-scope agent memory**, `<config root>/agent-memory/` (one folder per agent
  type), to the person's global space (`repo=~`). A project's `.claude/agent-memory/`
  is the repository's, shared by git, and never touched.

Off by default, per enrolled repo: `memsync enable --personal` records the repo in
`personal.toml` in the client's config folder, never in the repository. Nothing of the
private folder leaves the machine unless that file names the repo.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sync_client.api import GLOBAL_REPO, PERSONAL_SPACE
from sync_client.claude_code import AGENT_MEMORY_FOLDERS, config_root
from sync_client.config.paths import (
    _load_toml,
    _make_private_dirs,
    _toml_string,
    state_dir_for,
    user_home,
)
from sync_client.config.resolution import ClientConfig
from sync_client.durable import atomic_write
from sync_client.errors import ConfigError
from sync_client.local import LocalScan
from sync_client.workspace import Workspace

PERSONAL_FILE = "personal.toml"
# The state dir of a personal folder is told apart from the team dir's by this mark.
STATE_MARK = "#personal"


@dataclass(frozen=True)
class PersonalRepo:
    """One repo whose private memory folder is synced to its person's space."""

    server: str
    repo: str


def read_personal(home_dir: Path) -> list[PersonalRepo]:
    """The repos `personal.toml` in `home_dir` (the config folder) turns personal sync on
    for; [] without the file. `ConfigError` (one line, naming the file) when malformed."""
    path = home_dir / PERSONAL_FILE
    data = _load_toml(path)
    if data is None:
        return []
    tables = data.get("personal", [])
    if set(data) - {"personal"} or not isinstance(tables, list):
        raise ConfigError(f"{path}: expected only [[personal]] tables")
    found = []
    for index, table in enumerate(tables, start=1):
        if (
            not isinstance(table, dict)
            or set(table) != {"server", "repo"}
            or not all(isinstance(value, str) for value in table.values())
        ):
            raise ConfigError(f"{path}: personal {index}: expected the strings server and repo")
        found.append(PersonalRepo(server=table["server"], repo=table["repo"]))
    return found


def set_personal(home_dir: Path, server: str, repo: str, *, on: bool) -> bool:
    """Turn personal sync of `repo` on `server` on or off; whether that changed anything."""
    current = read_personal(home_dir)
    item = PersonalRepo(server=server, repo=repo)
    if (item in current) == on:
        return False
    wanted = [*current, item] if on else [other for other in current if other != item]
    lines = ["# Repos whose private memory memsync syncs to your personal space.\n"]
    for other in wanted:
        lines.append(
            f"\n[[personal]]\nserver = {_toml_string(other.server)}\n"
            f"repo = {_toml_string(other.repo)}\n"
        )
    _make_private_dirs(home_dir)
    atomic_write(home_dir / PERSONAL_FILE, "".join(lines).encode("utf-8"), mode=0o600)
    return True


def is_personal_on(home_dir: Path, server: str, repo: str) -> bool:
    """Whether `memsync enable --personal` turned personal sync on for this repo."""
    return PersonalRepo(server=server, repo=repo) in read_personal(home_dir)


def private_folder(team_dir: Path) -> Path:
    """Claude Code's private memory folder of a team dir: `memory/` of `memory/team/`.

    `ConfigError` for a team dir elsewhere (set with --dir or MEMSYNC_DIR): its parent is
    no private memory folder, and syncing it could upload anything."""
    if team_dir.name != "team" or team_dir.parent.name != "memory":
        raise ConfigError(
            f"personal sync needs Claude Code's own team dir (…/memory/team), not {team_dir}"
        )
    return team_dir.parent


def personal_config(config: ClientConfig, env: Mapping[str, str]) -> ClientConfig:
    """The config syncing the private memory folder of `config`'s team dir with the
    person's space of its repo: the same server, token and repo, another folder and
    state dir, and `space=personal`."""
    folder = private_folder(config.team_dir)
    return dataclasses.replace(
        config,
        team_dir=folder,
        state_dir=state_dir_for(env, config.server, config.repo + STATE_MARK, folder),
        space=PERSONAL_SPACE,
    )


def agent_memory_folder(env: Mapping[str, str]) -> Path:
    """Claude Code's user-scope agent memory, `<config root>/agent-memory/`."""
    return config_root(user_home(env), env).joinpath(*AGENT_MEMORY_FOLDERS["user"])


def agent_memory_target(server: str, token: str, env: Mapping[str, str]) -> ClientConfig:
    """The config syncing the user-scope agent memory with the person's global space on
    `server` (with `token`): no repo or checkout needed, and the same state dir as the
    watcher's, so `memsync log --agents` and the watcher agree on what was synced."""
    folder = agent_memory_folder(env)
    return ClientConfig(
        server=server,
        token=token,
        repo=GLOBAL_REPO,
        team_dir=folder,
        state_dir=state_dir_for(env, server, GLOBAL_REPO + STATE_MARK, folder),
        repo_source="the person's global space",
        space=PERSONAL_SPACE,
    )


def agent_memory_config(config: ClientConfig, env: Mapping[str, str]) -> ClientConfig:
    """The config syncing the user-scope agent memory with the person's global space on
    `config`'s server (with its token)."""
    return agent_memory_target(config.server, config.token, env)


def space_words(repo: str, space: str | None) -> str:
    """A space named as its person knows it: "the team's memory of acme/app", "your
    personal memory for acme/app", "your agent memory"; never the server's internal id
    (`~alice/acme/app`) nor the global space's `~`."""
    if space is None:
        return f"the team's memory of {repo}"
    if repo == GLOBAL_REPO:
        return "your agent memory"
    return f"your personal memory for {repo}"


def index_scan(workspace: Workspace, scanned: LocalScan) -> LocalScan:
    """What of `scanned` the root index check reads: all of it, but nothing in the agent
    memory, where each agent's folder has its own `MEMORY.md` (the one Claude Code loads
    for that agent) and the root has no index to miss."""
    if workspace.api.space and workspace.api.repo == GLOBAL_REPO:
        return LocalScan(checksums={}, skipped=[], cache=scanned.cache)
    return scanned


def synced_folders(
    server: str, repo: str, folder: Path, space: str | None, home_dir: Path
) -> list[dict[str, str]]:
    """Which folder on this machine is synced with which space, for `memsync status`:
    [] for a team dir whose repo has personal sync off (the status says what it always
    said), else the team dir's and the private folder's rows."""
    on = is_personal_on(home_dir, server, repo)
    if space is None and not on:
        return []
    if space is None:
        rows = [{"folder": str(folder), "space": space_words(repo, None)}]
        with contextlib.suppress(ConfigError):
            rows.append(
                {
                    "folder": f"{private_folder(folder)} (minus team/)",
                    "space": space_words(repo, PERSONAL_SPACE),
                }
            )
        return rows
    if repo == GLOBAL_REPO:
        return [{"folder": str(folder), "space": space_words(repo, space)}]
    return [{"folder": f"{folder} (minus team/)", "space": space_words(repo, space)}]
