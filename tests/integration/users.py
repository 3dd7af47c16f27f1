"""One developer driving the real `memsync` CLI: a home, a team dir, an environment.

Integration tests make users with `make_user` (the `alice` and `bob` fixtures in
`conftest.py` do) and run the CLI in a subprocess with that user's environment only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.liveserver import LiveServer, ServerProcess

REPO = "acme/app"


@dataclass
class User:
    """One developer: a home, a team dir, and the environment the CLI runs with."""

    name: str
    home: Path
    team: Path
    env: dict[str, str]
    # The `memsync` console script this user runs; None: this environment's.
    script: Path | None = None

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        script = self.script or Path(sys.executable).with_name("memsync")
        return subprocess.run(
            [str(script), *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def json(self, *args: str, expect: int = 0) -> Any:
        result = self.run(*args, "--json")
        assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
        return json.loads(result.stdout)

    def write(self, key: str, text: str) -> None:
        path = self.team / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def read(self, key: str) -> str:
        return (self.team / key).read_text(encoding="utf-8")


def make_user(name: str, root: Path, server: LiveServer | ServerProcess, token: str) -> User:
    home = root / name
    team = home / "team"
    team.mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".state"),
        "MEMSYNC_SERVER": server.base_url,
        "MEMSYNC_TOKEN": token,
        "MEMSYNC_REPO": REPO,
        "MEMSYNC_DIR": str(team),
    }
    return User(name=name, home=home, team=team, env=env)
