"""`memsync status`, `diff` and `rm`: what differs, how, and deleting for the team."""

from __future__ import annotations

import difflib
import functools
from typing import Any

from sync_client.api import with_retries
from sync_client.errors import ConfigError
from sync_client.local import read_entry, remove_entry, safe_target
from sync_client.state import list_conflicts, save_conflict_copy
from sync_client.workspace import Workspace
from sync_server.checksums import entry_checksum
from sync_server.keys import key_problem


def _skip_rows(workspace: Workspace) -> tuple[dict[str, str], list[dict[str, Any]], set[str]]:
    scanned = workspace.scan()
    rows = [item.as_row() for item in scanned.skipped]
    return scanned.checksums, rows, {item.key for item in scanned.skipped}


def status(workspace: Workspace) -> dict[str, Any]:
    """Local edits, teammates' edits, saved conflict copies and skipped files."""
    local, skipped, skipped_keys = _skip_rows(workspace)
    bases = workspace.state.bases
    remote = with_retries(workspace.api.hashes).entry_checksums
    workspace.save()
    server_changed = {
        key for key, checksum in remote.items() if bases.get(key) != checksum != local.get(key)
    } | {key for key in bases if key not in remote}
    return {
        "modified": sorted(key for key in local if key in bases and local[key] != bases[key]),
        "new": sorted(key for key in local if key not in bases and key not in remote),
        "deleted_locally": sorted(
            key for key in bases if key not in local and key not in skipped_keys
        ),
        "server_changed": sorted(server_changed),
        "conflicts": [
            {"key": key, "saved_to": str(path), "when": when}
            for when, key, path in list_conflicts(workspace.state_dir)
        ],
        "skipped": skipped,
    }


def _unified(old: str, new: str, old_name: str, new_name: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _base_text(workspace: Workspace, key: str, base: str | None, server: dict[str, str]) -> str:
    """The text the base checksum names: the server's text, or an older version."""
    if base is None:
        return ""
    if key in server and entry_checksum(server[key]) == base:
        return server[key]
    for item in reversed(with_retries(lambda: workspace.api.history(key))):
        if item.get("checksum") == base:
            version = with_retries(
                functools.partial(workspace.api.version, key, int(item["version"]))
            )
            return str(version.get("content") or "")
    return ""


def diff(workspace: Workspace, key: str | None) -> list[dict[str, Any]]:
    """Per differing key (or one key): local against its base, and against the server."""
    local, _, _ = _skip_rows(workspace)
    bases = workspace.state.bases
    remote = with_retries(lambda: workspace.api.get())
    assert remote is not None
    server = remote.texts
    if key is not None:
        keys = [key]
    else:
        keys = sorted(
            k for k in set(local) | set(server) if local.get(k) != remote.entry_checksums.get(k)
        )
    out = []
    for name in keys:
        mine = read_entry(workspace.team_dir, name) if name in local else ""
        base = bases.get(name)
        against_base = _unified(
            _base_text(workspace, name, base, server), mine, f"base/{name}", f"local/{name}"
        )
        against_server = _unified(server.get(name, ""), mine, f"server/{name}", f"local/{name}")
        out.append(
            {
                "key": name,
                "changed_locally": local.get(name) != base,
                "changed_on_server": remote.entry_checksums.get(name) != base,
                "against_base": against_base,
                "against_server": against_server,
            }
        )
    workspace.save()
    return out


def remove(workspace: Workspace, key: str) -> dict[str, Any]:
    """Delete `key` for the team, then here; an unpushed local edit is saved first."""
    problem = key_problem(key)
    if problem is not None:
        raise ConfigError(f"invalid key {key!r}: {problem}")
    written = with_retries(lambda: workspace.api.delete(key))
    target = safe_target(workspace.team_dir, key)
    saved = None
    local, _, _ = _skip_rows(workspace)
    if target.exists():
        if local.get(key) != workspace.state.bases.get(key):
            saved = str(save_conflict_copy(workspace.state_dir, key, target.read_bytes()))
        remove_entry(workspace.team_dir, key)
    workspace.state.bases.pop(key, None)
    workspace.state.stat_cache.pop(key, None)
    workspace.save()
    return {"key": key, "version": written.version, "saved_to": saved}
