"""memsync's client library: the same calls the `memsync` CLI makes.

    from sync_client import Api, Workspace, pull, push, resolve

    config = resolve(server=None, token=None, repo=None, team_dir=None,
                     cwd=Path.cwd(), env=os.environ)
    with Api(config.server, config.token, config.repo) as api:
        workspace = Workspace.open(config.team_dir, config.state_dir, api)
        pull(workspace)
        push(workspace)

Names are loaded on first use, so importing the package (as the CLI does) is cheap.
`pull`, `push` and `status` are the functions, not the submodules of the same names.
"""

from __future__ import annotations

import importlib
import sys
import types
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


class _Package(types.ModuleType):
    """The package, keeping each exported name when its submodule of the same name is
    imported: the import system would otherwise set `sync_client.pull` to the module, and
    `from sync_client import pull` would give the module from then on."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return  # the submodule stays importable by name, through sys.modules
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
