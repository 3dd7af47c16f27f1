"""The team dir as an agent sees it: read, search and check-and-write notes.

The library behind `memsync mcp` (sync_client/mcp_server.py is a thin shell over it),
usable from any command, so a tool and a command can never disagree:

    NoteCache(team_dir).notes() -> {key: Note}      every note, re-reading changed files only
    NoteCache(team_dir).search(query, limit)        ranked by the query's words (BM25-style)
    search(notes, query, limit) -> [SearchHit]      the same over any notes
                                                    (memsync_protocol.search: the web page's too)
    read_note(team_dir, key) -> str                 one file's text, never outside the team dir
    index_view(team_dir, notes) -> IndexView        MEMORY.md, the team dir, how many notes
    write_refusal(team_dir, key, text, state) -> row | None   every rule a push applies
    write_note(config, key, text) -> WriteOutcome   check, write atomically, then sync
    note_history(config, key) -> [version rows]     the server's versions of one key

A note is a Markdown file of the team dir that is not an index (`MEMORY.md`), found by
the rules of a scan (docs/protocol.md 4.2): symlinks, hidden names, editor leftovers,
invalid keys, files over the size limit and files that are not UTF-8 are never notes.
Everything a note holds is untrusted text: it is returned as data, never interpreted.
Nothing here logs a note's text or a token.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import MAX_ENTRY_BYTES
from memsync_protocol.keys import key_problem as protocol_key_problem
from memsync_protocol.search import DEFAULT_LIMIT, Note, SearchHit, SearchIndex, search
from sync_client.ignore_rules import IgnoreFileError, read_ignore_rules
from sync_client.index.memory import INDEX_NAME, is_note_key
from sync_client.local import is_editor_leftover, skips_of
from sync_client.precheck import (
    effective_limit,
    entry_problem,
    key_row,
    path_clashes,
    too_large_row,
    too_many_row,
)
from sync_client.review import proposals as review
from sync_client.skip_words import skip_words
from sync_client.state import SyncState, load_state, read_watch_state
from sync_client.team_files import UnsafeKey, key_problem, read_entry, write_entry
from sync_client.verdicts import judge_bytes

if TYPE_CHECKING:
    from sync_client.config import ClientConfig
    from sync_client.push import PushResult

__all__ = [
    "IndexView",
    "Note",
    "NoteCache",
    "NoteError",
    "NoteRefused",
    "SearchHit",
    "SearchIndex",
    "WriteOutcome",
    "index_view",
    "note_history",
    "read_note",
    "search",
    "write_note",
    "write_refusal",
]

# A file whose mtime is this close to when it was read may still change within the same
# mtime tick without its stat changing; it is read again next time (as git does).
_RACY_NS = 2_000_000_000


class NoteError(Exception):
    """A read or write the rules refuse, or a note that is not there; `str()` says it in
    words an agent can act on (never a note's text, never a secret)."""


class NoteRefused(NoteError):
    """A write refused before anything was written; `row` is the skip row a push makes
    (`reason`, and `rule`, `label`, `line` for a secret: never the value)."""

    def __init__(self, key: str, rows: list[dict[str, Any]]) -> None:
        reasons = "; ".join(skip_words(row) for row in rows)
        super().__init__(f"refused {key}, nothing was written: {reasons}")
        self.key = key
        self.rows = rows


@dataclass
class _Cached:
    stat: tuple[int, int, int]  # size, mtime_ns, inode
    readable: bool  # False: not a note we can read (not UTF-8)
    racy: bool


class NoteCache:
    """The notes of one team dir, parsed once and kept while their files are unchanged.

    `notes()` walks the team dir (a stat per file, no reads) and re-reads only files
    whose (size, mtime_ns, inode) changed or that were written too recently to trust;
    `search()` does the same, then asks the index it keeps up to date.
    """

    def __init__(self, team_dir: Path) -> None:
        self.team_dir = Path(team_dir)
        self._cached: dict[str, _Cached] = {}
        self.index = SearchIndex()

    def notes(self) -> dict[str, Note]:
        """Every note of the team dir now, by key."""
        self.refresh()
        return self.index.notes

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[SearchHit]:
        """The notes of the team dir now that match `query` (`SearchIndex.search`)."""
        self.refresh()
        return self.index.search(query, limit)

    def refresh(self) -> None:
        """Bring the index up to date with the team dir."""
        seen: dict[str, tuple[int, int, int]] = {}
        try:
            root = os.open(self.team_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            root = -1
        if root >= 0:
            try:
                _walk(root, "", seen)
            finally:
                os.close(root)
        for key in [key for key in self._cached if key not in seen]:
            del self._cached[key]
            self.index.remove(key)
        now = time.time_ns()
        cached_items = self._cached
        for key, info in seen.items():
            cached = cached_items.get(key)
            if cached is not None and not cached.racy and cached.stat == info:
                continue
            try:
                note = Note.parse(key, read_entry(self.team_dir, key))
            except (UnicodeDecodeError, UnsafeKey):
                self.index.remove(key)
                cached_items[key] = _Cached(info, readable=False, racy=False)
                continue
            except FileNotFoundError:
                cached_items.pop(key, None)
                self.index.remove(key)
                continue
            self.index.add(note)
            cached_items[key] = _Cached(info, readable=True, racy=now - info[1] < _RACY_NS)


# Names already judged: a walk asks for every file, and names rarely change.
_note_name_cache: dict[str, bool] = {}


def _is_note_name(key: str, name: str) -> bool:
    """Whether a file at `key` can be a note by its name (not hidden: checked before)."""
    verdict = _note_name_cache.get(key)
    if verdict is None:
        verdict = is_note_key(key) and not is_editor_leftover(name) and key_problem(key) is None
        if len(_note_name_cache) < 100_000:
            _note_name_cache[key] = verdict
    return verdict


def _walk(dir_fd: int, prefix: str, seen: dict[str, tuple[int, int, int]]) -> None:
    """Collect (size, mtime_ns, inode) of every note file under `dir_fd`, by key, by the
    scan's rules: no symlink, no hidden name, no editor leftover, a valid key, not over
    the size limit."""
    with os.scandir(dir_fd) as iterator:
        entries = list(iterator)
    for entry in entries:
        name = entry.name
        if name[0] == "." or entry.is_symlink():
            continue
        if not name.isascii():
            name = unicodedata.normalize("NFC", name)
        key = prefix + name
        try:
            if entry.is_dir(follow_symlinks=False):
                if key_problem(key) is None:
                    _walk_into(dir_fd, entry.name, key, seen)
                continue
            if not _is_note_name(key, name):
                continue
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size <= MAX_ENTRY_BYTES:
            seen[key] = (info.st_size, info.st_mtime_ns, info.st_ino)


def _walk_into(dir_fd: int, name: str, key: str, seen: dict[str, tuple[int, int, int]]) -> None:
    try:
        child = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return
    try:
        _walk(child, key + "/", seen)
    except PermissionError:
        pass
    finally:
        os.close(child)


def _key_words(key: str) -> str | None:
    """Why `key` cannot be read or written as a note, in words, or None."""
    problem = protocol_key_problem(key)
    if problem is not None:
        return f"the name {problem}"
    return None


def read_note(team_dir: Path, key: str) -> str:
    """The text of `key`, read without following a symlink and never outside the team
    dir; `NoteError` for a refused key, a missing file or one that is not UTF-8."""
    problem = _key_words(key)
    if problem is not None:
        raise NoteError(f"cannot read {key!r}: {problem}")
    try:
        return read_entry(team_dir, key)
    except FileNotFoundError:
        raise NoteError(
            f"there is no note {key} in the team dir (search_notes or memory_index list them)"
        ) from None
    except UnsafeKey as error:
        raise NoteError(f"cannot read {key}: {error.reason}") from None
    except UnicodeDecodeError:
        raise NoteError(f"cannot read {key}: it is not UTF-8 text") from None
    except IsADirectoryError:
        raise NoteError(f"cannot read {key}: it is a folder") from None


@dataclass(frozen=True)
class IndexView:
    """The team's MEMORY.md (`text` is "" when the team has none), the team dir, the
    note count. `from_team`: the file is missing here and `text` is the team's (as of
    the last sync), which the next sync writes back."""

    team_dir: Path
    exists: bool
    text: str
    notes: int
    from_team: bool = False
    # The delete of the team's MEMORY.md (`index.deleted`), while the team has none.
    deleted: dict[str, Any] | None = None

    def summary(self) -> str:
        from sync_client.index.deleted import agent_words

        count = f"{self.notes:,} note{'' if self.notes == 1 else 's'}"
        lines = f"{len(self.text.splitlines()):,} lines"
        if self.deleted is not None:
            state = agent_words(self.deleted)
        elif self.from_team:
            state = (
                f"{INDEX_NAME} is missing here, so this is the team's ({lines}, as of the "
                "last sync); the next sync writes it back: edit that text, never a new one"
            )
        elif not self.exists:
            state = f"there is no {INDEX_NAME} yet"
        elif not self.text.strip():
            state = f"{INDEX_NAME} is empty"
        else:
            state = f"{INDEX_NAME} has {lines}"
        return f"team dir {self.team_dir}: {count}; {state}"


def index_view(
    team_dir: Path, notes: Mapping[str, Note], state_dir: Path | None = None
) -> IndexView:
    """The team index as it is on disk now; when the file is missing here and the team
    has one (its base text under `state_dir`), the team's; `deleted` when the server
    said the team's was deleted (`index.deleted`)."""
    from sync_client.index.team import team_deleted, team_text

    from_team = False
    try:
        text = read_entry(team_dir, INDEX_NAME)
        exists = True
    except FileNotFoundError:
        kept = team_text(state_dir)
        text, exists, from_team = (kept, True, True) if kept is not None else ("", False, False)
    except (UnsafeKey, UnicodeDecodeError) as error:
        raise NoteError(f"cannot read {INDEX_NAME}: {error}") from None
    return IndexView(
        team_dir=Path(os.path.abspath(team_dir)),
        exists=exists,
        text=text,
        notes=len(notes),
        from_team=from_team,
        deleted=None if state_dir is None else team_deleted(load_state(state_dir)),
    )


def _hidden_or_leftover(key: str) -> dict[str, Any] | None:
    """The row of a key a scan would never sync: a hidden segment or an editor leftover."""
    segments = key.split("/")
    if any(segment.startswith(".") for segment in segments):
        return {"key": key, "reason": "hidden", "detail": "a name starting with `.`"}
    if is_editor_leftover(segments[-1]):
        return {"key": key, "reason": "editor-leftover"}
    return None


def _ignored(team_dir: Path, key: str, state: SyncState) -> dict[str, Any] | None:
    rules = read_ignore_rules(team_dir).keeping([*state.bases, *state.deleted_on_server])
    segments = key.split("/")
    folders = ["/".join(segments[:end]) for end in range(1, len(segments))]
    if rules.ignores_file(key) or any(rules.ignores_folder(folder) for folder in folders):
        return {"key": key, "reason": "ignored"}
    return None


def write_refusal(
    team_dir: Path, key: str, text: str, state: SyncState, local_keys: Any = ()
) -> list[dict[str, Any]]:
    """Why a push would not send `text` as `key` (skip rows, as a push makes them), or [].

    Every rule, in the push's order: the key (the wire's rules, then what a scan never
    syncs: hidden names, editor leftovers, `.memsyncignore`), the text (UTF-8, no NUL),
    the size limit (the default or the lower one a server taught), a file/folder clash
    with a key the server or the team dir has, and the secret scanner (rule, label and
    line; never the value).
    """
    if protocol_key_problem(key) is not None:
        return [key_row(key)]
    row = _hidden_or_leftover(key)
    if row is not None:
        return [row]
    try:
        row = _ignored(team_dir, key, state)
    except IgnoreFileError as error:
        return [{"key": key, "reason": "ignored", "detail": str(error)}]
    if row is not None:
        return [row]
    # The rest are all reported at once, so one rewrite can fix them all.
    rows: list[dict[str, Any]] = []
    limit = effective_limit(state.max_entry_bytes)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = None  # a lone surrogate: no file could hold it
        rows.append(entry_problem(key, text, max_entry_bytes=limit) or key_row(key))
    if data is not None and len(data) > limit:
        rows.append(too_large_row(key, len(data), limit))
    clash = path_clashes([key], set(state.bases) | set(state.refused), set(local_keys) - {key})
    if key in clash:
        rows.append(clash[key])
    if (
        state.max_entries is not None
        and key not in state.bases
        and len(state.bases) >= state.max_entries
    ):
        rows.append(too_many_row(key, state.max_entries))
    if data is not None:
        # The scan's own verdict on these bytes (a NUL, a secret), so what `status`, a
        # push and the watcher say of the file once written is what is said here.
        rows.extend(item.as_row() for item in skips_of(key, judge_bytes(data)))
    return rows


@dataclass
class WriteOutcome:
    """What `write_note` did: always written (a refusal raises), then how it syncs.

    `sync` is `watcher` (a running watcher sends it), `uploaded`, `unchanged` (the
    server has this text already), `conflict` (a teammate changed it meanwhile: the
    next pull settles it), `skipped` (the push left it out: `detail` says why), or
    `push-failed` (the server could not be reached: the next sync sends it).
    """

    key: str
    path: Path
    bytes: int
    sync: str
    detail: str

    def as_row(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "path": str(self.path),
            "bytes": self.bytes,
            "written": True,
            "sync": self.sync,
            "detail": self.detail,
        }


def _watcher_words(state_dir: Path, *, proposes: bool) -> str | None:
    """How a running watcher of this repo will send the file (`proposes`: as a proposal
    for review, the repo being reviewed as the server last told the watcher), or None
    when none runs."""
    watcher = read_watch_state(state_dir)
    if not watcher or not watcher.get("running"):
        return None
    words = (
        f"the watcher (pid {watcher.get('pid')}) will send it as a proposal for review, "
        "not published: `memsync status` shows its proposal number once sent"
        if proposes
        else f"the watcher (pid {watcher.get('pid')}) will sync it to the team"
    )
    suppressed = watcher.get("suppressed")
    if isinstance(suppressed, dict):
        words += (
            f" once it resumes (paused: {suppressed.get('message')}; "
            f"waiting for {suppressed.get('waiting_for')})"
        )
    return words


def write_note(
    config: ClientConfig,
    key: str,
    text: str,
    *,
    timeout: float = 30.0,
    local_keys: Callable[[], Any] | None = None,
    agent: str | None = None,
    agent_version: str | None = None,
) -> WriteOutcome:
    """Check `text` as `key` against every rule a push applies, write it atomically in
    the team dir, then sync it: the running watcher does, else one push of that key.

    Raises `NoteRefused` (nothing written) when a rule refuses it, `NoteError` when the
    file cannot be written there (a symlink or a folder in the way). A push that fails
    is reported in `WriteOutcome.detail`; the file stays written for the next sync.
    `local_keys()` gives the team dir's keys for the file/folder rule (default: a scan).
    `agent` names the writer to the server (a reviewer sees it on a proposal) and,
    with `agent_version`, in the version's provenance (`via: mcp`), however it is sent.
    """
    state = load_state(config.state_dir)
    keys = local_keys() if local_keys is not None else _local_keys(config.team_dir)
    text, kept = _keep_index_lines(config, key, text, state, keys)
    rows = write_refusal(config.team_dir, key, text, state, keys)
    if rows:
        raise NoteRefused(key, rows)
    try:
        write_entry(config.team_dir, key, text)
    except UnsafeKey as error:
        row = {"key": key, "reason": "unsafe-path", "detail": error.reason}
        raise NoteRefused(key, [row]) from None
    except OSError as error:
        raise NoteError(
            f"cannot write {key}: {(error.strerror or str(error)).lower()}; nothing was written"
        ) from None
    from sync_client.provenance import record_agent_write

    with contextlib.suppress(OSError):  # a hint: the note is written either way
        mcp = {"via": "mcp", "agent": agent, "agentVersion": agent_version}
        record_agent_write(config.state_dir, key, mcp, checksum=entry_checksum(text))
    size = len(text.encode("utf-8"))
    path = Path(os.path.abspath(config.team_dir)) / key
    kept_words = f"; {_kept_words(key, kept)}" if kept else ""
    proposes = review.is_reviewed(state) and not review.is_reviewer(state)
    watching = _watcher_words(config.state_dir, proposes=proposes)
    if watching is not None and proposes:
        words = f"{proposed_words(None)}; {watching}{kept_words}"
        return WriteOutcome(key, path, size, "proposed", words)
    if watching is not None:
        return WriteOutcome(key, path, size, "watcher", f"written; {watching}{kept_words}")
    if key in state.deleted_on_server:
        return WriteOutcome(
            key,
            path,
            size,
            "skipped",
            "written here, not sent: it was deleted for the team while edited here "
            f"(`memsync resolve {key} --mine` adds it back for the team)",
        )
    sync, detail = _push_one(config, key, timeout=timeout, agent=agent)
    return WriteOutcome(key, path, size, sync, detail + kept_words)


def _keep_index_lines(
    config: ClientConfig, key: str, text: str, state: SyncState, keys: Any
) -> tuple[str, list[dict[str, Any]]]:
    """An index written by an agent keeps every line of the index it replaces (the file
    here, else the team's) that was the only link to a note that still exists: the
    rewrite may reword and regroup, never unlist a live note. (text, lines put back)."""
    from sync_client.index import team as team_index
    from sync_client.index.memory import is_index_key

    if not is_index_key(key):
        return text, []
    try:
        old_text: str | None = read_entry(config.team_dir, key)
    except (OSError, UnsafeKey, UnicodeDecodeError):
        # Missing or unreadable here: the text the team has.
        old_text = team_index.team_text(config.state_dir, key)
    live = team_index.live_notes(state, [item for item in keys if item != key])
    return team_index.keep_team_lines(key, old_text, text, live)


def _kept_words(key: str, kept: list[dict[str, Any]]) -> str:
    """What the tool says about the lines it put back (an agent reads it)."""
    targets = sorted({target for row in kept for target in row["targets"]})
    noun = "line" if len(kept) == 1 else "lines"
    return (
        f"kept {len(kept)} {noun} of the old {key} at its end, the only links to notes "
        f"that still exist ({', '.join(targets)}): an index never drops a live note; "
        "delete the note itself to drop its line (`memsync rm KEY`)"
    )


def _local_keys(team_dir: Path) -> list[str]:
    """Every file key of the team dir that a scan would see (not hidden, no symlink)."""
    keys: list[str] = []
    root = Path(team_dir)
    if not root.is_dir():
        return keys
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        base = Path(folder).relative_to(root).as_posix()
        for name in files:
            if not name.startswith("."):
                keys.append(name if base == "." else f"{base}/{name}")
    return keys


def proposed_words(proposal_id: int | None) -> str:
    """What a write into a reviewed repo tells the agent: the note is a proposal."""
    which = f" (proposal {proposal_id})" if proposal_id is not None else ""
    return (
        "proposed: a reviewer must accept it before teammates see it"
        f"{which}; the file is written here; do not write it again"
    )


def _push_one(
    config: ClientConfig, key: str, *, timeout: float, agent: str | None = None
) -> tuple[str, str]:
    """(sync, words) of one push of `key`."""
    from sync_client.api import Api
    from sync_client.errors import MemsyncError
    from sync_client.push import push
    from sync_client.workspace import Workspace

    try:
        with Api(config.server, config.token, config.repo, timeout=timeout) as api:
            api.agent = agent
            workspace = Workspace.open(config.team_dir, config.state_dir, api)
            try:
                result = push(workspace, only={key}, via="mcp")
            finally:
                workspace.close()
    except MemsyncError as error:
        return (
            "push-failed",
            f"written here, but the push failed: {error}; the next sync "
            "(`memsync sync`, or the watcher) sends it",
        )
    return push_words(config, key, result)


def push_words(config: ClientConfig, key: str, result: PushResult) -> tuple[str, str]:
    """(sync, words) of what one push did with `key`, for the agent that wrote it."""
    if key in result.uploaded:
        return "uploaded", f"written and pushed: the team has it ({config.server}, {config.repo})"
    for row in result.proposed:
        if row["key"] == key:
            return "proposed", proposed_words(row["id"])
    if key in result.waiting:
        return "proposed", proposed_words(None) + "; this very text was proposed already"
    for row in result.reviewed:
        if row["key"] == key and row["status"] == "rejected":
            return "skipped", f"written here, not proposed again: {review.rejected_words(row)}"
    if key in result.conflicts:
        return (
            "conflict",
            "written here, not pushed: a teammate changed it on the server meanwhile; "
            "the next `memsync pull` merges the two or keeps yours as a conflict copy",
        )
    for row in result.skipped:
        if row.get("key") == key:
            return "skipped", f"written here, not pushed: {skip_words(row)}"
    return "unchanged", "written; the server has this text already"


# What `note_history` keeps of each version the server lists (docs/protocol.md 3.5).
HISTORY_FIELDS = ("version", "op", "author", "at", "provenance", "acceptedBy")


def note_history(config: ClientConfig, key: str, *, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The server's versions of `key`, oldest first: version, op, author, at,
    provenance and acceptedBy (each None when the version has none).

    Raises `NoteError` for a refused key and when the server cannot answer (in words).
    """
    from sync_client.api import Api
    from sync_client.errors import MemsyncError
    from sync_client.retries import with_retries

    problem = _key_words(key)
    if problem is not None:
        raise NoteError(f"no history for {key!r}: {problem}")
    try:
        with Api(config.server, config.token, config.repo, timeout=timeout) as api:
            versions = with_retries(lambda: api.history(key), attempts=2)
    except MemsyncError as error:
        raise NoteError(f"cannot get the history of {key} from {config.server}: {error}") from None
    return [
        {name: item.get(name) for name in HISTORY_FIELDS}
        for item in versions
        if isinstance(item, dict)
    ]
