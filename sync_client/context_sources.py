"""What a remembered `memsync context` answer depends on (`context-cache.json`): the
stat of every file a resolve reads and the environment variables it reads.

Imported on the hook's fast path: only the standard library and the pure agent facts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sync_client import claude_code, qwen_code

__all__ = ["env_key", "sources", "stat_key"]


def stat_key(path: str) -> list[int] | None:
    """What tells a changed file: (inode, size, mtime); None for a missing one."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns]


def env_key(env: dict[str, str]) -> dict[str, str]:
    """What of the environment a resolve depends on, as the cache keeps it: no secret
    (the token only as set or not; git's variables, which may carry anything, as a
    checksum of them all)."""
    import zlib

    names = (
        "HOME",
        "PATH",
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "CLAUDE_CONFIG_DIR",
        *qwen_code.ENV_VARIABLES,
        "MEMSYNC_SERVER",
        "MEMSYNC_REPO",
        "MEMSYNC_DIR",
    )
    kept = {name: env[name] for name in names if name in env}
    kept["MEMSYNC_TOKEN"] = "set" if env.get("MEMSYNC_TOKEN") else ""
    git = sorted((name, value) for name, value in env.items() if name.startswith("GIT_"))
    kept["GIT_*"] = str(zlib.crc32(json.dumps(git).encode("utf-8", "surrogatepass")))
    return kept


def sources(cwd: Path, env: dict[str, str], extra: list[Path]) -> list[str]:
    """Every file a resolve for `cwd` reads or looks for: the user's memsync and git
    files, each folder's `.git` from `cwd` up, the checkout's git config, and `extra`
    (what would make a checkout without credentials show a block); Claude Code's and
    Qwen Code's settings (memsync's hook there chooses the default team dir); and the
    code that resolves (an upgrade of memsync may resolve differently)."""
    from sync_client import config
    from sync_client.config import config_home, git_config_path, user_home

    home = env.get("HOME", "")
    xdg = env.get("XDG_CONFIG_HOME", "")
    memsync = config_home(env)
    paths = [str(memsync / name) for name in ("config.toml", "credentials.toml", "repos.toml")]
    paths += [
        "/etc/gitconfig",
        os.path.join(xdg, "git", "config") if xdg else os.path.join(home, ".config/git/config"),
        os.path.join(home, ".gitconfig"),
    ]
    folder = Path(os.path.realpath(cwd))
    paths += [str(parent / ".git") for parent in (folder, *folder.parents)]
    git_config = git_config_path(cwd)
    if git_config is not None:
        paths.append(str(git_config))
    paths += [str(agent.settings_path(user_home(env), env)) for agent in (claude_code, qwen_code)]
    package = Path(config.__file__ or "").parent
    code = [*sorted(str(path) for path in package.glob("*.py")), __file__, qwen_code.__file__]
    code += [claude_code.__file__, str(Path(__file__).with_name("context.py"))]
    return paths + [str(path) for path in extra] + [str(path) for path in code if path]
