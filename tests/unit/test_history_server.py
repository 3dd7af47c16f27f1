"""`sync_client.history` against servers standing in through an httpx `MockTransport`:
one too old for the repo log (no `log` in `supports`), and a repo never written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM
from sync_client import history
from sync_client.api import Api
from sync_client.errors import ServerTooOld
from sync_client.workspace import Workspace

URL = "http://memsync.test"
OLD_SUPPORTS = ["since", "base-precondition", "history", "events", "key"]


def workspace(tmp_path: Path, handler: httpx.MockTransport) -> Workspace:
    api = Api(URL, "token", "acme/app", transport=handler)
    return Workspace.open(tmp_path / "team", tmp_path / "state", api)


def test_a_server_without_log_is_too_old_in_one_line(tmp_path: Path) -> None:
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        body = {
            "organizationId": "memsync",
            "repo": "acme/app",
            "version": 3,
            "lastModified": "2026-12-01T10:00:00Z",
            "checksum": EMPTY_REPO_CHECKSUM,
            "entryChecksums": {},
            "supports": OLD_SUPPORTS,
        }
        return httpx.Response(200, json=body)

    place = workspace(tmp_path, httpx.MockTransport(answer))
    calls: list[Callable[[], object]] = [
        lambda: history.repo_log(place, count=5),
        lambda: history.deleted_notes(place),
        lambda: history.diff_versions(place, history.KeyRef("a.md", 1, 2)),
    ]
    for call in calls:
        with pytest.raises(ServerTooOld) as raised:
            call()
        assert raised.value.exit_code == 1
        assert str(raised.value).startswith(f"the server at {URL} is too old for `memsync ")
        assert str(raised.value).endswith("upgrade memsync-server")
    assert set(asked) == {"/v1/team_memory"}  # only the hashes view: no /log, /deleted
    assert place.state.supports == sorted(OLD_SUPPORTS)


def test_a_repo_never_written_has_an_empty_log(tmp_path: Path) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/team_memory"
        error = {"type": "not_found", "message": "no", "details": {"error_code": "no_team_memory"}}
        return httpx.Response(404, json={"error": error})

    place = workspace(tmp_path, httpx.MockTransport(answer))
    assert history.repo_log(place, count=5) == {
        "repo": "acme/app",
        "commits": [],
        "next_before": None,
    }
    assert history.deleted_notes(place) == {"repo": "acme/app", "deleted": []}
