"""Reads and writes under the team dir that stay inside it (docs/protocol.md 4.4).

    read_entry(team_dir, key) -> str               one entry's text, never through a symlink
    safe_target(team_dir, key) -> Path             where `key` is written, or UnsafeKey
    write_entry(team_dir, key, text)               atomic write -> (size, mtime_ns, inode)
    write_entries(team_dir, texts)                 many: new files in place, few syncs
    remove_entry(team_dir, key)                    unlink, then prune emptied parent dirs

Below the team dir every operation walks directory file descriptors opened with
`O_NOFOLLOW`, one path component at a time, so a symlink that appears between a check and
the operation is refused, not followed. `safe_target` makes the same checks by path, for
callers that want to ask before acting. The team dir itself may be reached through
symlinks (a user may link `~/.claude` elsewhere); only what lies below it is held to
these rules.

A key whose NFC name is missing is read, written and removed under its decomposed (NFD)
spelling when that exists, as macOS writes names (see `sync_client.local`): a pull then
updates that file instead of creating a second, NFC-named one beside it. The NFD spelling
is only tried when the NFC name is missing, which costs one more failed system call,
never a directory listing.

POSIX only: it relies on `O_NOFOLLOW`, `O_DIRECTORY` and the `dir_fd` arguments.
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import stat
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NamedTuple, TypeVar

from memsync_protocol.keys import key_problem as _uncached_key_problem

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the type check must not hang the open.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# What open(O_NOFOLLOW) says about a symlink: ELOOP on Linux and macOS, EMLINK on FreeBSD.
_SYMLINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK})
_NEW_FILE_MODE = 0o644
_NEW_DIR_MODE = 0o755
_READ_CHUNK = 1 << 16
T = TypeVar("T")


class UnsafeKey(ValueError):
    """A key the client will not read, write or remove on disk; `reason` says why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"refusing key {key!r}: {reason}")
        self.key = key
        self.reason = reason


@functools.lru_cache(maxsize=65_536)
def key_problem(key: str) -> str | None:
    """`memsync_protocol.keys.key_problem`, remembered: a walk asks it for every file."""
    return _uncached_key_problem(key)


def _read_up_to(fd: int, limit: int | None) -> bytes:
    """Read from `fd` until end of file, or until more than `limit` bytes were read."""
    chunks: list[bytes] = []
    total = 0
    while limit is None or total <= limit:
        chunk = os.read(fd, _READ_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _decomposed(name: str) -> str | None:
    """The NFD spelling of an NFC name when it differs (the name macOS may have written)."""
    if name.isascii():
        return None
    decomposed = unicodedata.normalize("NFD", name)
    return None if decomposed == name else decomposed


def _on_disk(name: str, operation: Callable[[str], T]) -> T:
    """`operation(name)`; when that finds nothing, `operation` on the NFD spelling.

    `operation` acts on one name in one directory and raises `FileNotFoundError` when it
    is missing. The NFD spelling is only tried then, so an existing NFC name costs
    nothing extra, and a missing one a single failed call (no directory listing).
    """
    try:
        return operation(name)
    except FileNotFoundError as missing:
        alias = _decomposed(name)
        if alias is None:
            raise
        try:
            return operation(alias)
        except FileNotFoundError:
            raise missing from None


def _lstat_mode(parent: Path, name: str) -> tuple[str, int]:
    """(`name`, the mode of `parent / name`), not following a symlink."""
    return name, os.lstat(parent / name).st_mode


def _is_inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def safe_target(team_dir: Path, key: str) -> Path:
    """The path to write `key` at, or `UnsafeKey` when that would not be safe.

    Refused: a key `key_problem` refuses; any existing component below the team dir that
    is a symlink (even one pointing inside: the simplest rule that is safe); an existing
    parent that is not a directory, or an existing target that is not a regular file;
    and a deepest existing ancestor whose real path is not inside the real team dir.
    The path returned uses the spelling on disk of each existing component (an NFD
    name for an NFC key, see the module docstring).
    """
    problem = key_problem(key)
    if problem is not None:
        raise UnsafeKey(key, problem)
    segments = key.split("/")
    root = Path(team_dir)
    deepest_existing = root
    existing: list[str] = []
    for index, segment in enumerate(segments):
        parent = deepest_existing
        try:
            name, mode = _on_disk(segment, functools.partial(_lstat_mode, parent))
        except FileNotFoundError:
            break
        candidate = parent / name
        shown = "/".join(segments[: index + 1])
        if stat.S_ISLNK(mode):
            raise UnsafeKey(key, f"{shown!r} is a symbolic link")
        is_target = index == len(segments) - 1
        if not is_target and not stat.S_ISDIR(mode):
            raise UnsafeKey(key, f"{shown!r} is not a directory")
        if is_target and not stat.S_ISREG(mode):
            raise UnsafeKey(key, f"{shown!r} is not a regular file")
        deepest_existing = candidate
        existing.append(name)
    if not _is_inside(os.path.realpath(deepest_existing), os.path.realpath(root)):
        raise UnsafeKey(key, "resolves outside the team dir")
    return root.joinpath(*existing, *segments[len(existing) :])


def _not_a_directory_reason(parent_fd: int, name: str, shown: str) -> str:
    """Why `name` in `parent_fd` could not be opened as a directory without following."""
    try:
        mode = os.lstat(name, dir_fd=parent_fd).st_mode
    except OSError:
        return f"{shown!r} could not be opened as a directory"
    if stat.S_ISLNK(mode):
        return f"{shown!r} is a symbolic link"
    return f"{shown!r} is not a directory"


def _open_directory(parent_fd: int, name: str, key: str, shown: str) -> int:
    """Open directory `name` in `parent_fd` without following a symlink; a symlink or a
    non-directory there is an `UnsafeKey`."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in (errno.ENOTDIR, *_SYMLINK_ERRNOS):
            raise UnsafeKey(key, _not_a_directory_reason(parent_fd, name, shown)) from error
        raise


def _open_subdirectory(
    parent_fd: int, segment: str, key: str, shown: str, *, create: bool, durable: bool = True
) -> tuple[str, int]:
    """`_open_directory` on `segment`'s spelling on disk: (that name, its descriptor).

    A missing directory is created (with the NFC name of the key) when asked to, and
    its parent fsynced unless not `durable` (the caller syncs once for many).
    """
    try:
        return _on_disk(segment, lambda name: (name, _open_directory(parent_fd, name, key, shown)))
    except FileNotFoundError:
        if not create:
            raise
    # Whoever wins a race to create it, the O_NOFOLLOW open decides whether what is
    # there now is a directory we may use.
    with suppress(FileExistsError):
        os.mkdir(segment, _NEW_DIR_MODE, dir_fd=parent_fd)
        if durable:
            os.fsync(parent_fd)
    return segment, _open_directory(parent_fd, segment, key, shown)


class _Parents(NamedTuple):
    """The open directories on a key's path: `descriptors[0]` is the team dir, and
    `descriptors[i + 1]` the directory `names[i]` (its spelling on disk) inside
    `descriptors[i]`. The last descriptor is the target's parent."""

    descriptors: list[int]
    names: list[str]


@contextmanager
def _parent_directories(team_dir: Path, key: str, *, create: bool) -> Iterator[_Parents]:
    """Open descriptors of the team dir and of each directory on `key`'s path.

    Every directory below the team dir is opened relative to its parent with
    `O_NOFOLLOW`, so none of them can be a symlink at the moment it is used. Raises
    FileNotFoundError for a missing one unless `create`.
    """
    segments = key.split("/")[:-1]
    parents = _Parents([os.open(team_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)], [])
    try:
        for index, segment in enumerate(segments):
            shown = "/".join(segments[: index + 1])
            name, descriptor = _open_subdirectory(
                parents.descriptors[-1], segment, key, shown, create=create
            )
            parents.descriptors.append(descriptor)
            parents.names.append(name)
        yield parents
    finally:
        for descriptor in reversed(parents.descriptors):
            os.close(descriptor)


def _open_for_reading(parent_fd: int, name: str, key: str) -> int:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent_fd)
    except OSError as error:
        if error.errno in _SYMLINK_ERRNOS:
            raise UnsafeKey(key, "is a symbolic link") from error
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeKey(key, "is not a regular file")
    return fd


def read_entry(team_dir: Path, key: str) -> str:
    """The UTF-8 text of `key`'s file, read without following any symlink below the
    team dir.

    Raises UnsafeKey (refused key, symlink, not a regular file), FileNotFoundError,
    and UnicodeDecodeError for a file that is not UTF-8.
    """
    safe_target(team_dir, key)
    with _parent_directories(team_dir, key, create=False) as parents:
        parent_fd = parents.descriptors[-1]
        leaf = key.rsplit("/", 1)[-1]
        fd = _on_disk(leaf, lambda name: _open_for_reading(parent_fd, name, key))
        try:
            data = _read_up_to(fd, None)
        finally:
            os.close(fd)
    return data.decode("utf-8")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stage(team_dir: Path, key: str, data: bytes, *, durable: bool) -> tuple[str, str]:
    """Write `data` to a hidden temp file beside `key`'s target; return the temp file's
    name and the target's (its spelling on disk when it exists).

    Missing parent dirs are created one at a time, each opened without following
    symlinks. An existing file's permission bits are carried over; a new one gets
    0o644 less the umask. The temp name is short and hidden: it fits any name length
    and the scan skips it.
    """
    safe_target(team_dir, key)
    name = key.rsplit("/", 1)[-1]
    with _parent_directories(team_dir, key, create=True) as parents:
        parent_fd = parents.descriptors[-1]
        existing_mode: int | None = None
        with suppress(FileNotFoundError):
            name, existing_mode = _on_disk(
                name, lambda spelling: (spelling, os.lstat(spelling, dir_fd=parent_fd).st_mode)
            )
        if existing_mode is not None and not stat.S_ISREG(existing_mode):
            kind = "a symbolic link" if stat.S_ISLNK(existing_mode) else "not a regular file"
            raise UnsafeKey(key, f"is {kind}")
        temp_name = f".memsync-{secrets.token_hex(8)}.tmp"
        fd = os.open(temp_name, _TEMP_FLAGS, _NEW_FILE_MODE, dir_fd=parent_fd)
        try:
            try:
                if existing_mode is not None:
                    os.fchmod(fd, stat.S_IMODE(existing_mode))
                _write_all(fd, data)
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temp_name, dir_fd=parent_fd)
            raise
    return temp_name, name


def _commit_staged(
    team_dir: Path, key: str, staged: tuple[str, str], *, durable: bool
) -> tuple[int, int, int]:
    """Rename a staged temp file over `key`'s target (both named by `_stage`); return
    the target's stat."""
    temp_name, name = staged
    with _parent_directories(team_dir, key, create=False) as parents:
        parent_fd = parents.descriptors[-1]
        try:
            os.replace(temp_name, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temp_name, dir_fd=parent_fd)
            raise
        written = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        if durable:
            os.fsync(parent_fd)
    return written.st_size, written.st_mtime_ns, written.st_ino


def write_entry(team_dir: Path, key: str, text: str) -> tuple[int, int, int]:
    """Write `text` as `key`'s file atomically; return its (size, mtime_ns, inode).

    The text goes to a hidden temp file in the target's directory, is fsynced, renamed
    over the target, and the directory is fsynced: a reader sees the old file or the
    new one, never a part. The team dir itself is created if missing. Store the
    returned stat with `cache_record`, which marks it racy.
    """
    # Encode first: a text that cannot be written must not leave anything on disk.
    # (`_stage` applies `safe_target`.)
    data = text.encode("utf-8")
    Path(team_dir).mkdir(parents=True, exist_ok=True)
    staged = _stage(team_dir, key, data, durable=True)
    return _commit_staged(team_dir, key, staged, durable=True)


class _DirectoryWalk:
    """The open directories on the path of the key written last, for writing many keys
    in sorted order: keys sharing a folder share its descriptors, so each folder below
    the team dir is opened (created when missing) and checked once, not once per file.

    Each folder is opened relative to its parent with `O_NOFOLLOW` (`_open_subdirectory`),
    and its real path is checked against the real team dir once, as `safe_target` does.
    """

    def __init__(self, team_dir: Path) -> None:
        self.root = Path(team_dir)
        self.real_root = os.path.realpath(self.root)
        # (segment of the key, name on disk, descriptor), outermost first; [0] is the root.
        self.open: list[tuple[str, str, int]] = [
            ("", "", os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))
        ]

    def parent(self, key: str) -> int:
        """The descriptor of the folder holding `key`, created if missing; UnsafeKey when
        a folder on the way is a symlink, not a folder, or resolves outside."""
        segments = key.split("/")[:-1]
        kept = 1
        while kept < len(self.open) and kept <= len(segments):
            if self.open[kept][0] != segments[kept - 1]:
                break
            kept += 1
        self._close_from(kept)
        for index in range(kept - 1, len(segments)):
            shown = "/".join(segments[: index + 1])
            name, descriptor = _open_subdirectory(
                self.open[-1][2], segments[index], key, shown, create=True, durable=False
            )
            self.open.append((segments[index], name, descriptor))
            on_disk = self.root.joinpath(*(entry[1] for entry in self.open[1:]))
            if not _is_inside(os.path.realpath(on_disk), self.real_root):
                self._close_from(len(self.open) - 1)
                raise UnsafeKey(key, "resolves outside the team dir")
        return self.open[-1][2]

    def _close_from(self, index: int) -> None:
        while len(self.open) > max(index, 1):
            os.close(self.open.pop()[2])

    def close(self) -> None:
        """Close every descriptor, the team dir's too."""
        self._close_from(1)
        os.close(self.open.pop()[2])


def _create_new(walk: _DirectoryWalk, key: str, data: bytes) -> tuple[int, int, int] | None:
    """Write `data` as a new file at `key`'s target: (size, mtime_ns, inode), or None
    when something is there already (or may be: an NFD spelling), for the careful path.

    `O_CREAT | O_EXCL` with `O_NOFOLLOW` creates the file or fails: it never opens an
    existing file or follows a symlink, so nobody's file is overwritten here. A file
    that did not exist holds nothing to lose, so it is written in place, without a temp
    file: a crash can leave it short, but the state only records it after the caller's
    sync, and the next pull compares such an unrecorded file like any other.
    """
    leaf = key.rsplit("/", 1)[-1]
    if _decomposed(leaf) is not None:
        return None  # an NFD spelling may be on disk: the careful path finds it
    parent_fd = walk.parent(key)
    try:
        fd = os.open(leaf, _TEMP_FLAGS, _NEW_FILE_MODE, dir_fd=parent_fd)
    except FileExistsError:
        return None
    try:
        try:
            _write_all(fd, data)
            written = os.fstat(fd)
        finally:
            os.close(fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(leaf, dir_fd=parent_fd)
        raise
    return written.st_size, written.st_mtime_ns, written.st_ino


def write_entries(
    team_dir: Path, texts: Mapping[str, str], *, sync: bool = True
) -> dict[str, tuple[int, int, int] | UnsafeKey | OSError]:
    """Write many files with at most three `sync()` calls instead of fsyncs per file.

    A key whose file does not exist yet is created in place (`_create_new`): there is
    nothing to replace, so no temp file and no sync before it. A key whose file exists
    is replaced atomically: every such text is first staged in a temp file; one
    `os.sync()` makes all of them durable; then each is renamed over its target (a
    crash leaves the old file or the whole new one). With `sync`, a last `os.sync()`
    makes everything durable; a caller writing in chunks passes False and calls
    `os.sync()` once itself, before it records the writes anywhere durable. Per key:
    the stat written, or the error that refused it.
    """
    Path(team_dir).mkdir(parents=True, exist_ok=True)
    outcome: dict[str, tuple[int, int, int] | UnsafeKey | OSError] = {}
    existing: dict[str, bytes] = {}
    walk = _DirectoryWalk(team_dir)
    try:
        for key, text in sorted(texts.items()):
            data = text.encode("utf-8")
            try:
                problem = key_problem(key)
                if problem is not None:
                    raise UnsafeKey(key, problem)
                created = _create_new(walk, key, data)
            except (UnsafeKey, OSError) as error:
                outcome[key] = error
                continue
            if created is None:
                existing[key] = data
            else:
                outcome[key] = created
    finally:
        walk.close()
    staged: dict[str, tuple[str, str]] = {}
    for key, data in existing.items():
        try:
            staged[key] = _stage(team_dir, key, data, durable=False)
        except (UnsafeKey, OSError) as error:
            outcome[key] = error
    if staged:
        os.sync()
    for key, names in staged.items():
        try:
            outcome[key] = _commit_staged(team_dir, key, names, durable=False)
        except (UnsafeKey, OSError) as error:
            outcome[key] = error
    if sync and any(isinstance(result, tuple) for result in outcome.values()):
        os.sync()
    return outcome


def remove_entry(team_dir: Path, key: str) -> None:
    """Remove `key`'s file (no error if it is already gone), then every parent dir it
    leaves empty, up to but not including the team dir. Raises UnsafeKey like
    `safe_target`.
    """
    safe_target(team_dir, key)
    segments = key.split("/")
    try:
        with _parent_directories(team_dir, key, create=False) as parents:
            descriptors = parents.descriptors
            with suppress(FileNotFoundError):
                _on_disk(segments[-1], lambda name: os.unlink(name, dir_fd=descriptors[-1]))
                os.fsync(descriptors[-1])
            # descriptors[i] is the directory holding names[i].
            for index in range(len(segments) - 2, -1, -1):
                try:
                    os.rmdir(parents.names[index], dir_fd=descriptors[index])
                except OSError:
                    break  # not empty (or no longer ours): it and its parents stay
                os.fsync(descriptors[index])
    except FileNotFoundError:
        return  # the team dir or a parent dir is already gone, and the file with it
