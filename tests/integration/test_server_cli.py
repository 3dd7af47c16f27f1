"""`memsync-server` as an operator runs it: real processes, real database files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx

from memsync_protocol.checksums import repo_checksum
from sync_server.config import sqlite_url
from sync_server.storage.base import SCHEMA_HEAD
from tests.integration.conftest import API, REPO
from tests.integration.users import make_user
from tests.liveserver import ServerProcess, server_command
from tests.schema_revisions import move_schema
from tests.unit.test_deploy import compose_trusted_proxy


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*server_command(), *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def database_env(tmp_path: Path) -> dict[str, str]:
    return {"MEMSYNC_DATABASE_URL": sqlite_url(tmp_path / "data" / "memsync.sqlite3")}


def database_at_revision(tmp_path: Path, revision: str) -> dict[str, str]:
    """`database_env` of a database Alembic upgraded only as far as `revision`."""
    env = database_env(tmp_path)
    move_schema(env["MEMSYNC_DATABASE_URL"], revision)
    return env


class TestTokens:
    def test_create_prints_token_alone_on_last_line(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        created = run_cli("token", "create", "--repo", "acme/*", "--name", "ci", env=env)
        assert created.returncode == 0, created.stderr
        token = created.stdout.splitlines()[-1]
        assert token.startswith("mst_")
        assert len(token) == 46
        listed = run_cli("token", "list", env=env)
        assert listed.returncode == 0
        assert "ci" in listed.stdout
        assert "acme/*" in listed.stdout
        assert token[4:] not in listed.stdout
        database = (tmp_path / "data" / "memsync.sqlite3").read_bytes()
        assert token.encode() not in database

    def test_revoke_by_name(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        run_cli("token", "create", "--repo", "*", "--name", "gone", env=env)
        revoked = run_cli("token", "revoke", "gone", env=env)
        assert revoked.returncode == 0
        assert "revoked 1" in revoked.stdout
        again = run_cli("token", "revoke", "gone", env=env)
        assert again.returncode == 1
        assert again.stderr.strip().count("\n") == 0
        assert "Traceback" not in again.stderr

    def test_bad_pattern_is_usage_error_and_creates_nothing(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        result = run_cli("token", "create", "--repo", "no slash", env=env)
        assert result.returncode == 2
        assert result.stderr.startswith("memsync-server: ")
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "data").exists()

    def test_bad_setting_is_one_line_exit_2(self, tmp_path: Path) -> None:
        result = run_cli("migrate", env={"MEMSYNC_MAX_ENTRIES": "lots"})
        assert result.returncode == 2
        assert "MEMSYNC_MAX_ENTRIES" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1

    def test_unsupported_database_is_refused(self, tmp_path: Path) -> None:
        result = run_cli("migrate", env={"MEMSYNC_DATABASE_URL": "mysql://x/y"})
        assert result.returncode == 2
        assert "MEMSYNC_DATABASE_URL" in result.stderr


def test_migrate_is_idempotent(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    assert run_cli("migrate", env=env).returncode == 0
    assert run_cli("migrate", env=env).returncode == 0


def test_prune_needs_a_horizon(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    assert run_cli("prune", env=env).returncode == 2
    pruned = run_cli("prune", "--days", "30", env=env)
    assert pruned.returncode == 0
    assert "removed 0" in pruned.stdout


def test_serve_works_and_logs_neither_texts_nor_tokens(tmp_path: Path) -> None:
    # Trusting forwarded headers as docker-compose.yml does: from its proxy's address
    # alone, so a caller here cannot name another client (the log, the failed-auth limit).
    env = {
        **database_env(tmp_path),
        "MEMSYNC_ORGANIZATION_ID": "acme-org",
        "FORWARDED_ALLOW_IPS": compose_trusted_proxy(),
    }
    token = run_cli("token", "create", "--repo", "*", env=env).stdout.splitlines()[-1]
    marker = "PRIVATE-NOTE-CONTENT-7f3a"
    with ServerProcess(env, log_path=tmp_path / "server.log") as server:
        headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": "203.0.113.9"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            put = client.put(API, params={"repo": REPO}, json={"entries": {"n.md": marker}})
            assert put.status_code == 200
            body = client.get(API, params={"repo": REPO}).json()
            assert body["organizationId"] == "acme-org"
            assert body["content"]["entries"]["n.md"] == marker
            bad = client.put(API, params={"repo": REPO}, json={"entries": {"../x": marker}})
            assert bad.status_code == 400
    log = (tmp_path / "server.log").read_text()
    assert "PUT /v1/team_memory 200 " in log
    assert "client=127.0.0.1 " in log
    assert "203.0.113.9" not in log
    assert marker not in log
    assert token not in log
    assert token[4:16] not in log


def test_the_upgrade_to_checksum_definition_2_keeps_every_teammate_in_sync(
    tmp_path: Path,
) -> None:
    """A team on the release before migration 0005 (definition-1 checksums in the
    database and in every client's state) upgrades the server: nobody re-downloads,
    nothing conflicts, and edits flow both ways at once."""
    env = database_env(tmp_path)
    assert run_cli("migrate", env=env).returncode == 0
    token = run_cli("token", "create", "--repo", "*", "--name", "team", env=env).stdout
    token = token.splitlines()[-1]
    with ServerProcess(env, log_path=tmp_path / "before.log") as server:
        port = server.port
        alice = make_user("alice", tmp_path, server, token)
        bob = make_user("bob", tmp_path, server, token)
        alice.write("a.md", "alpha\n")
        alice.write("notes/b.md", "beta\n")
        alice.json("push")
        assert bob.json("pull")["written"] == ["a.md", "notes/b.md"]
    # What the previous release left: its schema, its checksums, and the ETag it gave.
    move_schema(env["MEMSYNC_DATABASE_URL"], "0004", down=True)
    states = [path for user in (alice, bob) for path in user.home.rglob("state.json")]
    assert len(states) == 2
    for path in states:
        state = json.loads(path.read_text())
        state["etag"] = repo_checksum(state["bases"], 1)
        path.write_text(json.dumps(state))

    upgraded = run_cli("migrate", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert upgraded.stdout.startswith(f"upgraded the schema from revision 0004 to {SCHEMA_HEAD}")
    with ServerProcess(env, log_path=tmp_path / "after.log", port=port) as server:
        head = httpx.get(
            f"{server.base_url}{API}",
            params={"repo": REPO, "view": "hashes"},
            headers={"Authorization": f"Bearer {token}"},
        ).json()
        assert head["checksumVersion"] == 2
        assert head["checksum"] == repo_checksum(head["entryChecksums"], 2)
        pulled = bob.json("pull")
        assert (pulled["written"], pulled["conflicts"]) == ([], [])
        bob.write("notes/b.md", "beta, by bob\n")
        assert bob.json("push")["uploaded"] == ["notes/b.md"]
        alice.write("a.md", "alpha, by alice\n")
        assert alice.json("push")["uploaded"] == ["a.md"]
        assert alice.json("pull")["written"] == ["notes/b.md"]
        assert bob.json("pull")["written"] == ["a.md"]
        for user in (alice, bob):
            assert user.read("a.md") == "alpha, by alice\n"
            assert user.read("notes/b.md") == "beta, by bob\n"
            assert user.run("status").returncode == 0


def test_review_switch_and_reviewer_tokens(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    refused = run_cli("token", "create", "--repo", "*", "--reviewer", "--read-only", env=env)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "--reviewer cannot go with --read-only" in refused.stderr
    created = run_cli(
        "token", "create", "--repo", "acme/*", "--name", "carol", "--reviewer", "--json", env=env
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["tokens"][0]["reviewer"] is True
    wide = {**env, "COLUMNS": "200"}
    assert "read-write, reviewer" in run_cli("token", "list", env=wide).stdout

    assert run_cli("repo", "set", "no slash", "--review", "on", env=env).returncode == 2
    switched = run_cli("repo", "set", "ACME/*", "--review", "on", env=env)
    assert switched.returncode == 0, switched.stderr
    assert switched.stdout == "review on for repos matching acme/*\n"

    from sync_server.storage.sql import SqlStore

    store = SqlStore(env["MEMSYNC_DATABASE_URL"])
    try:
        store.set_review("acme/open", False)
        for name in ("acme/app", "acme/open"):
            store.put(
                name, {"a.md": "a"}, if_match=None, base_checksums=None, max_entries=9, author="c"
            )
        store.propose(
            "acme/app",
            {"a.md": "b"},
            if_match=None,
            base_checksums=None,
            max_entries=9,
            author="alice",
            max_pending=9,
        )
    finally:
        store.close()
    repos = json.loads(run_cli("repo", "list", "--json", env=env).stdout)["repos"]
    assert [(r["repo"], r["review"], r["pending"]) for r in repos] == [
        ("acme/app", True, 1),
        ("acme/open", False, 0),
    ]
    assert "│ on     │ 1 " in run_cli("repo", "list", env=wide).stdout
