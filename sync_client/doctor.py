"""`memsync doctor`: one line per check, each with a fix when it fails."""

from __future__ import annotations

import os
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

CLOCK_SKEW_SECONDS = 300
_WRONG_SERVER_FIX = (
    "point MEMSYNC_SERVER (or `memsync login --server`) at the base URL the server's"
    " operator gave, e.g. https://memsync.example.com, without /v1/..."
)


def _row(check: str, ok: bool, detail: str, fix: str = "") -> dict[str, Any]:
    return {"check": check, "ok": ok, "detail": detail, "fix": fix}


def run_checks(
    options: Mapping[str, Any], *, cwd: Path, env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Config, repo, team dir, server reachability, auth and clock."""
    from datetime import UTC, datetime

    from sync_client.api import Api
    from sync_client.config import resolve_options
    from sync_client.errors import (
        AuthError,
        MemsyncError,
        NetworkError,
        NoCredentials,
        NoRepoIdentity,
        NotAMemsyncServer,
    )

    rows: list[dict[str, Any]] = []
    try:
        config = resolve_options(options, cwd=cwd, env=env)
    except NoCredentials as error:
        return [
            _row(
                "config",
                False,
                str(error),
                "run `memsync login` or set MEMSYNC_SERVER and MEMSYNC_TOKEN",
            )
        ]
    except NoRepoIdentity as error:
        return [
            _row(
                "repo", False, str(error), "set MEMSYNC_REPO=owner/name or add a git remote origin"
            )
        ]
    except MemsyncError as error:
        return [_row("config", False, str(error), "fix the setting it names")]
    rows.append(_row("config", True, f"server {config.server}"))
    rows.append(_row("repo", True, config.repo))
    team_dir = config.team_dir
    if team_dir.is_dir():
        writable = os.access(team_dir, os.W_OK)
        rows.append(
            _row(
                "team dir", writable, str(team_dir), "" if writable else f"make {team_dir} writable"
            )
        )
    else:
        rows.append(_row("team dir", True, f"{team_dir} (created by the first pull)"))
    with Api(config.server, config.token, config.repo, timeout=10) as api:
        # The server check must tell a memsync server from any other HTTP server: the
        # liveness object first, then the API's own answer. Auth is only judged after
        # the server passed, so a wrong URL never shows "ok auth".
        try:
            health = api.health()
            remote = api.hashes()
        except NotAMemsyncServer as error:
            rows.append(_row("server", False, str(error), _WRONG_SERVER_FIX))
            return rows
        except NetworkError as error:
            rows.append(_row("server", False, str(error), "start the server or fix MEMSYNC_SERVER"))
            return rows
        except AuthError as error:
            rows.append(_row("server", True, f"memsync server at {config.server}"))
            rows.append(
                _row("auth", False, str(error), "get a token for this repo and run `memsync login`")
            )
            remote = None
        except MemsyncError as error:
            rows.append(_row("server", False, str(error), "see the server's log"))
            return rows
        if remote is not None:
            rows.append(_row("server", True, f"memsync server at {config.server}"))
            rows.append(
                _row(
                    "auth",
                    True,
                    f"token accepted; {len(remote.entry_checksums)} entries on the server",
                )
            )
        if health.date:
            skew = abs((datetime.now(UTC) - parsedate_to_datetime(health.date)).total_seconds())
            rows.append(
                _row(
                    "clock",
                    skew < CLOCK_SKEW_SECONDS,
                    f"{skew:.0f} s from the server's clock",
                    "sync this machine's clock (NTP)",
                )
            )
    return rows
