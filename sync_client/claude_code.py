"""Claude Code's facts, in one place: where it keeps a project's memory and its settings.

Checked against the real CLI (2.1.197):

- The config root is `$CLAUDE_CONFIG_DIR` when set, else `~/.claude`. It holds
  `settings.json` (hooks, permissions) and `projects/`; the user's MCP servers are in
  `$CLAUDE_CONFIG_DIR/.claude.json`, or `~/.claude.json` without the variable.
- A project's folder is `projects/<sanitized canonical git root>`: every worktree of a
  repository (`git worktree add`, and `claude --worktree`'s `.claude/worktrees/<name>`)
  shares the main checkout's folder. Sanitized: every character that is not an ASCII
  letter or digit becomes `-` (one per UTF-16 code unit); a name over 200 characters is
  cut to 200, then `-` and a hash of the path.
- Its private memory is `<project folder>/memory/` with the index `MEMORY.md`; memsync's
  team dir is `memory/team/` beside it, which Claude Code's Write tool may write without
  a permission prompt.
- A `SessionStart` hook's stdout reaches the model (up to 10,000 characters inline); a
  `SessionEnd` hook runs as the session ends.

A subagent whose definition has `memory: <scope>` keeps its own memory folder (not
checked against the CLI here; the layout of Claude Code 2.1): `user` scope
`<config root>/agent-memory/<agent type>/`, `project` scope
`<project>/.claude/agent-memory/<agent type>/` (checked in, shared with the team),
`local` scope `<project>/.claude/agent-memory-local/<agent type>/` (git-ignored).
A committed snapshot a subagent is seeded from (`memsync snapshot`) sits in
`<project>/.claude/agent-memory-snapshots/<agent type>/`.

Only the pure rules live here (no I/O except reading the `.git` files of a checkout);
`setup` edits the settings files and `context` prints the session-start block.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

# One count of UTF-16 units for the index cut (shared with the server) and the hook.
from memsync_protocol.claude_text import utf16_length as utf16_length

# A sanitized project name is kept whole up to this many characters.
MAX_SANITIZED_LENGTH = 200
_BASE36_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
# What Claude Code inlines of a hook's output; past it the model sees a file stub.
HOOK_OUTPUT_MAX_CHARS = 10_000
SETTINGS_FILE = "settings.json"
USER_CONFIG_FILE = ".claude.json"
# The session-start sources a SessionStart hook is given, each a matcher.
SESSION_START_SOURCES = ("startup", "resume", "clear", "compact")
# The name memsync's MCP server is registered under; its tools are `mcp__memsync__*`.
MCP_SERVER_NAME = "memsync"
# A subagent's memory scope, and its folder below the config root (`user`) or the
# project's top folder (`project`, `local`); the agent type is one more segment.
AgentMemoryScope = Literal["user", "project", "local"]
AGENT_MEMORY_FOLDERS: dict[AgentMemoryScope, tuple[str, ...]] = {
    "user": ("agent-memory",),
    "project": (".claude", "agent-memory"),
    "local": (".claude", "agent-memory-local"),
}
# Where a repository keeps committed snapshots of subagents' memory, below its top folder
# (one folder per agent type), beside the `project` scope's memory.
AGENT_MEMORY_SNAPSHOTS = (".claude", "agent-memory-snapshots")


def config_root(home: Path, env: Mapping[str, str]) -> Path:
    """`$CLAUDE_CONFIG_DIR` (when set and absolute, `~` expanded), else `~/.claude`."""
    configured = env.get("CLAUDE_CONFIG_DIR", "").strip()
    if configured:
        path = home / configured[2:] if configured.startswith("~/") else Path(configured)
        if path.is_absolute():
            return path
    return home / ".claude"


def settings_path(home: Path, env: Mapping[str, str]) -> Path:
    """The user's Claude Code settings file (hooks and permissions)."""
    return config_root(home, env) / SETTINGS_FILE


def user_config_path(home: Path, env: Mapping[str, str]) -> Path:
    """The file holding the user's MCP servers (`claude mcp add --scope user`)."""
    if env.get("CLAUDE_CONFIG_DIR", "").strip():
        return config_root(home, env) / USER_CONFIG_FILE
    return home / USER_CONFIG_FILE


def _utf16_units(char: str) -> int:
    return 2 if ord(char) > 0xFFFF else 1


def _path_hash(text: str) -> str:
    """The long-path suffix: |Java-style int32 hash of the UTF-16 units|, in base 36."""
    data = text.encode("utf-16-le", "surrogatepass")
    value = 0
    for index in range(0, len(data), 2):
        value = (value * 31 + int.from_bytes(data[index : index + 2], "little")) & 0xFFFFFFFF
    number = abs(value - (1 << 32) if value >= 1 << 31 else value)
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = _BASE36_DIGITS[digit] + digits
        if number == 0:
            return digits


def sanitize_path(path: Path) -> str:
    """Claude Code's project folder name for `path`.

    Every character that is not an ASCII letter or digit becomes `-` (one per UTF-16 code
    unit, as Claude Code counts, so an emoji gives two). A result longer than 200
    characters is cut to 200 and suffixed with `-` and a hash of the path, as Claude Code
    does, which also keeps the name within the file system's limit.
    """
    text = str(path)
    sanitized = "".join(
        char if char.isascii() and char.isalnum() else "-" * _utf16_units(char) for char in text
    )
    if len(sanitized) <= MAX_SANITIZED_LENGTH:
        return sanitized
    return f"{sanitized[:MAX_SANITIZED_LENGTH]}-{_path_hash(text)}"


def canonical_root(root: Path) -> Path:
    """The main checkout of the worktree whose top folder is `root` (`root` itself for a
    main checkout, a submodule, or anything that does not look like a linked worktree).

    As Claude Code decides it: `root/.git` is a file `gitdir: <dir>`, `<dir>` lies in
    `<common dir>/worktrees/`, and `<dir>/gitdir` points back at `root/.git`; then the
    canonical root is the folder holding the common `.git` (or the common dir itself, for
    a bare repository's worktrees).
    """
    try:
        line = (root / ".git").read_text(encoding="utf-8").strip()
        if not line.startswith("gitdir:"):
            return root
        git_dir = (root / line[len("gitdir:") :].strip()).resolve()
        common = (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
        if git_dir.parent != common / "worktrees":
            return root
        back = Path((git_dir / "gitdir").read_text(encoding="utf-8").strip()).resolve()
        if back != (root.resolve() / ".git"):
            return root
    except (OSError, UnicodeDecodeError, ValueError):
        return root
    return common.parent if common.name == ".git" else common


def project_dir(root: Path, home: Path, env: Mapping[str, str]) -> Path:
    """Claude Code's folder for the checkout at `root`: `<config root>/projects/<name>`."""
    return config_root(home, env) / "projects" / sanitize_path(canonical_root(root))


def private_memory_dir(root: Path, home: Path, env: Mapping[str, str]) -> Path:
    """Claude Code's own (private) memory folder for the checkout at `root`."""
    return project_dir(root, home, env) / "memory"


def team_dir(root: Path, home: Path, env: Mapping[str, str]) -> Path:
    """memsync's default team dir for the checkout at `root`: `memory/team/`, beside
    Claude Code's private memory."""
    return private_memory_dir(root, home, env) / "team"


def agent_memory_location(
    scope: AgentMemoryScope, agent: str, project: Path, home: Path, env: Mapping[str, str]
) -> tuple[Path, tuple[str, ...]]:
    """Where a subagent of type `agent` keeps its memory in `scope`, as (base, parts):
    the folder is `base/parts...`. `base` is the config root for `user`, else `project`
    (its top folder); `parts` are the folders below it, the agent type last, so a caller
    can refuse a symlink in any of them. `agent` must already be a safe segment."""
    base = config_root(home, env) if scope == "user" else project
    return base, (*AGENT_MEMORY_FOLDERS[scope], agent)
