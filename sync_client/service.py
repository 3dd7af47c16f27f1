"""`memsync watch --install`: a user-level service that runs `memsync watch --all` at login.

    systemd_unit(command) -> str        a systemd user unit (Linux)
    launchd_plist(command, home) -> bytes   a launchd agent (macOS)
    install(env, kind) / uninstall(env, kind) -> ServiceFile

The files hold no token and no environment: the watcher reads the user's own config
and credentials files, as every `memsync` command does. Starting the service is left
to the service manager's own command, which `install` runs when it is available and
otherwise names.
"""

from __future__ import annotations

import plistlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sync_client.config import user_home
from sync_client.errors import ConfigError

__all__ = [
    "LAUNCHD_LABEL",
    "SYSTEMD_UNIT",
    "ServiceFile",
    "install",
    "launchd_plist",
    "service_kind",
    "systemd_unit",
    "uninstall",
    "watch_command",
]

SYSTEMD_UNIT = "memsync-watch.service"
LAUNCHD_LABEL = "dev.memsync.watch"
_SERVICE_TIMEOUT = 30.0


@dataclass(frozen=True)
class ServiceFile:
    """A service file written or removed, and the command that (un)loads it."""

    kind: str
    path: Path
    changed: bool
    # The service manager's commands that (would) start or stop it.
    steps: list[list[str]]
    activated: bool

    @property
    def command(self) -> str:
        """`steps` as one shell line."""
        return " && ".join(shlex.join(step) for step in self.steps)

    def as_json(self) -> dict[str, object]:
        """The `--json` shape of `memsync watch --install|--uninstall`."""
        return {
            "kind": self.kind,
            "path": str(self.path),
            "changed": self.changed,
            "command": self.command,
            "activated": self.activated,
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


def _run(command: list[str]) -> bool:
    """Run a service manager command when it exists; whether it succeeded."""
    if shutil.which(command[0]) is None:
        return False
    try:
        completed = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_SERVICE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return completed.returncode == 0


def install(env: Mapping[str, str], kind: str, *, activate: bool = True) -> ServiceFile:
    """Write the service file for `kind` and, with `activate`, enable and start it.

    `activated` says whether the service manager took it; when it did not (no user
    session, no such command), `command` in the result is what to run.
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
    activated = activate and all(_run(step) for step in steps)
    return ServiceFile(kind, path, changed, steps, activated)


def uninstall(env: Mapping[str, str], kind: str, *, activate: bool = True) -> ServiceFile:
    """Stop and disable the service (when the manager answers) and remove its file."""
    path = _service_path(kind, env)
    if kind == "systemd":
        steps = [["systemctl", "--user", "disable", "--now", SYSTEMD_UNIT]]
    else:
        steps = [["launchctl", "unload", "-w", str(path)]]
    existed = path.is_file()
    activated = activate and existed and all(_run(step) for step in steps)
    path.unlink(missing_ok=True)
    if kind == "systemd" and existed and activate:
        _run(["systemctl", "--user", "daemon-reload"])
    return ServiceFile(kind, path, existed, steps, activated)
