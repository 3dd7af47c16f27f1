"""Qwen Code's facts, in one place: where it keeps a project's memory and its settings.

Read from the bundled source of `@qwen-code/qwen-code` 0.24.4 (`packages/core/src/memory/
paths.ts`, `config/storage.ts`, `utils/paths.ts`, the hook runner):

- Its user folder is `$QWEN_HOME` when set, else `~/.qwen`; `settings.json` there holds
  `hooks` (Claude Code's shape: event, then groups of `matcher` and `hooks`) and
  `mcpServers`.
- Its memory base is `$QWEN_CODE_MEMORY_BASE_DIR`, else `$QWEN_RUNTIME_DIR`, else the
  settings' `advanced.runtimeOutputDir`, else the user folder. A project's private
  memory is `<memory base>/projects/<sanitized project key>/memory/` with the index
  `MEMORY.md` (its first 200 lines and 25,000 characters go into every session).
- The project key is the nearest folder at or above the working folder holding a `.git`
  entry (a file or a folder), so a linked worktree has a folder of its own (unlike
  Claude Code). Sanitized: every UTF-16 code unit that is not an ASCII letter or digit
  becomes `-`, with no length cut (on Windows the path is lower-cased first).
- Its write and read tools allow, without asking, any path inside that memory folder
  (the path resolved, the folder not), so memsync's team dir is `memory/team/` there,
  the same place as Claude Code's (the main checkout's, for a worktree too). Its own
  opt-in "team memory" is a folder inside the repository (`<git root>/.qwen/team-memory/`,
  carried by git): memsync never writes it.
- `QWEN_CODE_MEMORY_LOCAL=1` moves the private memory into the repository
  (`<project>/.qwen/memory/`): then Qwen Code has no team dir memsync may use.
- A `SessionStart` hook (sources `startup`, `resume`, `clear`, `compact`) whose command
  exits 0 has its plain stdout added to the session's context; `SessionEnd` runs as the
  session ends.

Only the pure rules live here (no I/O but a checkout's `.git` files, read by
`claude_code.canonical_root`); `agents/qwen.py` edits the settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

SETTINGS_FILE = "settings.json"
# The variables the folder rule reads (a cached answer is kept only while they are the same).
ENV_VARIABLES = (
    "QWEN_HOME",
    "QWEN_RUNTIME_DIR",
    "QWEN_CODE_MEMORY_BASE_DIR",
    "QWEN_CODE_MEMORY_LOCAL",
)
# The session-start sources a SessionStart hook is given, each a matcher.
SESSION_START_SOURCES = ("startup", "resume", "clear", "compact")


def _env_path(raw: str, home: Path) -> Path | None:
    """An environment variable's folder as Qwen Code expands it (`~` is the home
    folder); None for an empty or relative value, which memsync does not guess at."""
    value = raw.strip()
    if not value:
        return None
    if value == "~":
        return home
    path = home / value[2:] if value.startswith("~/") else Path(value)
    return path if path.is_absolute() else None


def user_folder(home: Path, env: Mapping[str, str]) -> Path:
    """`$QWEN_HOME` (when set and absolute, `~` expanded), else `~/.qwen`."""
    return _env_path(env.get("QWEN_HOME", ""), home) or home / ".qwen"


def settings_path(home: Path, env: Mapping[str, str]) -> Path:
    """The user's Qwen Code settings file (hooks and MCP servers)."""
    return user_folder(home, env) / SETTINGS_FILE


def memory_base(home: Path, env: Mapping[str, str]) -> Path:
    """The folder holding `projects/`: `$QWEN_CODE_MEMORY_BASE_DIR`, else
    `$QWEN_RUNTIME_DIR`, else the user folder (`advanced.runtimeOutputDir` in the
    settings is not followed)."""
    for name in ("QWEN_CODE_MEMORY_BASE_DIR", "QWEN_RUNTIME_DIR"):
        path = _env_path(env.get(name, ""), home)
        if path is not None:
            return path
    return user_folder(home, env)


def sanitize_path(path: Path) -> str:
    """Qwen Code's project folder name for `path`: every UTF-16 code unit that is not an
    ASCII letter or digit becomes `-` (an emoji gives two), whatever the length."""
    return "".join(
        char if char.isascii() and char.isalnum() else "-" * (2 if ord(char) > 0xFFFF else 1)
        for char in str(path)
    )


def memory_dir(root: Path, home: Path, env: Mapping[str, str]) -> Path | None:
    """Qwen Code's private memory folder for the git checkout at `root` (its top folder,
    the one holding `.git`); None when `QWEN_CODE_MEMORY_LOCAL=1` keeps it in the
    repository."""
    if env.get("QWEN_CODE_MEMORY_LOCAL") == "1":
        return None
    return memory_base(home, env) / "projects" / sanitize_path(root) / "memory"


def team_dir(root: Path, home: Path, env: Mapping[str, str]) -> Path | None:
    """memsync's team dir in Qwen Code's folder for `root`: `memory/team/` in the folder
    of the main checkout, for a linked worktree too (one repository, one folder, as
    `memsync enable` keeps it; a worktree's sessions are pointed at it by their
    session-start block)."""
    from sync_client.claude_code import canonical_root

    memory = memory_dir(canonical_root(root), home, env)
    return None if memory is None else memory / "team"
