"""Who changed what: the repo's log, deleted notes, a note at a version, the change
between two versions, and picking the version `restore` brings back.

The parsing is pure (`parse_key_ref`, `parse_time`, `commit_line`, ...) and runs before
any request, so a mistyped argument costs nothing and is one line (exit 2). The rest
reads the server's history (docs/protocol.md 3.5) through `Workspace.api`, after
checking that the server lists what it needs in `supports` (`ServerTooOld` otherwise).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memsync_protocol.keys import key_problem
from sync_client.api import GLOBAL_REPO, Api
from sync_client.errors import (
    ConfigError,
    NetworkError,
    RequestRejected,
    ServerTooOld,
    UnknownKey,
)
from sync_client.retries import with_retries
from sync_client.textdiff import unified
from sync_client.workspace import Workspace

# The `supports` names of a server with the repo log, the deleted list and two versions
# in one history request.
LOG = "log"
DELETED = "deleted"
HISTORY_COMPARE = "history-compare"
# The most commits one log request may ask for (the server's limit).
PAGE_LIMIT = 200
# A commit line names this many keys at most; more are counted (`and 5 more`).
SHOWN_KEYS = 3

# After the last `@`: a version (`3`) or two (`3..5`).
_VERSIONS = re.compile(r"(?P<old>\d+)(?:\.\.(?P<new>\d+))?")
# What is meant as versions but is not written as such (`3..`, `..5`, `3...5`, ``).
_LIKE_VERSIONS = re.compile(r"[\d.]*")
# `30m`, `2h`, `3d`, `2w` (and `2h ago`).
_RELATIVE = re.compile(r"(?P<count>\d+)\s*(?P<unit>s|m|min|h|d|w)(?:\s+ago)?", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}
_TIME_FORMS = "2026-12-01, 2026-12-01T10:00, 2026-12-01T10:00Z, 90m, 2h, 3d or 2w"


@dataclass(frozen=True)
class KeyRef:
    """`KEY`, `KEY@N` or `KEY@N..M`, parsed."""

    key: str
    version: int | None = None
    until: int | None = None

    def __str__(self) -> str:
        if self.version is None:
            return self.key
        suffix = f"..{self.until}" if self.until is not None else ""
        return f"{self.key}@{self.version}{suffix}"


def parse_key_ref(text: str, *, versions: int = 2) -> KeyRef:
    """`KEY`, `KEY@N` or (with `versions=2`) `KEY@N..M`, checked; `versions=0` takes a
    plain KEY only. The last `@` followed by digits starts the versions, so a key with
    an `@` in its name (`notes/me@work.md`) is still a key.

    Raises `ConfigError` (exit 2) for an invalid key, a malformed or zero version, or
    more versions than the command takes.
    """
    key, at, spec = text.rpartition("@")
    if not at or not _LIKE_VERSIONS.fullmatch(spec):
        key, spec = text, ""
        at = ""
    problem = key_problem(key)
    if problem is not None:
        raise ConfigError(f"invalid key {key!r}: {problem}")
    if not at:
        return KeyRef(key)
    found = _VERSIONS.fullmatch(spec)
    if found is None:
        forms = f"{key}@N" + (f", or {key}@N..M for two versions" if versions == 2 else "")
        raise ConfigError(f"bad version in {text!r}: write {forms}")
    old = int(found["old"])
    new = int(found["new"]) if found["new"] is not None else None
    if old == 0 or new == 0:
        raise ConfigError(f"bad version in {text!r}: versions start at 1")
    if versions == 0:
        raise ConfigError(f"{text!r}: give the KEY alone here, without @VERSION")
    if versions == 1 and new is not None:
        raise ConfigError(f"{text!r}: give one version here, {key}@N")
    return KeyRef(key, old, new)


def parse_time(text: str, *, now: datetime | None = None, option: str = "--since") -> datetime:
    """An aware UTC time from `2026-12-01`, `2026-12-01 10:00`, `2026-12-01T10:00:00Z`,
    `...+02:00` (a time without an offset is local time, as git reads it) or a span
    back from `now`: `90m`, `2h`, `3d`, `2w`, `2h ago`. Raises `ConfigError` (exit 2)."""
    words = text.strip()
    relative = _RELATIVE.fullmatch(words)
    if relative is not None:
        seconds = int(relative["count"]) * _UNIT_SECONDS[relative["unit"].lower()]
        return (now or datetime.now(UTC)).astimezone(UTC) - timedelta(seconds=seconds)
    try:
        when = datetime.fromisoformat(words)
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not a time: write {_TIME_FORMS}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as the person typing it means it
    return when.astimezone(UTC)


def wire_time(when: datetime) -> str:
    """`2026-12-01T10:00:00Z`: a time as the server takes it."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown_time(at: str) -> str:
    """`2026-12-01 10:02`: a server time in the local time zone, to the minute (the
    text as it came when it is not a time)."""
    try:
        return datetime.fromisoformat(at).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return at


def keys_words(keys: list[str], key_count: int) -> str:
    """`a.md, b.md, c.md`, or past three keys `a.md, b.md and 5 more`."""
    if key_count <= SHOWN_KEYS and len(keys) >= key_count:
        return ", ".join(keys[:key_count])
    shown = keys[: SHOWN_KEYS - 1]
    return f"{', '.join(shown)} and {key_count - len(shown):,} more"


def ops_words(ops: dict[str, int]) -> str:
    """`put`, `delete`, `put+delete`: the operations a commit made, in a fixed order."""
    named = [op for op in ("put", "delete", "restore") if ops.get(op)]
    named += sorted(op for op, count in ops.items() if count and op not in named)
    return "+".join(named) or "-"


def commit_lines(commits: list[dict[str, Any]]) -> list[str]:
    """One line per commit, `v42  2026-12-01 10:02  alice  put notes/a.md, ...`, the
    version and author columns as wide as their widest."""
    versions = [f"v{commit['version']}" for commit in commits]
    width = max((len(version) for version in versions), default=0)
    author_width = max((len(commit["author"]) for commit in commits), default=0)
    return [
        f"{version:<{width}}  {shown_time(commit['at'])}  {commit['author']:<{author_width}}  "
        f"{ops_words(commit['ops'])} {keys_words(commit['keys'], commit['key_count'])}"
        + provenance_words(commit)
        + _accepted_words(commit)
        for version, commit in zip(versions, commits, strict=True)
    ]


def provenance_words(item: dict[str, Any]) -> str:
    """`  [watcher, claude-code 2.1.197, session 5e55, at 0123456789ab]` for a version or
    commit whose provenance is known (issue 29); empty otherwise. Server text: only its
    printable characters are shown."""
    found = item.get("provenance")
    if not isinstance(found, dict):
        return ""

    def text(name: str) -> str:
        value = found.get(name)
        return "".join(c for c in value if c.isprintable()) if isinstance(value, str) else ""

    agent = " ".join(part for part in (text("agent"), text("agentVersion")) if part)
    parts = [
        text("via"),
        agent,
        f"session {text('session')}" if text("session") else "",
        f"at {text('commit')[:12]}" if text("commit") else "",
    ]
    shown = ", ".join(part for part in parts if part)
    return f"  [{shown}]" if shown else ""


def _accepted_words(commit: dict[str, Any]) -> str:
    """`  (accepted by carol)` for a commit that was a reviewed proposal (issue 28)."""
    by = commit.get("acceptedBy")
    return f"  (accepted by {' '.join(by.split())})" if isinstance(by, str) and by else ""


def deleted_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per deleted note: its delete as a commit line, and how to undo it."""
    commits = [{**row, "ops": {"delete": 1}, "keys": [row["key"]], "key_count": 1} for row in rows]
    return [
        line + (f"  (memsync restore {row['key']})" if row.get("last_version") else "")
        for line, row in zip(commit_lines(commits), rows, strict=True)
    ]


def _ready(workspace: Workspace, feature: str, command: str) -> bool:
    """Whether the repo holds anything (False: never written); raises `ServerTooOld`
    when the server does not list `feature` in `supports`. What the state remembers
    is trusted when it lists `feature`; otherwise the server is asked (hashes view)."""
    if feature in (workspace.state.supports or ()):
        return True
    remote = with_retries(workspace.api.hashes)
    if remote.no_team_memory:
        return False
    workspace.state.supports = sorted(remote.supports)
    workspace.save()
    if feature not in remote.supports:
        raise ServerTooOld(workspace.api.server, feature, command)
    return True


def _repo_field(api: Api) -> str | None:
    """The `repo` a JSON answer names: None for the person's global space, whose `~`
    is the server's id and no repo."""
    return None if api.space and api.repo == GLOBAL_REPO else api.repo


def _holds_none(workspace: Workspace) -> str:
    """Why the server has no such note: it never held any of this space."""
    api = workspace.api
    if not api.space:
        return "it holds no team memory"
    from sync_client.personal import space_words

    return f"it holds nothing of {space_words(api.repo, api.space)} yet"


def repo_log(
    workspace: Workspace,
    *,
    count: int,
    author: str | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """The newest `count` commits (by `author`, at or after `since`), paging through
    `next_before`: `{repo, commits, next_before}` (`next_before`: where the next page
    would start, null when there is none)."""
    api = workspace.api
    empty: dict[str, Any] = {"repo": _repo_field(api), "commits": [], "next_before": None}
    if not _ready(workspace, LOG, "memsync log"):
        return empty
    commits: list[dict[str, Any]] = []
    before: int | None = None
    while len(commits) < count:
        page = with_retries(
            functools.partial(
                api.log,
                before=before,
                limit=min(PAGE_LIMIT, count - len(commits)),
                author=author,
                since=wire_time(since) if since is not None else None,
            )
        )
        commits.extend(page["commits"])
        before = page["next_before"]
        if before is None or not page["commits"]:
            before = None
            break
    return {"repo": _repo_field(api), "commits": commits[:count], "next_before": before}


def deleted_notes(
    workspace: Workspace,
    *,
    count: int | None = None,
    author: str | None = None,
    since: datetime | None = None,
) -> dict[str, Any]:
    """Notes deleted for the team and not back, newest delete first (by `author`, at or
    after `since`, the newest `count`): `{repo, deleted: [{key, version, author, at,
    last_version}]}`."""
    api = workspace.api
    if not _ready(workspace, DELETED, "memsync log --deleted"):
        return {"repo": _repo_field(api), "deleted": []}
    rows = with_retries(api.deleted)
    if author is not None:
        rows = [row for row in rows if row["author"] == author]
    if since is not None:
        rows = [row for row in rows if _at(row["at"]) >= since]
    return {"repo": _repo_field(api), "deleted": rows[:count] if count is not None else rows}


def key_log(
    workspace: Workspace,
    key: str,
    *,
    count: int | None = None,
    author: str | None = None,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """KEY's versions, oldest first (`memsync log KEY`), filtered as `repo_log` is: the
    newest `count` by `author` at or after `since`."""
    versions = _versions(workspace, key)
    if author is not None:
        versions = [item for item in versions if item.get("author") == author]
    if since is not None:
        versions = [item for item in versions if _at(str(item.get("at"))) >= since]
    return versions[-count:] if count is not None else versions


def _at(at: str) -> datetime:
    """A server time, aware; an unreadable one sorts first."""
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _versions(workspace: Workspace, key: str, *, attempts: int = 4) -> list[dict[str, Any]]:
    """KEY's versions, oldest first; `UnknownKey` when the server never held it."""
    try:
        versions = with_retries(lambda: workspace.api.history(key), attempts=attempts)
    except RequestRejected as error:
        if error.status != 404:
            raise
        versions = []  # a key the server never held, or a repo never written
    if not versions:
        here = (workspace.team_dir / key).exists()
        folder = "here" if workspace.api.space else "in your team dir"
        where = f" (only {folder}: not pushed yet)" if here else ""
        raise UnknownKey(f"{key}: no such note on the server{where}", key)
    return versions


def _version(workspace: Workspace, key: str, version: int, **more: int) -> dict[str, Any]:
    """One version of KEY (`compare=M`: and another); `UnknownKey` for a 404."""
    try:
        return with_retries(lambda: workspace.api.version(key, version, **more))
    except RequestRejected as error:
        if error.status != 404:
            raise
    asked = sorted({version, *more.values()})
    named = " or ".join(f"{key}@{number}" for number in asked)
    raise UnknownKey(
        f"no version {named} on the server; `memsync log {key}` lists its versions",
        key,
        version,
    )


def _last_text(versions: list[dict[str, Any]]) -> int | None:
    """The newest version that holds a text (not a delete)."""
    return next((int(v["version"]) for v in reversed(versions) if v["op"] != "delete"), None)


def _deleted_words(key: str, item: dict[str, Any], versions: list[dict[str, Any]]) -> str:
    last = _last_text(versions)
    text = f"; `memsync show {key}@{last}` shows its last text" if last is not None else ""
    return (
        f"{key} was deleted for the team in version {item['version']} by {item['author']} "
        f"({shown_time(str(item['at']))}){text}, `memsync restore {key}` brings it back"
    )


def show(workspace: Workspace, ref: KeyRef) -> dict[str, Any]:
    """The text of `ref`'s note at its version, or the server's current one:
    `{key, version, op, author, at, content, offline}`.

    When the server cannot be reached and no version was asked for, the text of the
    last sync (the base store) stands in, as `git show` shows what was committed, not
    the working file; `offline` says why (and `version` is null).
    """
    key = ref.key
    if ref.version is not None:
        found = _version(workspace, key, ref.version)
        if found.get("content") is None:
            raise UnknownKey(
                f"{key}@{ref.version} is the note's delete (by {found['author']}): it has "
                f"no text; `memsync log {key}` lists its versions",
                key,
                ref.version,
            )
        return _shown(key, found, offline=None)
    try:
        # A person waits: two quick tries, then the text of the last sync.
        versions = _versions(workspace, key, attempts=2)
    except NetworkError as error:
        base = workspace.state.bases.get(key)
        text = workspace.objects.get(base) if base is not None else None
        if text is None:
            raise
        return {
            "key": key,
            "version": None,
            "op": None,
            "author": None,
            "at": None,
            "content": text,
            "offline": str(error),
        }
    newest = versions[-1]
    if newest["op"] == "delete":
        raise UnknownKey(_deleted_words(key, newest, versions), key)
    return _shown(key, _version(workspace, key, int(newest["version"])), offline=None)


def _shown(key: str, found: dict[str, Any], *, offline: str | None) -> dict[str, Any]:
    fields = ("version", "op", "author", "at", "content")
    shown = {"key": key, **{name: found.get(name) for name in fields}, "offline": offline}
    if isinstance(found.get("provenance"), dict):
        shown["provenance"] = found["provenance"]  # only when set (issue 29)
    return shown


def diff_versions(workspace: Workspace, ref: KeyRef) -> dict[str, Any]:
    """The change from version N to M (`KEY@N..M`), or from N to the server's current
    version (`KEY@N`), in one history request: `{key, from, to, diff}`, `from`/`to`
    being `{version, op, author, at}` (a delete's text is empty)."""
    key = ref.key
    assert ref.version is not None
    if not _ready(workspace, HISTORY_COMPARE, f"memsync diff {ref}"):
        raise UnknownKey(f"{key}: no such note on the server ({_holds_none(workspace)})", key)
    until = ref.until
    if until is None:
        until = int(_versions(workspace, key)[-1]["version"])
    found = _version(workspace, key, ref.version, compare=until)
    other = found["compare"]
    old_text = found.get("content") or ""
    new_text = other.get("content") or ""
    fields = ("version", "op", "author", "at")
    return {
        "key": key,
        "from": {name: found.get(name) for name in fields},
        "to": {name: other.get(name) for name in fields},
        "diff": unified(old_text, new_text, f"{key}@{ref.version}", f"{key}@{until}"),
    }


def version_words(side: dict[str, Any]) -> str:
    """`v3 (alice, 2026-12-01 10:02)`, `v5 (deleted by bob, ...)`."""
    deleted = "deleted by " if side.get("op") == "delete" else ""
    return f"v{side['version']} ({deleted}{side['author']}, {shown_time(str(side['at']))})"


def restore_version(workspace: Workspace, key: str, *, before: datetime | None) -> int:
    """The version `memsync restore KEY` brings back: the one current at `before`, or
    (no time) the last text before the note's delete ("undo rm"); for an index started
    anew since its delete (rebuilt), the last version before that delete."""
    if before is not None:
        versions = _versions(workspace, key)
        then = [item for item in versions if _at(str(item["at"])) <= before]
        when = shown_time(wire_time(before))
        if not then:
            first = versions[0]
            raise UnknownKey(
                f"{key} did not exist yet at {when} (its first version, "
                f"{first['version']}, is of {shown_time(str(first['at']))})",
                key,
            )
        if then[-1]["op"] == "delete":
            raise UnknownKey(
                f"{key} was deleted at {when} (version {then[-1]['version']} by "
                f"{then[-1]['author']}): pick an earlier time, or `memsync restore {key}` "
                "for its last text",
                key,
            )
        return int(then[-1]["version"])
    if not _ready(workspace, DELETED, f"memsync restore {key}"):
        raise UnknownKey(f"{key}: no such note on the server ({_holds_none(workspace)})", key)
    rows = [row for row in with_retries(workspace.api.deleted) if row["key"] == key]
    if not rows:
        versions = _versions(workspace, key)  # UnknownKey when the server never had it
        before_delete = _index_before_delete(key, versions)
        if before_delete is not None:
            return before_delete
        raise ConfigError(
            f"{key} is not deleted (its version {versions[-1]['version']} is current): "
            f"give a version, `memsync restore {key}@N` or --before TIME; "
            f"`memsync log {key}` lists them"
        )
    last = rows[0].get("last_version")
    if last is None:
        raise UnknownKey(f"{key} has no text from before its delete to bring back", key)
    return int(last)


def _index_before_delete(key: str, versions: list[dict[str, Any]]) -> int | None:
    """An index deleted for the team and started anew since (rebuilt, say): the last
    version before its newest delete, the one that had the team's lines; None when it
    was never deleted, or that text is current again (a restore, or the same text)."""
    from sync_client.index.memory import is_index_key

    deletes = [number for number, item in enumerate(versions) if item["op"] == "delete"]
    if not is_index_key(key) or not deletes:
        return None
    before = [item for item in versions[: deletes[-1]] if item["op"] != "delete"]
    if not before:
        return None
    last = before[-1]
    since = versions[deletes[-1] + 1 :]
    if any(item.get("checksum") == last.get("checksum") for item in since):
        return None
    return int(last["version"])


def keep_replaced_lines(
    workspace: Workspace, key: str, restored: int
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """After `memsync restore` of an index: the lines of the version it replaced that
    were the only link to a note that still exists go back at its end (as any rewrite of
    an index keeps them), written here and pushed. (`[{index, line, targets}]` kept, the
    push's result or None); nothing when the replaced version was a delete."""
    from sync_client.index.memory import is_index_key
    from sync_client.index.team import keep_team_lines, live_notes
    from sync_client.push import push
    from sync_client.team_files import UnsafeKey, read_entry, write_entry

    if not is_index_key(key):
        return [], None
    versions = _versions(workspace, key)
    replaced = [item for item in versions if int(item["version"]) < restored]
    if not replaced or replaced[-1]["op"] == "delete":
        return [], None
    old = _version(workspace, key, int(replaced[-1]["version"])).get("content")
    try:
        current = read_entry(workspace.team_dir, key)
    except (OSError, UnsafeKey, UnicodeDecodeError):
        return [], None
    if not isinstance(old, str):
        return [], None
    live = live_notes(workspace.state, workspace.scan().checksums)
    text, kept = keep_team_lines(key, old, current, live)
    if not kept:
        return [], None
    write_entry(workspace.team_dir, key, text)
    return kept, push(workspace, only={key}).as_json()


def index_lines_back(
    workspace: Workspace, key: str
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """After `memsync restore KEY`: put back at the end of each index the lines that
    listed KEY, so an undone `memsync rm` is whole (rm took them out). For each index
    here that does not link KEY now, its newest version on the server that did (of its
    last `RESTORE_LOOKBACK` texts: `memory_index.restore_lines`) gives the lines; they
    are written here and pushed. (`[{index, version, lines}]` per index changed, the
    push's result or None); nothing for an index key, or when every index already lists
    KEY."""
    from sync_client.index.memory import (
        INDEX_NAME,
        append_lines,
        is_index_key,
        is_note_key,
        restore_lines,
    )
    from sync_client.index.memory import links as index_links
    from sync_client.push import push
    from sync_client.team_files import UnsafeKey, read_entry, write_entry

    if not is_note_key(key):
        return [], None
    index_keys = sorted({INDEX_NAME, *(k for k in workspace.state.bases if is_index_key(k))})
    rows: list[dict[str, Any]] = []
    for index_key in index_keys:
        try:
            current = read_entry(workspace.team_dir, index_key)
        except (OSError, UnsafeKey, UnicodeDecodeError):
            continue  # no such index here (or not readable text): nothing to add to
        if any(link.target == key for link in index_links(index_key, current)):
            continue
        found = restore_lines(index_key, key, _index_versions(workspace, index_key))
        if found is None:
            continue
        version, lines = found
        write_entry(workspace.team_dir, index_key, append_lines(current, lines))
        rows.append({"index": index_key, "version": version, "lines": lines})
    if not rows:
        return [], None
    return rows, push(workspace, only={row["index"] for row in rows}).as_json()


def _index_versions(workspace: Workspace, index_key: str) -> Iterator[tuple[int, str | None]]:
    """The server's versions of `index_key`, newest first, (version, text; None for a
    delete), each text read when asked for (`memory_index.restore_lines` reads only as
    far as it needs); nothing when the server has no such key."""
    try:
        versions = with_retries(lambda: workspace.api.history(index_key))
    except RequestRejected as error:
        if error.status != 404:
            raise
        return
    for item in reversed(versions):
        number = int(item["version"])
        if item.get("op") == "delete":
            yield number, None
            continue
        found = with_retries(functools.partial(workspace.api.version, index_key, number))
        content = found.get("content")
        yield number, content if isinstance(content, str) else None
