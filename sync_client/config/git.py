"""The git checkout a command runs in: its root, its remote `origin` and the repo name that
remote gives, read from git's own files where that is safe and from `git` otherwise.

Reading the files first keeps `memsync context` (run at every session start) from starting
a process; anything the reader does not fully understand (`_AskGit`) goes to `git`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_client.errors import ConfigError

GIT_TIMEOUT_SECONDS = 10.0

_REMOTE_SCHEMES = frozenset({"http", "https", "ssh", "git", "git+ssh", "ssh+git"})

# `[user@]host:path`, git's scp-like syntax: no slash before the first colon.
_SCP_LIKE = re.compile(r"(?:[^@/:]+@)?(?P<host>\[[^\]/]+\]|[^:/\[\]@]+):(?P<path>.*)")

_DRIVE_PATH = re.compile(r"[A-Za-z]:[\\/]")


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
