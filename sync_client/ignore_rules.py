"""A team dir's `.memsyncignore`: what a scan leaves out (gitignore syntax).

The file can only narrow what a scan picks up: the scan consults it after the rules for
symlinks, hidden names and editor leftovers, so a `!` pattern re-includes only what the
file itself excluded, and as git leaves tracked files alone, a key the team already has
(one with a base) is never ignored. pathspec is imported only when a team dir has the
file: most never do, and every scan would pay its import.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from sync_client.errors import ConfigError
from sync_client.team_files import _READ_FLAGS, _SYMLINK_ERRNOS, _read_up_to

if TYPE_CHECKING:
    import pathspec

# The team dir's own list of files to leave out (gitignore syntax), never synced itself:
# its name starts with `.`.
IGNORE_FILE = ".memsyncignore"
# Far above any hand-written ignore file; a bigger one is refused, not read.
MAX_IGNORE_BYTES = 100_000


class IgnoreFileError(ConfigError):
    """A `.memsyncignore` that cannot be read or holds a pattern it may not (exit 2)."""


class IgnoreRules:
    """What a team dir's `.memsyncignore` leaves out of a scan.

    `spec` holds the file's patterns (None: no file). `tracked` are keys the team
    already has (their base): like tracked files in git they are never ignored, nor
    are the folders holding them, so pulls and pushes of them go on as before.
    """

    def __init__(self, spec: pathspec.GitIgnoreSpec | None, tracked: Iterable[str] = ()) -> None:
        self.spec = spec
        self.tracked = frozenset(tracked)
        self.tracked_folders = frozenset(
            "/".join(key.split("/")[:end])
            for key in self.tracked
            for end in range(1, key.count("/") + 1)
        )

    def keeping(self, tracked: Iterable[str]) -> IgnoreRules:
        """The same patterns, never applied to `tracked` keys or the folders holding them."""
        return self if self.spec is None else IgnoreRules(self.spec, tracked)

    def ignores_file(self, key: str) -> bool:
        """True when the patterns leave out the file `key`."""
        return self.spec is not None and key not in self.tracked and self.spec.match_file(key)

    def ignores_folder(self, key: str) -> bool:
        """True when the patterns leave out the folder `key` and all it holds."""
        return (
            self.spec is not None
            and key not in self.tracked_folders
            and self.spec.match_file(key + "/")
        )


def _ignore_pattern_problem(line: str) -> str | None:
    """Why one line of `.memsyncignore` is refused, or None (blank lines and comments pass)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if "\x00" in line:
        return "contains a NUL character"
    path = stripped[1:] if stripped.startswith("!") else stripped
    # gitignore patterns are relative to the folder holding the file: one that climbs
    # out of it would never match, and saying so beats silently ignoring nothing.
    if ".." in path.strip("/").split("/"):
        return f"{stripped!r} points outside the team dir (patterns are relative to it)"
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return f"{stripped!r} is not a valid gitignore pattern"
    return None


def read_ignore_rules(team_dir: Path) -> IgnoreRules:
    """The patterns of `team_dir/.memsyncignore`; no rules when there is no such file.

    Raises `IgnoreFileError` (one line naming the file, and the line when a pattern is
    refused) for a file that is a symlink or not a regular file, unreadable, larger
    than `MAX_IGNORE_BYTES`, not UTF-8, or that holds a pattern climbing out of the
    team dir (`..`) or one gitignore does not accept.
    """
    path = Path(team_dir) / IGNORE_FILE
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return IgnoreRules(None)
    except OSError as error:
        if error.errno in _SYMLINK_ERRNOS:
            raise IgnoreFileError(f"{path}: is a symbolic link; it must be a file") from error
        raise IgnoreFileError(f"{path}: cannot be read: {error.strerror}") from error
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IgnoreFileError(f"{path}: is not a regular file")
        data = _read_up_to(fd, MAX_IGNORE_BYTES)
    except OSError as error:
        raise IgnoreFileError(f"{path}: cannot be read: {error.strerror}") from error
    finally:
        os.close(fd)
    if len(data) > MAX_IGNORE_BYTES:
        raise IgnoreFileError(f"{path}: is larger than {MAX_IGNORE_BYTES:,} bytes")
    try:
        lines = data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise IgnoreFileError(f"{path}: is not UTF-8 text") from error
    for number, line in enumerate(lines, start=1):
        problem = _ignore_pattern_problem(line)
        if problem is not None:
            raise IgnoreFileError(f"{path}: line {number}: {problem}")
    import pathspec

    return IgnoreRules(pathspec.GitIgnoreSpec.from_lines(lines))
