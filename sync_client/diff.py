"""`memsync diff`: how a note here differs from its base and from the server's, and
its newest saved conflict copy against it."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import key_problem
from sync_client.errors import ConfigError, UnknownKey
from sync_client.retries import with_retries
from sync_client.state import list_conflicts
from sync_client.status import remote_or_offline
from sync_client.team_files import read_entry
from sync_client.textdiff import unified
from sync_client.workspace import Workspace

# The `supports` name of a server that answers `GET ?key=K` (docs/protocol.md 3.2).
ONE_KEY = "key"


def _base_text(workspace: Workspace, key: str, base: str | None, server: dict[str, str]) -> str:
    """The text the base checksum names: from the base store, the server's text, or an
    older version from the server's history."""
    if base is None:
        return ""
    kept = workspace.objects.get(base)
    if kept is not None:
        return kept
    if key in server and entry_checksum(server[key]) == base:
        return server[key]
    for item in reversed(with_retries(lambda: workspace.api.history(key))):
        if item.get("checksum") == base:
            version = with_retries(
                functools.partial(workspace.api.version, key, int(item["version"]))
            )
            return str(version.get("content") or "")
    return ""


def diff(workspace: Workspace, key: str | None) -> dict[str, Any]:
    """Per differing key (or one key): local against its base, and against the server.

    Offline, only the local side is shown (against the base store) and `offline` says
    why; `against_server` is then null. One key is asked for alone when the server
    supports it; otherwise (and for every differing key) the whole repo is fetched.
    """
    if key is not None:
        problem = key_problem(key)
        if problem is not None:
            raise ConfigError(f"invalid key {key!r}: {problem}")
    local = workspace.scan().checksums
    bases = workspace.state.bases
    server: dict[str, str]
    server_sums: dict[str, str]
    if key is not None and ONE_KEY in (workspace.state.supports or ()):
        # One key from a server that can answer for one key: a small request, not
        # the whole repo. A key the server could never hold is not asked about.
        one_key = key

        def ask() -> tuple[str, str] | None:
            return workspace.api.entry(one_key)

        found, offline = remote_or_offline(ask)
        online = offline is None
        server = {} if found is None else {key: found[1]}
        server_sums = {} if found is None else {key: found[0]}
    else:
        remote, offline = remote_or_offline(lambda: workspace.api.get())
        online = remote is not None
        server = remote.texts if remote is not None else {}
        server_sums = remote.entry_checksums if remote is not None else {}
    if not online:
        server_sums = dict(bases)
    copies = _latest_copies(workspace)
    if key is not None:
        _known_here_or_there(workspace, key, online, server_sums, copies)
        keys = [key]
    else:
        keys = sorted(
            k for k in set(local) | set(server_sums) if local.get(k) != server_sums.get(k)
        )
    out = []
    for name in keys:
        mine = read_entry(workspace.team_dir, name) if name in local else ""
        base = bases.get(name)
        against_base = unified(
            _base_text(workspace, name, base, server), mine, f"base/{name}", f"local/{name}"
        )
        against_server = (
            unified(server.get(name, ""), mine, f"server/{name}", f"local/{name}")
            if online
            else None
        )
        copy = copies.get(name)
        out.append(
            {
                "key": name,
                "changed_locally": local.get(name) != base,
                "changed_on_server": server_sums.get(name) != base if online else None,
                "against_base": against_base,
                "against_server": against_server,
                "conflict_copy": str(copy) if copy is not None else None,
                "copy_against_local": _copy_against_local(workspace, name, copy),
            }
        )
    workspace.save()
    return {"diffs": out, "offline": offline}


def _latest_copies(workspace: Workspace) -> dict[str, Path]:
    """Each key's newest saved conflict copy (`memsync conflicts` lists them)."""
    return {key: path for _, key, path in list_conflicts(workspace.state_dir)}


def _known_here_or_there(
    workspace: Workspace,
    key: str,
    online: bool,
    server_sums: dict[str, str],
    copies: dict[str, Path],
) -> None:
    """Raise `UnknownKey` when `key` is nowhere: no file (synced or skipped), no base,
    not on the server (when it answered), no saved copy, no modify/delete conflict."""
    state = workspace.state
    if (
        os.path.lexists(workspace.team_dir / key)
        or key in state.bases
        or key in server_sums
        or key in state.deleted_on_server
        or key in copies
    ):
        return
    where = "here, in the last sync or on the server" if online else "here or in the last sync"
    raise UnknownKey(f"{key}: no such note {where}; `memsync status` lists the notes", key)


def _copy_against_local(workspace: Workspace, key: str, copy: Path | None) -> str | None:
    """The saved conflict copy of `key` against its file (`+` lines: the copy's), or
    None without a copy."""
    if copy is None:
        return None
    saved = copy.read_bytes().decode("utf-8", errors="replace")
    try:
        mine = read_entry(workspace.team_dir, key)
    except (FileNotFoundError, UnicodeDecodeError):
        mine = ""
    return unified(mine, saved, f"local/{key}", f"saved/{key}")
