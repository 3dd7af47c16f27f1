"""Where the client keeps its files: the config folder, the state root, one state dir per
team dir, and the small flat TOML files kept in the config folder (XDG, docs/protocol.md 4.1).

Only the user's own folders are read here, never a file inside a repository or a team dir.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sync_client.errors import ConfigError

CONFIG_FILE = "config.toml"

CREDENTIALS_FILE = "credentials.toml"


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


def _state_dir(env: Mapping[str, str], server: str, repo: str, team_dir: Path) -> Path:
    """`state_home/<id>`, id = first 16 hex of SHA-256 over server, repo and team dir."""
    identity = f"{server}\n{repo}\n{team_dir}".encode()
    return state_home(env) / hashlib.sha256(identity).hexdigest()[:16]


def state_dir_for(env: Mapping[str, str], server: str, repo: str, team_dir: Path) -> Path:
    """The state dir of (server, repo, team dir): where `resolve` puts it too."""
    return _state_dir(env, server, repo, team_dir)
