"""The watcher's personal targets: for each enrolled repo with personal sync on
(`memsync enable --personal`), its private memory folder, and once per server the
user-scope agent memory (`sync_client.personal`). Each is one more `Target` of
`memsync watch --all`, served by the same `RepoWatcher` as a team dir, with its own
state dir and lock.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sync_client.api import GLOBAL_REPO, PERSONAL_SPACE
from sync_client.config import Enrollment, enrolled_config, state_dir_for
from sync_client.config.resolution import ClientConfig
from sync_client.personal import (
    STATE_MARK,
    agent_memory_config,
    agent_memory_folder,
    personal_config,
    private_folder,
    read_personal,
    space_words,
)
from sync_client.watch.settings import Target


def _private(item: Enrollment, token: str | None, env: Mapping[str, str]) -> ClientConfig:
    return personal_config(enrolled_config(item, token=token, env=env), env)


def _agents(item: Enrollment, token: str | None, env: Mapping[str, str]) -> ClientConfig:
    return agent_memory_config(enrolled_config(item, token=token, env=env), env)


def personal_targets(
    enrolled: list[Enrollment], home: Path, *, token: str | None, env: Mapping[str, str]
) -> list[Target]:
    """The targets personal sync adds to `enrolled` (none while it is off everywhere)."""
    on = {(item.server, item.repo) for item in read_personal(home)}
    targets: list[Target] = []
    servers: dict[str, Enrollment] = {}
    for item in enrolled:
        if (item.server, item.repo) not in on or item.team_dir.name != "team":
            continue
        folder = private_folder(item.team_dir)
        targets.append(
            Target(
                label=space_words(item.repo, PERSONAL_SPACE),
                resolve=functools.partial(_private, item, token, env),
                identity=(item.server, item.repo, str(folder), "personal"),
                git_cwd=item.git_root,
                state_dir=state_dir_for(env, item.server, item.repo + STATE_MARK, folder),
            )
        )
        servers.setdefault(item.server, item)
    agents = agent_memory_folder(env)
    for server, item in servers.items():
        targets.append(
            Target(
                label=space_words(GLOBAL_REPO, PERSONAL_SPACE),
                resolve=functools.partial(_agents, item, token, env),
                identity=(server, GLOBAL_REPO, str(agents), "personal"),
                state_dir=state_dir_for(env, server, GLOBAL_REPO + STATE_MARK, agents),
            )
        )
    return targets


def personal_rows(
    enrolled: list[Enrollment], home: Path, env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """`memsync status --all`'s rows of the personal targets: each one's space (in the
    words its person knows it by), folder on this machine, server, repo and the state
    dir its watcher reports in (`repo` is None for the agent memory). No request, no
    token needed."""
    rows: list[dict[str, Any]] = []
    for target in personal_targets(enrolled, home, token=None, env=env):
        server, repo, folder, _ = target.identity
        assert target.state_dir is not None
        rows.append(
            {
                "space": target.label,
                "dir": folder if repo == GLOBAL_REPO else f"{folder} (minus team/)",
                "server": server,
                "repo": None if repo == GLOBAL_REPO else repo,
                "state_dir": target.state_dir,
            }
        )
    return rows
