"""Provenance the client sends with a write (docs/protocol.md 3.13, docs/users.md).

Each PUT of a push says how its change was made: `via` (`cli` for `memsync push`,
`watcher`, `mcp`, `snapshot`), the checkout's `HEAD` as `commit`, and, for notes an
agent wrote, which agent and session. What an agent wrote is recorded when it writes:
Claude Code runs `memsync context --tool-use` after every Write, Edit and MultiEdit
(a `PostToolUse` hook), which keeps, per note key of the team dir, the session id and
Claude Code's version in `agent-writes.json` in the state dir, with the checksum of
the text the agent left in the file. A record describes that one write: the next push
of that key sends it only when it sends that very text (a later hand edit is nobody's
agent's), and then forgets it, whether the push committed the text or proposed it.

The hook runs after every edit, so it must be quick: this module imports nothing but
the standard library's basics and `context.locate` (the session-start fast path),
never click, rich or httpx.

What is never recorded: no file contents (the note is already the write), no host
names, no prompts, no paths outside the team dir.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.provenance import cleaned

RECORD_FILE = "agent-writes.json"
# A bound on the record: the newest writes are kept.
MAX_RECORDS = 2_000
# How much of the end of a session transcript is read for Claude Code's version.
_TRANSCRIPT_TAIL = 65_536
_VERSION = re.compile(rb'"version":\s*"([0-9][0-9A-Za-z.+-]{0,40})"')
AGENT = "claude-code"


# ---------------------------------------------------------------- the hook


# A record's transcript path, kept only until a push reads the version from it.
_TRANSCRIPT = "transcript"
# The checksum of the text the agent wrote: the record is that write's, and no other's.
_CHECKSUM = "checksum"


def _version_from(transcript: object, env: Mapping[str, str]) -> str | None:
    """Claude Code's version: the newest `version` in the session's transcript (every
    line of it names the version that wrote it), else the environment's."""
    if isinstance(transcript, str) and os.path.isabs(transcript):
        try:
            with open(transcript, "rb") as stream:
                stream.seek(0, os.SEEK_END)
                size = stream.tell()
                stream.seek(max(0, size - _TRANSCRIPT_TAIL))
                found = _VERSION.findall(stream.read())
            if found:
                return str(found[-1].decode("ascii"))
        except OSError:
            pass
    return env.get("CLAUDE_CODE_VERSION") or None


def _team_key(team_dir: Path, file_path: str) -> str | None:
    """The note key of `file_path` when it is a file of `team_dir`, else None."""
    if not os.path.isabs(file_path):
        return None
    path = os.path.normpath(file_path)
    for base in {str(team_dir), os.path.realpath(team_dir)}:
        if path.startswith(base + os.sep):
            key = path[len(base) + 1 :].replace(os.sep, "/")
            return key if key.endswith(".md") else None
    return None


def _file_checksum(path: str) -> str | None:
    """The entry checksum of the UTF-8 file at `path` (None: unreadable, not text)."""
    try:
        with open(path, "rb") as stream:
            return entry_checksum(stream.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def read_records(state_dir: Path) -> dict[str, dict[str, str]]:
    """Key -> the agent provenance recorded for its newest agent write (with the
    `checksum` of the text that write left)."""
    try:
        raw = json.loads((state_dir / RECORD_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    keys = raw.get("keys") if isinstance(raw, dict) else None
    if not isinstance(keys, dict):
        return {}
    return {
        key: _completed(value)
        for key, value in keys.items()
        if isinstance(key, str) and isinstance(value, dict)
    }


def _completed(record: dict[str, str]) -> dict[str, str]:
    """`record` as a push sends it: a version the hook could not read yet (Claude Code
    had not written the transcript's line when the hook ran) read from it now."""
    record = dict(record)
    transcript = record.pop(_TRANSCRIPT, None)
    if transcript is not None and "agentVersion" not in record:
        version = _version_from(transcript, {})
        if version is not None:
            record["agentVersion"] = version
    return record


def _write_records(state_dir: Path, records: Mapping[str, Mapping[str, str]]) -> None:
    from sync_client.durable import atomic_write

    data = json.dumps({"keys": records}, separators=(",", ":")).encode("utf-8")
    atomic_write(state_dir / RECORD_FILE, data, sync=False)  # a hint: no fsync


def record_tool_use(payload: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Record one Claude Code write from its `PostToolUse` JSON; the key recorded, or
    None when the file is not a note of this checkout's team dir (or nothing syncs)."""
    from sync_client.context import locate

    tool_input = payload.get("tool_input")
    file_path = tool_input.get("file_path") if isinstance(tool_input, dict) else None
    cwd = payload.get("cwd")
    if not isinstance(file_path, str) or not isinstance(cwd, str) or not os.path.isdir(cwd):
        return None
    where, _ = locate(Path(cwd), dict(env))
    if where is None or where.state_dir is None:
        return None
    key = _team_key(where.team_dir, file_path)
    if key is None:
        return None
    checksum = _file_checksum(file_path)
    if checksum is None:
        return None
    session = payload.get("session_id")
    transcript = payload.get("transcript_path")
    record = {
        "agent": AGENT,
        "agentVersion": _version_from(transcript, env),
        "session": session if isinstance(session, str) else None,
    }
    later = transcript if isinstance(transcript, str) and os.path.isabs(transcript) else None
    written = record_agent_write(where.state_dir, key, record, checksum=checksum, transcript=later)
    return key if written else None


def record_agent_write(
    state_dir: Path,
    key: str,
    record: Mapping[str, str | None],
    *,
    checksum: str,
    transcript: str | None = None,
) -> bool:
    """Keep `record` (`via`, `agent`, `agentVersion`, `session`) for the write that left
    the text of `checksum` in `key`, until a push sends that text; False when nothing in
    it is worth sending. `transcript`: where the push reads the agent's version when the
    record has none yet."""
    found = cleaned(record)
    if found is None:
        return False
    found.pop("commit", None)  # the push's own HEAD is the commit
    found[_CHECKSUM] = checksum
    if transcript is not None and "agentVersion" not in found:
        found[_TRANSCRIPT] = transcript
    records = read_records(state_dir)
    records.pop(key, None)  # re-inserted last: the newest survive the bound
    records[key] = found
    if len(records) > MAX_RECORDS:
        records = dict(list(records.items())[-MAX_RECORDS:])
    _write_records(state_dir, records)
    return True


def run_hook(stdin: Any, env: Mapping[str, str]) -> int:
    """`memsync context --tool-use`: read the hook's JSON on stdin and record; always 0
    (a hook's failure must never disturb the session)."""
    try:
        if stdin is None or stdin.isatty():
            return 0
        payload = json.loads(stdin.read(1_000_000) or "{}")
        if isinstance(payload, dict):
            record_tool_use(payload, env)
    except Exception:
        return 0
    return 0


# ---------------------------------------------------------------- the push


def records_for(
    state_dir: Path, texts: Mapping[str, str]
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The agent records a push of `texts` sends: per key, the record of the write that
    left exactly that text (without its checksum); and the keys whose record describes
    another text (the file changed since the agent wrote it: the record is spent)."""
    found: dict[str, dict[str, str]] = {}
    spent: list[str] = []
    for key, record in read_records(state_dir).items():
        if key not in texts:
            continue
        checksum = record.pop(_CHECKSUM, None)
        if checksum is not None and checksum == entry_checksum(texts[key]):
            found[key] = record
        else:
            spent.append(key)
    return found, spent


def group_keys(
    keys: Iterable[str], records: Mapping[str, Mapping[str, str]]
) -> list[tuple[dict[str, str], list[str]]]:
    """`keys` grouped by their agent record (an empty dict: none), in a stable order, so
    each PUT carries exactly one provenance."""
    groups: dict[str, tuple[dict[str, str], list[str]]] = {}
    for key in sorted(keys):
        record = dict(records.get(key) or {})
        tag = json.dumps(record, sort_keys=True)
        groups.setdefault(tag, (record, []))[1].append(key)
    return list(groups.values())  # in the order of each group's first key


def for_write(
    via: str, commit: str | None, record: Mapping[str, str | None] | None = None
) -> dict[str, str] | None:
    """The provenance of one write: how, the checkout's `HEAD`, and the agent record
    (whose own `via`, an MCP write's `mcp`, wins over the pusher's)."""
    return cleaned({"via": via, **(record or {}), "commit": commit})


def with_provenance(body: bytes, provenance: Mapping[str, str] | None) -> bytes:
    """A serialized PUT body (`batching`) with `provenance` added as its last field.

    A batch is packed under the body limit without it: the few hundred bytes it adds
    stay far inside the server's request limit."""
    if not provenance or not body.endswith(b"}"):
        return body
    extra = json.dumps(dict(provenance), ensure_ascii=False, separators=(",", ":"))
    return body[:-1] + b',"provenance":' + extra.encode("utf-8") + b"}"


def forget(state_dir: Path, keys: Iterable[str]) -> None:
    """Drop the agent records of `keys` once a push has sent them (committed or
    proposed) or found them describing another text."""
    records = read_records(state_dir)
    gone = [key for key in keys if key in records]
    if not gone:
        return
    for key in gone:
        del records[key]
    try:
        _write_records(state_dir, records)
    except OSError:
        return  # sent twice at worst: the record is a hint
