"""memsync's client library: the same calls the `memsync` CLI makes.

    from sync_client import Api, Workspace, pull, push, resolve

    config = resolve(server=None, token=None, repo=None, team_dir=None,
                     cwd=Path.cwd(), env=os.environ)
    with Api(config.server, config.token, config.repo) as api:
        workspace = Workspace.open(config.team_dir, config.state_dir, api)
        pull(workspace)
        push(workspace)

Names are loaded on first use, so importing the package (as the CLI does) is cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Api": "sync_client.api",
    "ClientConfig": "sync_client.config",
    "PullResult": "sync_client.pull",
    "PushResult": "sync_client.push",
    "Workspace": "sync_client.workspace",
    "pull": "sync_client.pull",
    "push": "sync_client.push",
    "resolve": "sync_client.config",
    "status": "sync_client.status",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sync_client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
