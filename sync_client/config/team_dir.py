"""Team-dir safety: the default team dir, and the refusals that keep a shared team dir away
from the home folder and from folders that hold keys, credentials or tokens.

A team dir is shared with everyone on the team, so a wrong one would publish secrets;
every path taken as a team dir passes `validate_team_dir` and `team_dir_refusal`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from sync_client.config.paths import config_home
from sync_client.errors import ConfigError
from sync_client.hook_settings import file_has_hook

_DRIVE_ROOT = re.compile(r"[A-Za-z]:[\\/]*")


def default_team_dir(root: Path, home: Path, env: Mapping[str, str] | None = None) -> Path:
    """The team dir for the git checkout at `root`: `memory/team/` in Claude Code's
    project folder (`<config root>/projects/<sanitized canonical root>/memory/team`),
    or in Qwen Code's (`<memory base>/projects/<sanitized root>/memory/team`) when
    memsync's session hook is in Qwen Code's settings and not in Claude Code's.

    One folder per checkout, never two kept in step: the other agent on the machine
    reads the same folder through its session hook, which names it.
    """
    from sync_client import claude_code, qwen_code

    env = env or {}
    if not session_hook_in(claude_code.settings_path(home, env)) and session_hook_in(
        qwen_code.settings_path(home, env)
    ):
        folder = qwen_code.team_dir(root, home, env)
        if folder is not None:
            return folder
    return claude_code.team_dir(root, home, env)


def session_hook_in(settings: Path) -> bool:
    """Whether the JSON settings file `settings` (Claude Code's shape, which Qwen Code
    shares) has memsync's `SessionStart` hook: a command ending `context --hook` that
    runs memsync (any install of it). An unreadable file has none."""
    return file_has_hook(settings, "SessionStart", " context --hook")


def validate_team_dir(raw: str, home: Path) -> Path:
    """The absolute, normalized team dir that `raw` names (a leading `~` is `home`).

    Raises `ConfigError`, one line saying why, for a value containing NUL, a drive root,
    a UNC path, a bare `~`, `~/`, `~/.` or `~/..`, a relative path, the root or a path
    within two characters of it, the home folder itself or any folder that contains it.
    Symlinks are not resolved here, nor is the disk read: `team_dir_refusal` does both.
    """

    def refused(reason: str) -> ConfigError:
        return ConfigError(f"team dir {raw!r} is refused: {reason}")

    if "\0" in raw:
        raise refused("it contains a NUL character")
    if _DRIVE_ROOT.fullmatch(raw):
        raise refused("it is a drive root")
    if raw[:2] in ("//", "\\\\", "/\\", "\\/"):
        raise refused("it is a UNC (network share) path")
    if raw in ("~", "~/", "~/.", "~/.."):
        raise refused("it is the home folder or its parent")
    if raw.startswith("~/"):
        expanded = str(home) + raw[1:]
    elif raw.startswith("~"):
        raise refused("only ~ and ~/... are expanded, not ~user")
    else:
        expanded = raw
    if not os.path.isabs(expanded):
        raise refused("it is relative; give an absolute path or one starting with ~/")
    normalized = os.path.abspath(expanded)
    if len(normalized) <= 3:
        raise refused("it is the filesystem root or within two characters of it")
    home_normalized = os.path.abspath(home)
    if normalized == home_normalized:
        raise refused("it is the home folder")
    if Path(home_normalized).is_relative_to(normalized):
        raise refused("it contains the home folder")
    return Path(normalized)


# Folders in the home folder that hold keys, credentials or tokens: a team dir is shared
# with everyone on the team, so none of them may be one, nor any folder inside them.
# Short on purpose, the well-known ones; the secret scanner still checks every file.
_SENSITIVE_FOLDERS: tuple[tuple[str, str], ...] = (
    (".ssh", "holds SSH keys and config"),
    (".gnupg", "holds GnuPG keys"),
    (".aws", "holds AWS credentials"),
    (".kube", "holds Kubernetes credentials"),
    (".docker", "holds Docker registry credentials"),
    (".config/gcloud", "holds Google Cloud credentials"),
    (".config/gh", "holds GitHub CLI tokens"),
)


# Refused itself, not what is inside it: `~/.config/<app>` is any program's own folder.
_SETTINGS_FOLDER = (".config", "holds every program's settings, tokens among them")

_MEMSYNC_CONFIG_WHY = "holds memsync's own token"

# A folder holding one of these at its top is a key folder, whatever it is called.
_PRIVATE_KEY_NAMES = frozenset(
    {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"}
)


# PEM's first line for any private key (PKCS#1, PKCS#8, EC, OpenSSH, encrypted, PGP).
_PRIVATE_KEY_HEADER = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")

# Bounds of the look for a key: entries listed, bytes read from each file.
_KEY_LOOK_ENTRIES = 200

_KEY_LOOK_BYTES = 100

_CHOOSE_ANOTHER = "choose another team dir (--dir or MEMSYNC_DIR)"


class TeamDirRefusal(NamedTuple):
    """Why a folder may not be a team dir: `reason` (it names the folder, never a file's
    bytes), `fix` (an action) and, when the reason is a key file, that file's path."""

    reason: str
    fix: str
    private_key: Path | None = None


class RefusedTeamDir(ConfigError):
    """A team dir that would share what must stay private: keys, credentials, the home
    folder (exit 2, type `config`). `problem` is the line without the fix, for doctor."""

    def __init__(self, problem: str, refusal: TeamDirRefusal) -> None:
        super().__init__(f"{problem}; {refusal.fix}")
        self.problem = problem
        self.refusal = refusal


def _shown_path(path: str, home: str) -> str:
    """`path` as a person reads it: `~/.ssh` for a folder in the home folder."""
    if path == home:
        return "~"
    if Path(path).is_relative_to(home):
        return "~/" + os.path.relpath(path, home)
    return path


def _starts_like_a_key(folder_fd: int, name: str) -> bool:
    """Whether the regular file `name` in `folder_fd` begins with a private key's header."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError:
        return False  # a symlink, a folder, gone, unreadable: the scan never sends it
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, _KEY_LOOK_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)
    return _PRIVATE_KEY_HEADER.match(head.removeprefix(b"\xef\xbb\xbf")) is not None


def _private_key_in(folder: str) -> str | None:
    """The name of a private key among the top-level files of `folder`, or None.

    Bounded, so a resolve stays cheap: at most `_KEY_LOOK_ENTRIES` entries, a file by
    its name (`id_rsa`...) or by its first `_KEY_LOOK_BYTES` bytes (a PEM header), never
    following a symlink or opening a FIFO. Notes (`*.md`) are not opened: a key pasted
    into one is the secret scanner's to find, and a team dir is mostly notes.
    """
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None  # missing, not a folder, unreadable: nothing there to send
    try:
        with os.scandir(folder_fd) as entries:
            for index, entry in enumerate(entries):
                if index >= _KEY_LOOK_ENTRIES:
                    break
                name = entry.name
                if name in _PRIVATE_KEY_NAMES:
                    if entry.is_file(follow_symlinks=False):
                        return name
                elif not name.endswith(".md") and _starts_like_a_key(folder_fd, name):
                    return name
    except OSError:
        return None
    finally:
        os.close(folder_fd)
    return None


def team_dir_refusal(
    path: Path, home: Path, *, memsync_config: Path | None = None
) -> TeamDirRefusal | None:
    """Why `path` may not be a team dir for what it is or holds, or None.

    Symlinks are resolved first (a link to `~/.ssh` is `~/.ssh`). Refused: the home
    folder and every folder holding it; each of `_SENSITIVE_FOLDERS` (`~/.ssh`,
    `~/.gnupg`, `~/.aws`, `~/.kube`, `~/.docker`, `~/.config/gcloud`, `~/.config/gh`),
    anything inside one and any folder holding one; `~/.config` itself; memsync's own
    config folder (`memsync_config`) and anything inside it; a folder with a private key
    among its top-level files (`_private_key_in`, the only check that reads files).
    """
    home_text = os.path.abspath(home)
    real_home = os.path.realpath(home_text)
    lexical = os.path.abspath(path)
    real = os.path.realpath(lexical)
    if real == real_home:
        return TeamDirRefusal(f"it resolves to the home folder ({real_home})", _CHOOSE_ANOTHER)
    if Path(real_home).is_relative_to(real):
        return TeamDirRefusal(
            f"it resolves to {real}, which holds the home folder", _CHOOSE_ANOTHER
        )
    # (folder, why, whether what is inside it is refused too)
    folders = [
        (os.path.join(home_text, relative), why, True) for relative, why in _SENSITIVE_FOLDERS
    ]
    folders.append((os.path.join(home_text, _SETTINGS_FOLDER[0]), _SETTINGS_FOLDER[1], False))
    if memsync_config is not None:
        folders.append((os.path.abspath(memsync_config), _MEMSYNC_CONFIG_WHY, True))
    resolved = [
        (_shown_path(folder, home_text), os.path.realpath(folder), why, inside_too, folder)
        for folder, why, inside_too in folders
    ]
    # The folder itself first, then one it holds, then one holding it (a sensitive
    # folder that is a symlink to somewhere else: the scan would walk into it).
    for named, real_folder, why, _, folder in resolved:
        if real == real_folder:
            if lexical == folder:
                return TeamDirRefusal(f"{named} {why}", _CHOOSE_ANOTHER)
            return TeamDirRefusal(f"it resolves to {named}, which {why}", _CHOOSE_ANOTHER)
    for named, real_folder, why, inside_too, _ in resolved:
        if inside_too and Path(real).is_relative_to(real_folder):
            return TeamDirRefusal(f"it is inside {named}, which {why}", _CHOOSE_ANOTHER)
    for named, real_folder, why, _, _ in resolved:
        if Path(real_folder).is_relative_to(real) and os.path.isdir(real_folder):
            return TeamDirRefusal(f"it holds {named} ({real_folder}), which {why}", _CHOOSE_ANOTHER)
    key = _private_key_in(real)
    if key is not None:
        return TeamDirRefusal(
            f"it holds a private key ({key})",
            f"move the key out of it, or {_CHOOSE_ANOTHER}",
            Path(real, key),
        )
    return None


def _check_team_dir(
    path: Path, home: Path, env: Mapping[str, str], shown: str, source: str | None
) -> Path:
    """`path`, unless `team_dir_refusal` refuses it: then a `RefusedTeamDir` whose line
    starts with `source` (where the value came from) and the value as given, `shown`."""
    refusal = team_dir_refusal(path, home, memsync_config=config_home(env))
    if refusal is None:
        return path
    head = f"{source}: " if source else ""
    raise RefusedTeamDir(f"{head}team dir {shown!r} is refused: {refusal.reason}", refusal)
