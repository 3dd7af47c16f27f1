"""The client library against servers that misbehave, and against an anchor-only server.

A hostile server is played by an httpx `MockTransport` (it stands for an attacker, not
for any part of memsync); the anchor-only server is our real server with the client
told that it offers no per-key bases, so pushes fall back to `If-Match`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from memsync_protocol.checksums import entry_checksum, repo_checksum
from sync_client.api import Api
from sync_client.errors import AuthError, NetworkError, NotAMemsyncServer, ServerError
from sync_client.pull import pull
from sync_client.push import push
from sync_client.retries import with_retries
from sync_client.workspace import Workspace
from sync_server.config import Settings
from tests.liveserver import LiveServer, run_live_server

REPO = "acme/app"

HOSTILE_KEYS = [
    "../escape.md",
    "a/../../escape.md",
    "%2e%2e/escape.md",
    "%252e%252e/escape.md",
    "/tmp/abs.md",
    "C:escape.md",
    "a\\..\\escape.md",
    "．．／escape.md",
    "e\u0301.md",
    "nul\x00.md",
    "link/escape.md",
]


def hostile_server(entries: dict[str, str], checksums: dict[str, str]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = {
            "organizationId": "evil",
            "repo": REPO,
            "version": 7,
            "lastModified": "2026-11-30T00:00:00Z",
            "checksum": repo_checksum(checksums),
            "content": {"entries": entries, "entryChecksums": checksums},
        }
        # ASCII-escaped JSON can carry a lone surrogate (`\\ud800`), as a hostile server may.
        encoded = json.dumps(body).encode("ascii")
        return httpx.Response(200, content=encoded, headers={"Content-Type": "application/json"})

    return httpx.MockTransport(handler)


def files_under(root: Path) -> set[str]:
    return {
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() or path.is_symlink()
    }


def test_a_hostile_server_can_make_the_client_skip_never_escape(tmp_path: Path) -> None:
    team = tmp_path / "home" / "team"
    team.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (team / "link").symlink_to(outside)
    entries = {key: "pwned\n" for key in HOSTILE_KEYS}
    entries["notes/ok.md"] = "fine\n"
    checksums = {key: entry_checksum(text) for key, text in entries.items()}
    entries["notes/lying.md"] = "the checksum says otherwise\n"
    checksums["notes/lying.md"] = entry_checksum("something else")
    entries["notes/surrogate.md"] = "half a character \ud800"
    checksums["notes/surrogate.md"] = entry_checksum("anything")
    before = files_under(tmp_path)
    transport = hostile_server(entries, checksums)
    with Api("http://evil.invalid", "t", REPO, transport=transport) as api:
        result = pull(Workspace.open(team, tmp_path / "state", api))
    assert result.written == ["notes/ok.md"]
    refused = {row["key"] for row in result.refused}
    assert refused == {*HOSTILE_KEYS, "notes/lying.md", "notes/surrogate.md"}
    assert (team / "notes" / "ok.md").read_text() == "fine\n"
    assert list(outside.iterdir()) == []
    created = files_under(tmp_path) - before
    assert all(
        path.startswith(os.path.join("home", "team")) or path.startswith("state")
        for path in created
    ), created
    assert not any("escape" in path for path in created)


_OPEN_APIS: list[Api] = []


@pytest.fixture
def live(sqlite_database_url: str) -> Iterator[LiveServer]:
    with run_live_server(Settings(database_url=sqlite_database_url)) as server:
        yield server
        while _OPEN_APIS:
            _OPEN_APIS.pop().close()


def workspace_for(live: LiveServer, root: Path, name: str, *, anchor_only: bool) -> Workspace:
    team = root / name / "team"
    team.mkdir(parents=True)
    api = Api(live.base_url, live.token(name=name), REPO)
    _OPEN_APIS.append(api)
    workspace = Workspace.open(team, root / name / "state", api)
    if anchor_only:
        workspace.state.supports = ["since"]
    return workspace


def test_anchor_only_push_never_overwrites_a_teammates_edit(
    live: LiveServer, tmp_path: Path
) -> None:
    alice = workspace_for(live, tmp_path, "alice", anchor_only=True)
    bob = workspace_for(live, tmp_path, "bob", anchor_only=True)
    (alice.team_dir / "shared.md").write_text("v1\n")
    assert push(alice).uploaded == ["shared.md"]
    pull(bob)
    (bob.team_dir / "shared.md").write_text("bob\n")
    assert push(bob).uploaded == ["shared.md"]
    (alice.team_dir / "shared.md").write_text("alice\n")
    (alice.team_dir / "mine.md").write_text("only alice\n")
    result = push(alice)
    assert result.conflicts == ["shared.md"]
    assert result.uploaded == ["mine.md"]
    snapshot = live.store.snapshot(REPO, with_texts=True)
    assert snapshot is not None
    assert snapshot.texts == {"shared.md": "bob\n", "mine.md": "only alice\n"}


def test_state_loss_costs_a_comparison_not_data(live: LiveServer, tmp_path: Path) -> None:
    alice = workspace_for(live, tmp_path, "alice", anchor_only=False)
    for index in range(20):
        (alice.team_dir / f"n{index}.md").write_text(f"note {index}\n")
    push(alice)
    (alice.state_dir / "state.json").unlink()
    fresh = Workspace.open(alice.team_dir, alice.state_dir, alice.api)
    pulled = pull(fresh)
    assert pulled.written == []
    assert pulled.conflicts == []
    assert push(fresh).uploaded == []


def scripted(responses: list[httpx.Response]) -> httpx.MockTransport:
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        return queue.pop(0)

    return httpx.MockTransport(handler)


def recorded_sleeps() -> tuple[list[float], Callable[[float], None]]:
    sleeps: list[float] = []
    return sleeps, sleeps.append


def test_transient_failures_are_retried_honouring_retry_after() -> None:
    ok = {
        "organizationId": "o",
        "repo": REPO,
        "version": 1,
        "lastModified": "2026-11-30T00:00:00Z",
        "checksum": repo_checksum({}),
        "entryChecksums": {},
        "supports": [],
    }
    transport = scripted(
        [
            httpx.Response(503, headers={"Retry-After": "3"}, json={"error": {}}),
            httpx.Response(429, headers={"Retry-After": "1"}, json={"error": {}}),
            httpx.Response(200, json=ok),
        ]
    )
    sleeps, sleep = recorded_sleeps()
    with Api("http://server.invalid", "t", REPO, transport=transport) as api:
        remote = with_retries(api.hashes, sleep=sleep)
    assert remote.version == 1
    assert len(sleeps) == 2
    assert sleeps[0] >= 3
    assert sleeps[1] >= 1


def test_retries_give_up_with_the_transient_error() -> None:
    transport = scripted([httpx.Response(502, json={"error": {}}) for _ in range(4)])
    sleeps, sleep = recorded_sleeps()
    with (
        Api("http://server.invalid", "t", REPO, transport=transport) as api,
        pytest.raises(ServerError),
    ):
        with_retries(api.hashes, sleep=sleep, attempts=4)
    assert len(sleeps) == 3
    assert sleeps == sorted(sleeps) or max(sleeps) <= 30


def test_permanent_failures_are_not_retried() -> None:
    transport = scripted([httpx.Response(401, json={"error": {"message": "no"}})])
    sleeps, sleep = recorded_sleeps()
    with (
        Api("http://server.invalid", "t", REPO, transport=transport) as api,
        pytest.raises(AuthError),
    ):
        with_retries(api.hashes, sleep=sleep)
    assert sleeps == []


def test_network_errors_are_typed() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with (
        Api("http://server.invalid", "t", REPO, transport=httpx.MockTransport(refuse)) as api,
        pytest.raises(NetworkError),
    ):
        api.hashes()


def test_one_put_body_is_at_most_200000_bytes(live: LiveServer, tmp_path: Path) -> None:
    alice = workspace_for(live, tmp_path, "alice", anchor_only=False)
    for index in range(120):
        (alice.team_dir / f"n{index:03}.md").write_text(f"{index} " + "x" * 4000 + "\n")
    sizes: list[int] = []
    # A push sends each batch with `put_reviewed` (a `put` that also reads a 202).
    original = alice.api.put_reviewed

    def measured(body: bytes, *, if_match: str | None = None) -> object:
        sizes.append(len(body))
        json.loads(body)
        return original(body, if_match=if_match)

    alice.api.put_reviewed = measured  # type: ignore[method-assign,assignment]
    result = push(alice)
    assert len(result.uploaded) == 120
    assert result.batches == len(sizes) >= 3
    assert max(sizes) <= 200_000


def test_a_file_edited_after_the_scan_is_scanned_again_before_upload(
    live: LiveServer, tmp_path: Path
) -> None:
    from sync_client.local import LocalScan
    from sync_server.auth import mint_token

    alice = workspace_for(live, tmp_path, "alice", anchor_only=False)
    note = alice.team_dir / "note.md"
    note.write_text("clean\n")
    stale = LocalScan(checksums={"note.md": entry_checksum("clean\n")}, skipped=[], cache={})
    # The agent rewrites the file between the scan and the upload.
    note.write_text(f"now with {mint_token().secret}\n")
    alice.scan = lambda: stale  # type: ignore[method-assign]
    result = push(alice)
    assert result.uploaded == []
    assert [(row["key"], row["reason"]) for row in result.skipped] == [("note.md", "secret")]
    assert live.store.head(REPO) is None


def test_a_large_pull_writes_every_file_exactly(live: LiveServer, tmp_path: Path) -> None:
    alice = workspace_for(live, tmp_path, "alice", anchor_only=False)
    bob = workspace_for(live, tmp_path, "bob", anchor_only=False)
    notes = {
        f"topic-{index % 4}/note-{index:03}.md": f"# {index}\n\nbody ✓\n" for index in range(60)
    }
    for key, text in notes.items():
        (alice.team_dir / key).parent.mkdir(parents=True, exist_ok=True)
        (alice.team_dir / key).write_text(text)
    assert len(push(alice).uploaded) == 60
    result = pull(bob)
    assert sorted(result.written) == sorted(notes)
    for key, text in notes.items():
        assert (bob.team_dir / key).read_text() == text
    assert not list(bob.team_dir.rglob(".memsync-*"))
    assert push(bob).uploaded == []


def answering(body: dict[str, object]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("definition", "checksum_of", "accepted"),
    [
        (2, "the entries", True),
        (1, "the entries", True),
        (None, "other entries", True),  # names no definition: another implementation
        (99, "other entries", True),  # a definition this client does not know
        (2, "other entries", False),
        (1, "other entries", False),
    ],
)
def test_a_repo_checksum_that_names_its_definition_is_checked_against_the_entries(
    tmp_path: Path, definition: int | None, checksum_of: str, accepted: bool
) -> None:
    entries = {"a.md": "alpha\n", "b.md": "beta\n"}
    checksums = {key: entry_checksum(text) for key, text in entries.items()}
    counted = checksums if checksum_of == "the entries" else {"a.md": checksums["a.md"]}
    body: dict[str, object] = {
        "organizationId": "o",
        "repo": REPO,
        "version": 3,
        "lastModified": "2026-11-30T00:00:00Z",
        "checksum": repo_checksum(
            counted, 2 if definition is None or definition > 2 else definition
        ),
        "content": {"entries": entries, "entryChecksums": checksums},
    }
    if definition is not None:
        body["checksumVersion"] = definition
    team = tmp_path / "team"
    team.mkdir()
    with Api("http://server.invalid", "t", REPO, transport=answering(body)) as api:
        workspace = Workspace.open(team, tmp_path / "state", api)
        if accepted:
            assert pull(workspace).written == ["a.md", "b.md"]
            return
        with pytest.raises(ServerError, match="not the checksum of the entries it listed"):
            pull(workspace)
    assert list(team.iterdir()) == []


def test_a_checksum_definition_that_is_not_a_number_is_not_a_memsync_answer(
    tmp_path: Path,
) -> None:
    body = {
        "organizationId": "o",
        "repo": REPO,
        "version": 1,
        "lastModified": "2026-11-30T00:00:00Z",
        "checksum": repo_checksum({}),
        "checksumVersion": "2",
        "entryChecksums": {},
        "supports": [],
    }
    with (
        Api("http://server.invalid", "t", REPO, transport=answering(body)) as api,
        pytest.raises(NotAMemsyncServer, match="no integer checksumVersion"),
    ):
        api.hashes()
