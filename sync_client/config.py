"""The client's configuration, from trusted sources only (docs/protocol.md 2, 4.1, 4.7).

Each of server URL, token, repo and team dir is taken from the first source that has it:

1. a command-line flag (the explicit arguments of `resolve`);
2. the environment: `MEMSYNC_SERVER`, `MEMSYNC_TOKEN`, `MEMSYNC_REPO`, `MEMSYNC_DIR`
   (an empty variable counts as unset);
3. the user's own files in `config_home` (`~/.config/memsync/`): `config.toml` may hold
   `server`, `repo` and `dir`; `credentials.toml` holds `server` and `token` and is
   written by `write_credentials` with mode 0600;
4. derived: the repo from the git remote `origin`, the team dir from the canonical git
   root in Claude Code's layout (`~/.claude/projects/<sanitized root>/memory/team`).

Nothing is ever read from a file inside a repository or a team dir. Anyone who can push
to the repository controls those, and could otherwise send the team's memory and the
token to their own server, or turn `~/.ssh` into the team dir.

A token stays with the server it was saved for: the token in `credentials.toml` is used
only when the resolved server is the one saved next to it (or none is saved there), so
pointing `MEMSYNC_SERVER` or `--server` somewhere else never sends that token there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_client.claude_code import sanitize_path
from sync_client.errors import ConfigError, NoCredentials, NoRepoIdentity
from sync_client.state import atomic_write

__all__ = [
    "CONFIG_FILE",
    "CREDENTIALS_FILE",
    "GIT_TIMEOUT_SECONDS",
    "ClientConfig",
    "ConfigParts",
    "RefusedTeamDir",
    "RepoIdentity",
    "TeamDirRefusal",
    "config_home",
    "default_team_dir",
    "git_root",
    "normalize_server",
    "origin_url",
    "parse_remote_url",
    "read_credentials",
    "remove_credentials",
    "resolve",
    "resolve_options_parts",
    "resolve_parts",
    "resolve_repo",
    "resolve_server",
    "sanitize_path",
    "state_home",
    "team_dir_refusal",
    "user_home",
    "validate_team_dir",
    "write_credentials",
]

CONFIG_FILE = "config.toml"
CREDENTIALS_FILE = "credentials.toml"
GIT_TIMEOUT_SECONDS = 10.0

_CONFIG_KEYS = ("server", "repo", "dir")
_CREDENTIALS_KEYS = ("server", "token")
_LOGIN_HINT = "set MEMSYNC_SERVER/MEMSYNC_TOKEN or run `memsync login`"
_REMOTE_SCHEMES = frozenset({"http", "https", "ssh", "git", "git+ssh", "ssh+git"})
# `[user@]host:path`, git's scp-like syntax: no slash before the first colon.
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?(?P<host>\[[^\]/]+\]|[^:/\[\]@]+):(?P<path>.*)")
_DRIVE_ROOT = re.compile(r"[A-Za-z]:[\\/]*")
_DRIVE_PATH = re.compile(r"[A-Za-z]:[\\/]")


@dataclass(frozen=True)
class ClientConfig:
    """Everything the client needs to talk to a server about one team dir.

    `state_dir` is where the client keeps its local state (docs/protocol.md 4.1), outside the
    team dir and distinct for every (server, repo, team dir).
    """

    server: str
    token: str = field(repr=False)
    repo: str
    team_dir: Path
    state_dir: Path
    # Where `repo` came from, in words (`memsync doctor` prints it): "--repo",
    # "MEMSYNC_REPO", the config file's path, or "git remote origin <url>".
    repo_source: str = ""


@dataclass(frozen=True)
class RepoIdentity:
    """The repo a checkout syncs as, and where that name came from, in words."""

    name: str
    source: str


def user_home(env: Mapping[str, str]) -> Path:
    """The user's home: `HOME` from `env` when it is an absolute path, else `Path.home()`."""
    home = env.get("HOME", "")
    if home and os.path.isabs(home):
        return Path(home)
    return Path(os.path.abspath(Path.home()))


def _xdg_dir(env: Mapping[str, str], variable: str, *fallback: str) -> Path:
    """`$variable/memsync`, or `~/<fallback>/memsync`; a relative value is ignored (XDG)."""
    base = env.get(variable, "")
    if base and os.path.isabs(base):
        return Path(base) / "memsync"
    return user_home(env).joinpath(*fallback, "memsync")


def config_home(env: Mapping[str, str]) -> Path:
    """The user's memsync config folder: `$XDG_CONFIG_HOME/memsync` or `~/.config/memsync`."""
    return _xdg_dir(env, "XDG_CONFIG_HOME", ".config")


def state_home(env: Mapping[str, str]) -> Path:
    """The client's state root: `$XDG_STATE_HOME/memsync` or `~/.local/state/memsync`."""
    return _xdg_dir(env, "XDG_STATE_HOME", ".local", "state")


def _repo_from_url_path(path: str) -> str | None:
    """`owner/name` from the path of a remote URL: the last two segments, `.git` dropped."""
    segments = [segment for segment in path.split("/") if segment]
    if segments and segments[-1].lower().endswith(".git"):
        segments[-1] = segments[-1][: -len(".git")]
    if any(segment in (".", "..") for segment in segments):
        return None
    # Azure DevOps: https://dev.azure.com/org/project/_git/repo is the same repo as
    # git@ssh.dev.azure.com:v3/org/project/repo, so both must give project/repo.
    if len(segments) >= 3 and segments[-2] == "_git":
        del segments[-2]
    if len(segments) < 2:
        return None
    try:
        return normalize_repo("/".join(segments[-2:]))
    except InvalidRepoError:
        return None


def parse_remote_url(url: str) -> str | None:
    """The `owner/name` a git remote URL names, lowercased, or None.

    Accepts `http(s)://`, `ssh://` (any user and port), `git://` and git's scp-like
    `[user@]host:owner/name`, on any host, with or without `.git` and a trailing slash.
    For nested groups (GitLab `group/subgroup/name`) the last two segments are the repo.
    Local paths, `file://` URLs and anything else that is not a network remote give None.
    """
    url = url.strip()
    if not url or "\\" in url or any(not char.isprintable() or char.isspace() for char in url):
        return None
    if "://" in url:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 (raises ValueError for a malformed port)
        except ValueError:
            return None
        if parts.scheme not in _REMOTE_SCHEMES or not parts.hostname:
            return None
        return _repo_from_url_path(parts.path)
    match = _SCP_LIKE.fullmatch(url)
    if match is None:
        return None
    host = match.group("host")
    # "c:/src/repo" is a Windows drive, "file:/srv/repo" a local file, not hosts.
    if len(host) < 2 or host.lower() == "file" or match.group("path").startswith(":"):
        return None
    return _repo_from_url_path(match.group("path"))


def _local_remote_path(url: str) -> str | None:
    """The folder a remote URL names when it is a local path or a `file:` URL, else None.

    git reads anything without a `scheme://` or an scp-like `host:` as a path on this
    machine: `/srv/git/app.git`, `../app.git`, `C:/src/app`, `file:///srv/git/app.git`.
    """
    url = url.strip()
    if url.lower().startswith("file://"):
        return urlsplit(url).path or url
    if url.lower().startswith("file:"):
        return url[len("file:") :]
    if "://" in url:
        return None
    if url.startswith(("/", "./", "../", "~", "\\")) or _DRIVE_PATH.match(url):
        return url
    if _SCP_LIKE.fullmatch(url) is None:
        return url  # no `host:` part: a relative path, as git reads it
    return None


def _shown_remote(url: str) -> str:
    """A remote URL fit to print: without the user and password of a `scheme://` URL,
    which may be a token (`https://ghp_...@github.com/...`)."""
    url = url.strip()
    if "://" not in url:
        return url
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _git(cwd: Path, *arguments: str) -> str | None:
    """The output of `git <arguments>` run in `cwd`, or None when git fails or is missing.

    Raises `ConfigError` when git does not answer within `GIT_TIMEOUT_SECONDS`.
    """
    import subprocess  # only when the files cannot answer (see `_read_checkout`)

    try:
        completed = subprocess.run(
            ["git", *arguments],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise ConfigError(
            f"`git {' '.join(arguments)}` did not answer within {GIT_TIMEOUT_SECONDS:g} s"
        ) from error
    except OSError:
        return None
    output = os.fsdecode(completed.stdout).removesuffix("\n")
    if completed.returncode != 0 or not output:
        return None
    return output


def git_root(cwd: Path) -> Path | None:
    """The canonical top folder of the git work tree holding `cwd`, or None outside one
    (what `git rev-parse --show-toplevel` says, read from the files when they can tell)."""
    try:
        checkout = _read_checkout(cwd)
    except _AskGit:
        top = _git(cwd, "rev-parse", "--show-toplevel")
        return Path(top).resolve() if top is not None else None
    return None if checkout is None else checkout.root


def origin_url(cwd: Path) -> str | None:
    """The URL of the git remote `origin` of the repository holding `cwd`, or None
    (what `git remote get-url origin` says, read from the files when they can tell)."""
    try:
        checkout = _read_checkout(cwd)
        return None if checkout is None else _origin_from_config(checkout)
    except _AskGit:
        pass
    url = _git(cwd, "remote", "get-url", "origin")
    return url.strip() if url is not None else None


# Reading the checkout's identity without running git: `git rev-parse --show-toplevel`
# and `git remote get-url origin` cost a process each (several ms), on every command.
# The files are read directly when they hold only what is parsed here; anything else
# (includes, extensions, GIT_* variables that steer git, a bare or odd layout, another
# owner, a filesystem boundary) raises `_AskGit` and git itself answers, so the result
# is always what git would say.


class _AskGit(Exception):
    """The checkout uses something the reader does not parse: ask git instead."""


# GIT_* variables that do not change where git finds a repository or what its config says.
_HARMLESS_GIT_VARIABLES = frozenset(
    {
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER",
        "GIT_ASKPASS",
        "GIT_TERMINAL_PROMPT",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_MERGE_AUTOEDIT",
    }
)
_GIT_SECTION = re.compile(r'\[[ \t]*([A-Za-z0-9.-]+)(?:[ \t]+"((?:[^"\\\n]|\\.)*)")?[ \t]*\]')
_GIT_KEY = re.compile(r"([A-Za-z][A-Za-z0-9-]*)[ \t]*(=?)")
_GIT_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", '"': '"', "\\": "\\"}
# (section, subsection, name, value): section and name lowercased, as git compares them.
_GitEntry = tuple[str, str | None, str, str | None]


def _git_config_value(text: str, position: int) -> tuple[str, int]:
    """The value starting at `position` (after `=`) and where its line ends.

    git's rules: quotes are dropped, `\\n \\t \\b \\" \\\\` are escapes, a backslash at
    the end of a line continues the value, `#` and `;` outside quotes start a comment,
    whitespace outside quotes becomes spaces and is trimmed at both ends.
    """
    value: list[str] = []
    spaces = 0
    quoted = False
    while position < len(text):
        char = text[position]
        position += 1
        if char == "\n":
            if quoted:
                raise _AskGit
            break
        if char.isspace() and not quoted:
            spaces += 1 if value else 0
            continue
        if char in "#;" and not quoted:
            while position < len(text) and text[position] != "\n":
                position += 1
            break
        value.append(" " * spaces)
        spaces = 0
        if char == '"':
            quoted = not quoted
        elif char == "\\":
            escaped = text[position] if position < len(text) else ""
            position += 1
            if escaped == "\n":
                continue
            if escaped not in _GIT_ESCAPES:
                raise _AskGit
            value.append(_GIT_ESCAPES[escaped])
        else:
            value.append(char)
    if quoted:
        raise _AskGit
    return "".join(value), position


def _parse_git_config(text: str) -> list[_GitEntry]:
    """The entries of one git config file, in order; `_AskGit` for anything else
    (an include, a malformed line)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    entries: list[_GitEntry] = []
    section: tuple[str, str | None] | None = None
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
        elif char in "#;":
            end = text.find("\n", position)
            position = len(text) if end < 0 else end + 1
        elif char == "[":
            match = _GIT_SECTION.match(text, position)
            if match is None:
                raise _AskGit
            name, quoted = match.group(1), match.group(2)
            if quoted is not None:
                if "." in name:
                    raise _AskGit
                section = (name.lower(), re.sub(r"\\(.)", r"\1", quoted))
            elif "." in name:
                # `[section.sub]`, the old form: the subsection is lowercased too.
                head, _, sub = name.partition(".")
                section = (head.lower(), sub.lower())
            else:
                section = (name.lower(), None)
            if section[0] in ("include", "includeif"):
                raise _AskGit
            position = match.end()
        else:
            match = _GIT_KEY.match(text, position)
            if match is None or section is None:
                raise _AskGit
            position = match.end()
            value: str | None = None
            if match.group(2):
                value, position = _git_config_value(text, position)
            else:
                rest = text.find("\n", position)
                line = text[position : len(text) if rest < 0 else rest].strip()
                if line and line[0] not in "#;":
                    raise _AskGit
                position = len(text) if rest < 0 else rest + 1
            entries.append((section[0], section[1], match.group(1).lower(), value))
    return entries


def _read_git_config(path: Path) -> list[_GitEntry]:
    """The entries of the config file at `path`; [] when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise _AskGit from error
    return _parse_git_config(os.fsdecode(data))


def _git_executable() -> Path | None:
    """Where `git` is on PATH (as the shell finds it), or None."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = Path(folder or ".", "git")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _is_git_dir(path: Path, common: Path) -> bool:
    """What git checks before it takes a folder for a repository (HEAD, objects, refs)."""
    return (
        (path / "HEAD").is_file() and (common / "objects").is_dir() and (common / "refs").is_dir()
    )


@dataclass(frozen=True)
class _Checkout:
    """A non-bare checkout as git finds it: work tree top, git dirs, all config entries."""

    root: Path
    git_dir: Path
    common_dir: Path
    config: list[_GitEntry]


def _owned(path: Path) -> bool:
    """Owned by this user: git refuses other owners' repositories (`safe.directory`)."""
    return os.stat(path).st_uid == os.geteuid()


def _read_checkout(cwd: Path) -> _Checkout | None:
    """The checkout holding `cwd`, found as git finds it; None outside any.

    Raises `_AskGit` whenever git might see it differently.
    """
    git = _git_executable()
    if os.name != "posix" or git is None:
        raise _AskGit  # without git, git's own answer (none) is kept
    if any(
        name.startswith("GIT_")
        and name not in _HARMLESS_GIT_VARIABLES
        and not name.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))
        for name in os.environ
    ):
        raise _AskGit
    try:
        directory = cwd.resolve(strict=True)
        device = os.stat(directory).st_dev
        while True:
            dot_git = directory / ".git"
            if dot_git.is_file():
                line = dot_git.read_text(encoding="utf-8").rstrip()
                if not line.startswith("gitdir: "):
                    raise _AskGit
                git_dir = (directory / line[len("gitdir: ") :]).resolve(strict=True)
                break
            if dot_git.is_dir():
                git_dir = dot_git.resolve(strict=True)
                break
            if dot_git.exists() or (directory / "HEAD").exists():
                raise _AskGit  # a bare repository, or inside a git dir
            parent = directory.parent
            if parent == directory:
                return None
            if os.stat(parent).st_dev != device:
                raise _AskGit  # git stops at a filesystem boundary
            directory = parent
        common_dir = git_dir
        commondir_file = git_dir / "commondir"
        if commondir_file.exists():
            common_dir = (git_dir / commondir_file.read_text(encoding="utf-8").strip()).resolve()
        if not _is_git_dir(git_dir, common_dir) or not (_owned(directory) and _owned(git_dir)):
            raise _AskGit
        config = _user_git_config(git) + _read_git_config(common_dir / "config")
    except (OSError, UnicodeDecodeError) as error:
        raise _AskGit from error
    for section, _, name, value in config:
        if section == "extensions" or (section == "core" and name == "bare" and value != "false"):
            raise _AskGit
        worktree = section == "core" and name == "worktree"
        if worktree and (value is None or (git_dir / value).resolve() != directory):
            raise _AskGit
    return _Checkout(directory, git_dir, common_dir, config)


def _user_git_config(git: Path) -> list[_GitEntry]:
    """The system and global config entries, in git's order (`git`: its executable)."""
    if git.resolve() not in (Path("/usr/bin/git"), Path("/bin/git")):
        raise _AskGit  # another install keeps its system config elsewhere
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        raise _AskGit
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    xdg_file = Path(xdg, "git", "config") if xdg else Path(home, ".config", "git", "config")
    entries: list[_GitEntry] = []
    for path in (Path("/etc/gitconfig"), xdg_file, Path(home, ".gitconfig")):
        entries += _read_git_config(path)
    return entries


def _origin_from_config(checkout: _Checkout) -> str | None:
    """`git remote get-url origin` from the config: the URL with `insteadOf` applied."""
    urls = [
        value
        for section, sub, name, value in checkout.config
        if section == "remote" and sub == "origin" and name == "url"
    ]
    if not urls:
        legacy = (
            checkout.common_dir / "remotes" / "origin",
            checkout.common_dir / "branches" / "origin",
        )
        configured = any(
            section == "remote" and sub == "origin" for section, sub, _, _ in checkout.config
        )
        if configured or any(path.exists() for path in legacy):
            raise _AskGit
        return None
    if len(urls) > 1 or not urls[0]:
        raise _AskGit
    url = urls[0]
    best: tuple[int, str, str] | None = None
    for section, base, name, value in checkout.config:
        if section != "url" or name != "insteadof":
            continue
        if not value or base is None:
            raise _AskGit
        if url.startswith(value) and (best is None or len(value) > best[0]):
            best = (len(value), value, base)
    if best is not None:
        url = best[2] + url[best[0] :]
    return url.strip() or None


def default_team_dir(root: Path, home: Path, env: Mapping[str, str] | None = None) -> Path:
    """The team dir Claude Code uses for the git checkout at `root` (see `claude_code`):
    `<config root>/projects/<sanitized canonical root>/memory/team`."""
    from sync_client import claude_code

    return claude_code.team_dir(root, home, env or {})


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


def _load_toml(path: Path) -> dict[str, Any] | None:
    """The TOML file at `path`; None when it does not exist.

    Raises `ConfigError` when it cannot be read or is not TOML.
    """
    try:
        file = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from error
    import tomllib  # only when there is a file: many runs have none

    with file:
        try:
            return tomllib.load(file)
        except OSError as error:
            raise ConfigError(f"cannot read {path}: {error.strerror or error}") from error
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{path} is not valid TOML: {error}") from error


def _read_toml_strings(path: Path, allowed_keys: tuple[str, ...]) -> dict[str, str]:
    """The string values of a flat TOML file; {} when it does not exist.

    Raises `ConfigError` when it cannot be read, is not TOML, holds a key not in
    `allowed_keys` (a typo should not be silently ignored) or a value that is not a string.
    Messages never include values: this file may hold a token.
    """
    data = _load_toml(path)
    if data is None:
        return {}
    values: dict[str, str] = {}
    for key, value in data.items():
        if key not in allowed_keys:
            raise ConfigError(f"{path}: unknown key {key!r} (expected {', '.join(allowed_keys)})")
        if not isinstance(value, str):
            raise ConfigError(f"{path}: {key} must be a string")
        values[key] = value
    return values


def read_credentials(home_dir: Path) -> dict[str, str]:
    """`server` and `token` from `credentials.toml` in `home_dir` (the `config_home`).

    Either key may be missing; {} when the file does not exist. Raises `ConfigError` when
    the file cannot be read or is malformed.
    """
    return _read_toml_strings(home_dir / CREDENTIALS_FILE, _CREDENTIALS_KEYS)


def normalize_server(value: str, source: str) -> str:
    """A server base URL: http(s), with a host, lowercase scheme and host, no trailing `/`.

    The value is never echoed in the error: a mistaken one may be a token.
    """
    problem = ConfigError(
        f"{source}: the server must be an http:// or https:// URL with a host,"
        " like https://memsync.example.com"
    )
    if not value or any(not char.isprintable() or char.isspace() for char in value):
        raise problem
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (raises ValueError for a malformed port)
    except ValueError as error:
        raise problem from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise problem
    if "@" in parts.netloc:
        raise ConfigError(
            f"{source}: the server URL must not hold a user or password; the token goes"
            " in MEMSYNC_TOKEN or `memsync login`"
        )
    if parts.query or parts.fragment or value.endswith(("?", "#")):
        raise ConfigError(f"{source}: the server URL must not have a query or fragment")
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


def _check_token(token: str, source: str) -> str:
    """`token` when it is non-empty printable ASCII without whitespace (it goes in a header)."""
    if not token or not all("!" <= char <= "~" for char in token):
        raise ConfigError(
            f"{source}: the token must be non-empty printable ASCII without whitespace"
        )
    return token


def _toml_string(value: str) -> str:
    """`value` as a TOML basic string."""
    escaped = []
    for char in value:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _make_private_dirs(directory: Path) -> None:
    """Create `directory` and its missing parents, each with mode 0700 (before the umask)."""
    missing = []
    for folder in (directory, *directory.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)


def write_credentials(home_dir: Path, *, server: str | None, token: str | None) -> Path:
    """Save `server` and/or `token` to `credentials.toml` in `home_dir`; return its path.

    A None value keeps what the file holds. Changing the saved server without giving a
    token drops the saved token, which belongs to the old server. The file is replaced
    atomically with mode 0600; missing folders are created with mode 0700. Raises
    `ConfigError` for a bad server URL or token, a malformed existing file, or a failed
    write.
    """
    updates: dict[str, str] = {}
    if server is not None:
        updates["server"] = normalize_server(server, "server")
    if token is not None:
        updates["token"] = _check_token(token, "token")
    existing = read_credentials(home_dir)
    if (
        "server" in updates
        and "token" not in updates
        and "server" in existing
        and existing["server"] != updates["server"]
    ):
        existing.pop("token", None)
    merged = {**existing, **updates}
    path = home_dir / CREDENTIALS_FILE
    text = "# memsync credentials, written by `memsync login`. Keep this file private.\n"
    text += "".join(
        f"{key} = {_toml_string(merged[key])}\n" for key in _CREDENTIALS_KEYS if key in merged
    )
    try:
        _make_private_dirs(home_dir)
        atomic_write(path, text.encode("utf-8"), mode=0o600)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error.strerror or error}") from error
    return path


def remove_credentials(home_dir: Path) -> tuple[Path, str | None] | None:
    """Delete `credentials.toml` in `home_dir`, for `memsync logout`.

    Returns its path and the server it was saved for (None when it named none or could
    not be read: a malformed file is removed all the same), or None when there was no
    file. Raises `ConfigError` when it exists but cannot be removed.
    """
    path = home_dir / CREDENTIALS_FILE
    if not path.is_file():
        return None
    try:
        saved_server: str | None = read_credentials(home_dir).get("server")
    except ConfigError:
        saved_server = None
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigError(f"cannot remove {path}: {error.strerror or error}") from error
    return path, saved_server


def _first(*candidates: tuple[str | None, str]) -> tuple[str, str] | None:
    """The first (value, source) whose value is not None."""
    for value, source in candidates:
        if value is not None:
            return value, source
    return None


def _state_dir(env: Mapping[str, str], server: str, repo: str, team_dir: Path) -> Path:
    """`state_home/<id>`, id = first 16 hex of SHA-256 over server, repo and team dir."""
    identity = f"{server}\n{repo}\n{team_dir}".encode()
    return state_home(env) / hashlib.sha256(identity).hexdigest()[:16]


def _resolve_token(
    token: str | None,
    env: Mapping[str, str],
    server: str | None,
    credentials: Mapping[str, str],
    credentials_path: Path,
) -> str:
    """The token: `--token`, MEMSYNC_TOKEN, or the one saved for `server` (for any
    server when `server` is None, i.e. unknown)."""
    chosen = _first((token, "--token"), (env.get("MEMSYNC_TOKEN") or None, "MEMSYNC_TOKEN"))
    if chosen is not None:
        return _check_token(*chosen)
    saved_token = credentials.get("token")
    if saved_token is None:
        raise NoCredentials(f"no token: {_LOGIN_HINT}")
    saved_server = credentials.get("server")
    if (
        server is not None
        and saved_server is not None
        and normalize_server(saved_server, str(credentials_path)) != server
    ):
        raise NoCredentials(
            f"the token in {credentials_path} is for {saved_server}, not {server}: {_LOGIN_HINT}"
        )
    return _check_token(saved_token, str(credentials_path))


def _repo_from_origin(cwd: Path) -> RepoIdentity:
    """The repo the git remote `origin` of the checkout holding `cwd` names."""
    url = origin_url(cwd)
    if url is None:
        where = (
            "this git repository has no remote origin"
            if git_root(cwd)
            else f"{cwd} is not inside a git repository"
        )
        raise NoRepoIdentity(f"no repo: {where}; pass --repo owner/name or set MEMSYNC_REPO")
    derived = parse_remote_url(url)
    if derived is not None:
        return RepoIdentity(derived, f"git remote origin {_shown_remote(url)}")
    local = _local_remote_path(url)
    if local is not None:
        # A path names one machine's folder: teammates' clones would each derive a
        # different name, or none, so the team must agree on one explicitly.
        shown = local if local.isprintable() else repr(local)
        raise NoRepoIdentity(
            f"the git remote origin is a local path ({shown}), not a hosted repo:"
            " set MEMSYNC_REPO=owner/name so teammates share one memory"
        )
    # The URL is not shown: it may carry a password or token.
    raise NoRepoIdentity(
        "no repo: the git remote origin does not name host/owner/name;"
        " pass --repo owner/name or set MEMSYNC_REPO"
    )


def _resolve_repo(
    repo: str | None, env: Mapping[str, str], user_config: Mapping[str, str], source: str, cwd: Path
) -> RepoIdentity:
    """`owner/name`: `--repo`, MEMSYNC_REPO, config.toml, or the git remote `origin`."""
    chosen = _first(
        (repo, "--repo"),
        (env.get("MEMSYNC_REPO") or None, "MEMSYNC_REPO"),
        (user_config.get("repo"), source),
    )
    if chosen is None:
        return _repo_from_origin(cwd)
    value, value_source = chosen
    try:
        return RepoIdentity(normalize_repo(value), value_source)
    except InvalidRepoError as error:
        raise ConfigError(
            f"{value_source}: repo must be owner/name (letters, digits, '.', '_', '-'),"
            f" got {value!r}"
        ) from error


def _resolve_team_dir(
    team_dir: str | None,
    env: Mapping[str, str],
    user_config: Mapping[str, str],
    source: str,
    cwd: Path,
    home: Path,
    *,
    flag_source: str = "--dir",
    sensitive: bool = True,
) -> Path:
    """The team dir: `--dir`, MEMSYNC_DIR, config.toml, or Claude Code's for the git root.

    Unless not `sensitive`, a folder `team_dir_refusal` refuses is a `RefusedTeamDir`,
    wherever it came from; this costs a few `realpath` calls and one bounded listing,
    once per resolve (a watcher resolves when it starts and on its signals only).
    `flag_source` names the first source in messages (an enrolment passes its entry).
    """
    chosen = _first(
        (team_dir, flag_source),
        (env.get("MEMSYNC_DIR") or None, "MEMSYNC_DIR"),
        (user_config.get("dir"), source),
    )
    if chosen is not None:
        value, value_source = chosen
        try:
            path = validate_team_dir(value, home)
        except ConfigError as error:
            raise ConfigError(f"{value_source}: {error}") from error
        return _check_team_dir(path, home, env, value, value_source) if sensitive else path
    root = git_root(cwd)
    if root is None:
        raise ConfigError(
            f"no team dir: {cwd} is not inside a git repository; pass --dir or set MEMSYNC_DIR"
        )
    path = default_team_dir(root, home, env)
    return _check_team_dir(path, home, env, str(path), None) if sensitive else path


def _choose_server(
    server: str | None,
    env: Mapping[str, str],
    user_config: Mapping[str, str],
    config_path: Path,
    credentials: Mapping[str, str],
) -> tuple[str, str] | None:
    """(server URL, where it came from): the flag, MEMSYNC_SERVER, config.toml, then the
    server saved with the credentials; None when none of them names one."""
    return _first(
        (server, "--server"),
        (env.get("MEMSYNC_SERVER") or None, "MEMSYNC_SERVER"),
        (user_config.get("server"), str(config_path)),
        (credentials.get("server"), str(config_path.with_name(CREDENTIALS_FILE))),
    )


def resolve_server(server: str | None, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(normalized server URL, where it came from) as every command chooses it, or None
    when no flag, variable or file names one (for `memsync login`).

    Raises `ConfigError` for a bad URL (naming its source) or a malformed user file.
    """
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    chosen = _choose_server(server, env, user_config, config_path, read_credentials(directory))
    if chosen is None:
        return None
    return normalize_server(*chosen), chosen[1]


def resolve_repo(repo: str | None, *, cwd: Path, env: Mapping[str, str]) -> RepoIdentity:
    """The repo `cwd` syncs as and where the name came from: `--repo`, MEMSYNC_REPO,
    config.toml, or the git remote `origin`. Raises `NoRepoIdentity` or `ConfigError`."""
    config_path = config_home(env) / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    return _resolve_repo(repo, env, user_config, str(config_path), cwd)


T = TypeVar("T")


def _attempt(step: Callable[[], T]) -> T | ConfigError:
    """`step()`, or the `ConfigError` it raised."""
    try:
        return step()
    except ConfigError as error:
        return error


@dataclass(frozen=True)
class ConfigParts:
    """Each part of a `ClientConfig` resolved on its own: its value, or the `ConfigError`
    that part met. `memsync doctor` reports every part even when one fails."""

    server: str | ConfigError
    token: str | ConfigError = field(repr=False)
    repo: RepoIdentity | ConfigError
    team_dir: Path | ConfigError

    def config(self, env: Mapping[str, str]) -> ClientConfig:
        """The whole `ClientConfig`; raises the first error, in the order server, token,
        repo, team dir."""
        server, token, repo, team_dir = self.server, self.token, self.repo, self.team_dir
        if isinstance(server, ConfigError):
            raise server
        if isinstance(token, ConfigError):
            raise token
        if isinstance(repo, ConfigError):
            raise repo
        if isinstance(team_dir, ConfigError):
            raise team_dir
        return ClientConfig(
            server=server,
            token=token,
            repo=repo.name,
            team_dir=team_dir,
            state_dir=_state_dir(env, server, repo.name, team_dir),
            repo_source=repo.source,
        )


def resolve_parts(
    *,
    server: str | None,
    token: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    team_dir_source: str | None = None,
) -> ConfigParts:
    """Server, token, repo and team dir, each resolved as `resolve` does, each on its own:
    a part that fails does not stop the others (a malformed user file fails every part
    read from it). `team_dir_source` names where `team_dir` came from in messages
    (default `--dir`)."""
    home = user_home(env)
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    credentials_path = directory / CREDENTIALS_FILE
    user_config = _attempt(lambda: _read_toml_strings(config_path, _CONFIG_KEYS))
    credentials = _attempt(lambda: read_credentials(directory))

    def choose_server() -> str:
        if isinstance(user_config, ConfigError):
            raise user_config
        if isinstance(credentials, ConfigError):
            raise credentials
        chosen = _choose_server(server, env, user_config, config_path, credentials)
        if chosen is None:
            raise NoCredentials(f"no server URL: {_LOGIN_HINT}")
        return normalize_server(*chosen)

    resolved_server = _attempt(choose_server)

    def choose_token() -> str:
        if isinstance(credentials, ConfigError):
            raise credentials
        known_server = resolved_server if isinstance(resolved_server, str) else None
        return _resolve_token(token, env, known_server, credentials, credentials_path)

    def choose_repo() -> RepoIdentity:
        if isinstance(user_config, ConfigError):
            raise user_config
        return _resolve_repo(repo, env, user_config, str(config_path), cwd)

    def choose_team_dir() -> Path:
        if isinstance(user_config, ConfigError):
            raise user_config
        return _resolve_team_dir(
            team_dir,
            env,
            user_config,
            str(config_path),
            cwd,
            home,
            flag_source=team_dir_source or "--dir",
        )

    return ConfigParts(
        server=resolved_server,
        token=_attempt(choose_token),
        repo=_attempt(choose_repo),
        team_dir=_attempt(choose_team_dir),
    )


def resolve(
    *,
    server: str | None,
    token: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    team_dir_source: str | None = None,
) -> ClientConfig:
    """The configuration for working in `cwd`: flags > environment > user config > derived.

    The explicit arguments are the command-line flags (None when not given). Raises
    `NoCredentials` without a server or token, `NoRepoIdentity` without a repo, and
    `ConfigError` for a bad value, naming where the value came from (`RefusedTeamDir`
    for a team dir that would share keys or credentials, see `team_dir_refusal`).
    """
    parts = resolve_parts(
        server=server,
        token=token,
        repo=repo,
        team_dir=team_dir,
        cwd=cwd,
        env=env,
        team_dir_source=team_dir_source,
    )
    return parts.config(env)


def _flags(options: Mapping[str, object]) -> dict[str, str | None]:
    """The global flags as the CLI collects them (`server`, `token`, `repo`, `team_dir`);
    absent or non-text ones count as not given."""

    def flag(name: str) -> str | None:
        value = options.get(name)
        return value if isinstance(value, str) else None

    return {name: flag(name) for name in ("server", "token", "repo", "team_dir")}


def resolve_options(
    options: Mapping[str, object], *, cwd: Path, env: Mapping[str, str]
) -> ClientConfig:
    """`resolve` with the global flags as the CLI collects them (`server`, `token`,
    `repo`, `team_dir`; absent or non-text ones count as not given)."""
    return resolve(**_flags(options), cwd=cwd, env=env)


def resolve_options_parts(
    options: Mapping[str, object], *, cwd: Path, env: Mapping[str, str]
) -> ConfigParts:
    """`resolve_parts` with the global flags as the CLI collects them (for doctor)."""
    return resolve_parts(**_flags(options), cwd=cwd, env=env)


# Enrolled repos (`memsync enable`), served by one `memsync watch --all` per person.

ENROLLED_FILE = "repos.toml"
_ENROLLED_KEYS = ("server", "repo", "dir", "root")

# Kept apart from the list above, so both grow without touching each other.
__all__ += [
    "ENROLLED_FILE",
    "Enrollment",
    "enroll",
    "enrolled_config",
    "git_config_path",
    "read_enrolled",
    "resolve_options",
    "resolve_target",
    "state_dir_for",
    "unenroll",
]


@dataclass(frozen=True)
class Enrollment:
    """One enrolled repo: its team dir on its server (and the git checkout, if known).

    `git_root` is where the repo was enabled: its git config is the watcher's recovery
    signal for a missing repo identity, and the directory a config is resolved in.
    """

    server: str
    repo: str
    team_dir: Path
    git_root: Path | None = None

    def as_json(self) -> dict[str, str | None]:
        """`{server, repo, dir, root}` as `memsync status --all --json` prints it."""
        return {
            "server": self.server,
            "repo": self.repo,
            "dir": str(self.team_dir),
            "root": None if self.git_root is None else str(self.git_root),
        }

    def same_target(self, other: Enrollment) -> bool:
        """The same (server, repo, team dir): the identity of its local state."""
        return (self.server, self.repo, self.team_dir) == (
            other.server,
            other.repo,
            other.team_dir,
        )


def state_dir_for(env: Mapping[str, str], server: str, repo: str, team_dir: Path) -> Path:
    """The state dir of (server, repo, team dir): where `resolve` puts it too."""
    return _state_dir(env, server, repo, team_dir)


def git_config_path(cwd: Path) -> Path | None:
    """The config file of the git repository holding `cwd` (worktrees share theirs)."""
    try:
        checkout = _read_checkout(cwd)
    except _AskGit:
        checkout = None
    else:
        if checkout is not None:
            return checkout.common_dir / "config"
    common = _git(cwd, "rev-parse", "--git-common-dir")
    if common is None:
        return None
    path = Path(common)
    return (path if path.is_absolute() else cwd / path).resolve() / "config"


def _enrolled_path(home_dir: Path) -> Path:
    return home_dir / ENROLLED_FILE


def read_enrolled(home_dir: Path) -> list[Enrollment]:
    """The repos enrolled in `repos.toml` in `home_dir` (the `config_home`), in order.

    [] when the file does not exist. Raises `ConfigError` (one line, naming the file)
    when it cannot be read or an entry is malformed.
    """
    path = _enrolled_path(home_dir)
    data = _load_toml(path)
    if data is None:
        return []
    unknown = [key for key in data if key != "repo"]
    if unknown or not isinstance(data.get("repo", []), list):
        raise ConfigError(f"{path}: expected only [[repo]] tables")
    home = user_home(os.environ)
    enrolled: list[Enrollment] = []
    for index, table in enumerate(data.get("repo", []), start=1):
        where = f"{path}: repo {index}"
        if not isinstance(table, dict) or any(key not in _ENROLLED_KEYS for key in table):
            raise ConfigError(f"{where}: expected the keys {', '.join(_ENROLLED_KEYS)}")
        if not all(isinstance(value, str) for value in table.values()):
            raise ConfigError(f"{where}: every value must be a string")
        if not all(key in table for key in ("server", "repo", "dir")):
            raise ConfigError(f"{where}: server, repo and dir are required")
        try:
            repo = normalize_repo(table["repo"])
        except InvalidRepoError as error:
            raise ConfigError(f"{where}: repo must be owner/name") from error
        root = table.get("root")
        try:
            team_dir = validate_team_dir(table["dir"], home)
        except ConfigError as error:
            raise ConfigError(f"{where}: {error}") from error
        enrolled.append(
            Enrollment(
                server=normalize_server(table["server"], where),
                repo=repo,
                team_dir=team_dir,
                git_root=Path(root) if root and os.path.isabs(root) else None,
            )
        )
    return enrolled


def _write_enrolled(home_dir: Path, enrolled: list[Enrollment]) -> None:
    lines = ["# Repos served by `memsync watch --all`; written by `memsync enable`.\n"]
    for item in enrolled:
        lines.append("\n[[repo]]\n")
        for key, value in item.as_json().items():
            if value is not None:
                lines.append(f"{key} = {_toml_string(value)}\n")
    path = _enrolled_path(home_dir)
    try:
        _make_private_dirs(home_dir)
        atomic_write(path, "".join(lines).encode("utf-8"), mode=0o600)
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error.strerror or error}") from error


def enroll(home_dir: Path, enrollment: Enrollment) -> bool:
    """Add `enrollment` to `repos.toml`; False when that target was enrolled already
    (its git root is then updated)."""
    enrolled = read_enrolled(home_dir)
    for index, item in enumerate(enrolled):
        if item.same_target(enrollment):
            if enrollment.git_root is not None and item.git_root != enrollment.git_root:
                enrolled[index] = enrollment
                _write_enrolled(home_dir, enrolled)
            return False
    _write_enrolled(home_dir, [*enrolled, enrollment])
    return True


def unenroll(
    home_dir: Path, *, repo: str, server: str | None = None, team_dir: Path | None = None
) -> list[Enrollment]:
    """Remove the enrolled entries of `repo` (on `server`, for `team_dir`, when given);
    return the removed ones."""
    enrolled = read_enrolled(home_dir)
    removed = [
        item
        for item in enrolled
        if item.repo == repo
        and (server is None or item.server == server)
        and (team_dir is None or item.team_dir == team_dir)
    ]
    if removed:
        _write_enrolled(home_dir, [item for item in enrolled if item not in removed])
    return removed


def resolve_target(
    *,
    server: str | None,
    repo: str | None,
    team_dir: str | None,
    cwd: Path,
    env: Mapping[str, str],
    require_server: bool = True,
    require_team_dir: bool = True,
) -> tuple[str | None, str, Path | None]:
    """(server, repo, team dir) as `resolve` would choose them, without needing a token.

    For `memsync enable` and `disable`. A server or team dir that is not required and
    cannot be found is None. Raises like `resolve`; a team dir that is not required
    (`disable`) is not held to `team_dir_refusal`, so turning off a folder that came to
    hold a key still works.
    """
    home = user_home(env)
    directory = config_home(env)
    config_path = directory / CONFIG_FILE
    user_config = _read_toml_strings(config_path, _CONFIG_KEYS)
    credentials = read_credentials(directory)
    chosen_server = _choose_server(server, env, user_config, config_path, credentials)
    if chosen_server is None and require_server:
        raise NoCredentials(f"no server URL: {_LOGIN_HINT}")
    resolved_server = None if chosen_server is None else normalize_server(*chosen_server)
    resolved_repo = _resolve_repo(repo, env, user_config, str(config_path), cwd).name
    try:
        resolved_dir: Path | None = _resolve_team_dir(
            team_dir, env, user_config, str(config_path), cwd, home, sensitive=require_team_dir
        )
    except ConfigError:
        if require_team_dir or team_dir is not None or env.get("MEMSYNC_DIR"):
            raise
        resolved_dir = None
    return resolved_server, resolved_repo, resolved_dir


def enrolled_config(
    enrollment: Enrollment, *, token: str | None, env: Mapping[str, str]
) -> ClientConfig:
    """The `ClientConfig` of an enrolled repo: its own server, repo and team dir; the
    token from `token`, MEMSYNC_TOKEN or the credentials saved for that server."""
    return resolve(
        server=enrollment.server,
        token=token,
        repo=enrollment.repo,
        team_dir=str(enrollment.team_dir),
        cwd=enrollment.git_root or user_home(env),
        env=env,
        team_dir_source=f"{_enrolled_path(config_home(env))}: {enrollment.repo}",
    )
