"""The credentials file, `credentials.toml` in the config folder: the saved server and token.

Written with mode 0600 in folders made 0700; messages name the file, never the token.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from sync_client.config.paths import (
    CREDENTIALS_FILE,
    _make_private_dirs,
    _read_toml_strings,
    _toml_string,
)
from sync_client.errors import ConfigError
from sync_client.state import atomic_write

_CREDENTIALS_KEYS = ("server", "token")


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
