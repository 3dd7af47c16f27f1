"""`memsync watch --install`: a user-level service that runs `memsync watch --all` at login.

    systemd_unit(command) -> str        a systemd user unit (Linux)
    launchd_plist(command, home) -> bytes   a launchd agent (macOS)
    install(env, kind) / uninstall(env, kind) -> ServiceFile
    token_warning(env, enrolled, token=...) -> str | None

The files hold no token and no environment: the watcher reads the user's own config
and credentials files, as every `memsync` command does. Starting the service is left
to the service manager's own command, which `install` runs when it is available and
otherwise names; when it fails, `activation_error` says which command and why, and
`instead` what the person can do.

A service does not inherit the shell's environment, so a token that only
`MEMSYNC_TOKEN` (or `--token`) holds never reaches it: `token_warning` says so. The
server needs no such check: `memsync enable` saves each repo's server in `repos.toml`,
which is where `watch --all` takes it from, whatever `MEMSYNC_SERVER` says.
"""

from __future__ import annotations

import plistlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sync_client.config import (
    CREDENTIALS_FILE,
    Enrollment,
    config_home,
    enrolled_config,
    read_credentials,
    user_home,
)
from sync_client.errors import ConfigError, NoCredentials

__all__ = [
    "LAUNCHD_LABEL",
    "SYSTEMD_UNIT",
    "ServiceFile",
    "install",
    "launchd_plist",
    "service_kind",
    "systemd_unit",
    "token_warning",
    "uninstall",
    "watch_command",
]

SYSTEMD_UNIT = "memsync-watch.service"
LAUNCHD_LABEL = "dev.memsync.watch"
_SERVICE_TIMEOUT = 30.0
# A service manager's complaint is quoted up to this many characters.
_REASON_CHARS = 200


@dataclass(frozen=True)
class ServiceFile:
    """A service file written or removed, and the command that (un)loads it."""

    kind: str
    path: Path
    changed: bool
    # The service manager's commands that (would) start or stop it.
    steps: list[list[str]]
    activated: bool
    # Why the service manager did not take it, when it was asked to: the command and the
    # first line it wrote on stderr, or `systemctl not found`. None when it was not asked
    # (`--no-start`) or when it succeeded.
    activation_error: str | None = None

    @property
    def command(self) -> str:
        """`steps` as one shell line."""
        return " && ".join(shlex.join(step) for step in self.steps)

    def instead(self) -> list[str]:
        """What to do when the service could not be started: lines for a person."""
        by_hand = "or run `memsync watch --all` yourself, in a terminal or tmux"
        if self.activation_error is None:
            return []
        if self.activation_error == f"{self.steps[0][0]} not found":
            return [
                f"without {self.steps[0][0]} there is no user service to start: run"
                " `memsync watch --all` in a terminal or tmux, or under this machine's"
                " own service manager"
            ]
        if self.kind == "systemd":
            return [
                "once you have a user session bus (log in as yourself; on a machine nobody"
                " logs in to, `loginctl enable-linger $USER` first), run:"
                f" `{self.command}`",
                by_hand,
            ]
        return [f"to start it from your login session: `{self.command}`", by_hand]

    def as_json(self) -> dict[str, object]:
        """The `--json` shape of `memsync watch --install|--uninstall`."""
        return {
            "kind": self.kind,
            "path": str(self.path),
            "changed": self.changed,
            "command": self.command,
            "activated": self.activated,
            "activation_error": self.activation_error,
        }


def service_kind(platform: str = sys.platform) -> str:
    """`systemd` on Linux, `launchd` on macOS; `ConfigError` elsewhere."""
    if platform.startswith("linux"):
        return "systemd"
    if platform == "darwin":
        return "launchd"
    raise ConfigError(f"no user service for {platform}: run `memsync watch --all` yourself")


def watch_command() -> list[str]:
    """The absolute command that runs the watcher from this installation."""
    script = Path(sys.executable).with_name("memsync")
    if script.exists():
        return [str(script.absolute()), "watch", "--all"]
    return [str(Path(sys.executable).absolute()), "-m", "sync_client", "watch", "--all"]


def _systemd_quote(argument: str) -> str:
    """One ExecStart argument, quoted as systemd reads it (and `%` escaped)."""
    escaped = argument.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if escaped and not any(char.isspace() or char in "'\";" for char in argument):
        return escaped
    return f'"{escaped}"'


def systemd_unit(command: list[str]) -> str:
    """A systemd user unit running `command` from login to logout.

    SIGTERM (systemd's stop) flushes a pending push and exits 0 within 2 s, so a stop
    timeout of 10 s is never reached in practice. Restarted 10 s after a crash, not after
    a clean exit; one start per 10 s stays far below systemd's start limit (5 in 10 s),
    so it is never given up on. No network ordering: a user manager cannot order on
    the system's `network-online.target`, and the watcher waits for the network itself
    (retrying with backoff).
    """
    exec_start = " ".join(_systemd_quote(argument) for argument in command)
    return (
        "[Unit]\n"
        "Description=memsync: keep the enrolled team memory folders in sync\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={exec_start}\n"
        "Restart=on-failure\n"
        "RestartSec=10\n"
        "TimeoutStopSec=10\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(command: list[str], home: Path) -> bytes:
    """A launchd agent running `command` at login, restarted if it exits with a failure;
    its stderr (the watcher's log) goes to `~/Library/Logs/memsync-watch.log`."""
    agent = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": command,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "StandardErrorPath": str(home / "Library" / "Logs" / "memsync-watch.log"),
    }
    return plistlib.dumps(agent, sort_keys=True)


def _service_path(kind: str, env: Mapping[str, str]) -> Path:
    home = user_home(env)
    if kind == "systemd":
        base = env.get("XDG_CONFIG_HOME", "")
        config = Path(base) if base.startswith("/") else home / ".config"
        return config / "systemd" / "user" / SYSTEMD_UNIT
    return home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"


def _first_line(output: bytes) -> str:
    """The first non-blank line of a command's output, cut to `_REASON_CHARS`."""
    for line in output.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 3] + "..."
    return ""


def _run(command: list[str]) -> str | None:
    """Run a service manager command; None when it succeeded, else why it did not:
    `systemctl not found`, or the command and the first line of its stderr."""
    if shutil.which(command[0]) is None:
        return f"{command[0]} not found"
    shown = shlex.join(command)
    try:
        completed = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_SERVICE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{shown}` did not answer within {_SERVICE_TIMEOUT:.0f} s"
    except OSError as error:
        return f"`{shown}` could not run: {(error.strerror or str(error)).lower()}"
    if completed.returncode == 0:
        return None
    said = _first_line(completed.stderr) or _first_line(completed.stdout)
    return f"`{shown}` failed: {said}" if said else f"`{shown}` exited {completed.returncode}"


def _run_all(steps: list[list[str]]) -> str | None:
    """Run `steps` in order until one fails; None when all succeeded, else its reason."""
    for step in steps:
        reason = _run(step)
        if reason is not None:
            return reason
    return None


def install(env: Mapping[str, str], kind: str, *, activate: bool = True) -> ServiceFile:
    """Write the service file for `kind` and, with `activate`, enable and start it.

    `activated` says whether the service manager took it; when it did not (no user
    session, no such command), `activation_error` says why and `command` in the result
    is what to run.
    """
    path = _service_path(kind, env)
    command = watch_command()
    data = (
        systemd_unit(command).encode()
        if kind == "systemd"
        else launchd_plist(command, user_home(env))
    )
    changed = not path.is_file() or path.read_bytes() != data
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    if kind == "systemd":
        steps = [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", SYSTEMD_UNIT],
        ]
    else:
        steps = [["launchctl", "load", "-w", str(path)]]
    error = _run_all(steps) if activate else None
    return ServiceFile(kind, path, changed, steps, activate and error is None, error)


def uninstall(env: Mapping[str, str], kind: str, *, activate: bool = True) -> ServiceFile:
    """Stop and disable the service (when the manager answers) and remove its file."""
    path = _service_path(kind, env)
    if kind == "systemd":
        steps = [["systemctl", "--user", "disable", "--now", SYSTEMD_UNIT]]
    else:
        steps = [["launchctl", "unload", "-w", str(path)]]
    existed = path.is_file()
    error = _run_all(steps) if activate and existed else None
    path.unlink(missing_ok=True)
    if kind == "systemd" and existed and activate:
        _run(["systemctl", "--user", "daemon-reload"])
    return ServiceFile(kind, path, existed, steps, activate and existed and error is None, error)


def _service_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as a service sees it: none of the shell's `MEMSYNC_*` variables (the unit
    and the agent set none)."""
    return {name: value for name, value in env.items() if not name.startswith("MEMSYNC_")}


def _servers_without_a_saved_token(
    env: Mapping[str, str], enrolled: Sequence[Enrollment]
) -> list[str] | None:
    """The servers of `enrolled` for which the service would find no token (the
    credentials file holds none, or one for another server), in order; with nothing
    enrolled, [] when the credentials file holds no token at all. None when the service
    finds one for each."""
    service_env = _service_env(env)
    if not enrolled:
        try:
            saved = read_credentials(config_home(service_env)).get("token")
        except ConfigError:
            return None  # a damaged file is the watcher's to report
        return None if saved else []
    missing: list[str] = []
    for item in enrolled:
        try:
            enrolled_config(item, token=None, env=service_env)
        except NoCredentials:
            if item.server not in missing:
                missing.append(item.server)
        except ConfigError:
            continue  # another problem of that repo: the watcher reports it
    return missing or None


def token_warning(
    env: Mapping[str, str], enrolled: Sequence[Enrollment], *, token: str | None
) -> str | None:
    """One line for a person when this shell's token would not reach a service.

    A service does not inherit the shell's environment: when the token comes only from
    `token` (the `--token` flag) or `MEMSYNC_TOKEN`, and the credentials file holds
    none for the servers of `enrolled`, the watcher service pauses with "no token". The
    line names where the token came from, never the token. None when the credentials
    file serves, or when this shell has no token either (`memsync enable` already
    says that one).
    """
    missing = _servers_without_a_saved_token(env, enrolled)
    if missing is None:
        return None
    if token:
        source = "--token"
    elif env.get("MEMSYNC_TOKEN"):
        source = "MEMSYNC_TOKEN"
    else:
        return None
    servers = f" ({', '.join(missing)})" if missing else ""
    return (
        f"the token comes only from {source}, which a service does not see: the watcher"
        f" service will pause with 'no token'{servers}; run `memsync login` to save it"
        f" in {CREDENTIALS_FILE}"
    )
