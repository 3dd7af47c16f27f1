"""What the index check learnt of each Markdown file, kept in the state dir.

The team index's health (`team_index.health`) needs little of each file: a note's
missing `name`/`description`, an index's links and what Claude Code loads of it
(`memory_index.file_facts`). Those depend only on the file's key and text, so they are
kept per key with the file's entry checksum in `index-facts.json`, beside the state.
The stat cache already gives every unchanged file's checksum without reading it, so a
check reads and parses only the files that changed since the last one: a command's
index check costs O(changed files), not O(notes).

The file is a cache: anything missing, malformed or of another checksum is computed
again from the file, and losing it costs one full read. Two processes may write it at
once (the watcher and a command); each write is atomic and whichever lands last is
still correct for every row it holds.

    facts_of(team_dir, checksums, state_dir) -> {key: FileFacts}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.memory_index import ClaudeLoad, FileFacts, Link, file_facts
from sync_client.state import atomic_write
from sync_client.team_files import read_entry

__all__ = ["FACTS_FILE", "facts_of"]

FACTS_FILE = "index-facts.json"
# Bumped when what a row holds changes: rows of another version are computed again.
_VERSION = 1


def facts_of(
    team_dir: Path, checksums: Mapping[str, str], state_dir: Path | None
) -> dict[str, FileFacts]:
    """key -> `FileFacts` of every Markdown key in `checksums` (a scan's: key -> entry
    checksum), read from the file only when `state_dir` holds none for that checksum.

    A file that vanished or cannot be read since the scan is left out. With a
    `state_dir`, the facts file is rewritten when anything in it changed.
    """
    kept = _load(state_dir)
    facts: dict[str, FileFacts] = {}
    rows: dict[str, list[Any]] = {}
    for key, checksum in checksums.items():
        if not key.endswith(".md"):
            continue
        row = kept.get(key)
        if isinstance(row, list) and len(row) == 2 and row[0] == checksum:
            known = _from_row(row[1])
            if known is not None:
                facts[key], rows[key] = known, row
                continue
        try:
            text = read_entry(team_dir, key)
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # gone or changed into something a scan skips: the next scan says
        facts[key] = file_facts(key, text)
        # The checksum of what was read: if the file changed since the scan, the row
        # is right for the file as it is now.
        rows[key] = [entry_checksum(text), _to_row(facts[key])]
    if state_dir is not None and rows != kept:
        data = json.dumps({"version": _VERSION, "files": rows}, ensure_ascii=False)
        atomic_write(state_dir / FACTS_FILE, data.encode("utf-8"))
    return facts


def _load(state_dir: Path | None) -> dict[str, Any]:
    """The rows of the facts file: {} when there is none, or it is unreadable, damaged
    or of another version."""
    if state_dir is None:
        return {}
    try:
        stored = json.loads((state_dir / FACTS_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict) or stored.get("version") != _VERSION:
        return {}
    files = stored.get("files")
    return files if isinstance(files, dict) else {}


def _to_row(facts: FileFacts) -> dict[str, Any]:
    """The JSON form of one file's facts; only what is there."""
    row: dict[str, Any] = {}
    if facts.links:
        row["links"] = [[link.line, link.target] for link in facts.links]
    if facts.load is not None:
        load = facts.load
        row["load"] = [load.lines, load.chars, load.loaded_lines, load.loaded_chars]
    if facts.missing:
        row["missing"] = list(facts.missing)
    return row


# A note's facts are one of a few values (which recall fields it lacks): shared.
_NOTE_FACTS: dict[tuple[str, ...], FileFacts] = {}
_MAX_SHARED = 16


def _from_row(row: object) -> FileFacts | None:
    """`_to_row` read back; None for anything malformed (the file is read again)."""
    if not isinstance(row, dict):
        return None
    if row.keys() <= {"missing"}:  # a note (or any file but an index): the common row
        missing = row.get("missing", [])
        if not (isinstance(missing, list) and all(isinstance(name, str) for name in missing)):
            return None
        shared = tuple(missing)
        if shared not in _NOTE_FACTS:
            if len(_NOTE_FACTS) >= _MAX_SHARED:
                return FileFacts(missing=shared)
            _NOTE_FACTS[shared] = FileFacts(missing=shared)
        return _NOTE_FACTS[shared]
    links = row.get("links", [])
    load = row.get("load")
    missing = row.get("missing", [])
    if not (
        isinstance(links, list)
        and all(
            isinstance(link, list)
            and len(link) == 2
            and _count(link[0])
            and isinstance(link[1], str)
            for link in links
        )
        and (load is None or (isinstance(load, list) and len(load) == 4 and all(map(_count, load))))
        and isinstance(missing, list)
        and all(isinstance(name, str) for name in missing)
    ):
        return None
    return FileFacts(
        links=tuple(Link(line, target) for line, target in links),
        load=None if load is None else ClaudeLoad(*load),
        missing=tuple(missing),
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
