"""The operator's upkeep commands, run for real: vacuum, backup (and its restore), tokens."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import select

from memsync_protocol.checksums import entry_checksum, repo_checksum
from sync_server.config import Settings, sqlite_url
from sync_server.storage import schema
from sync_server.storage.maintenance import disk_bytes
from sync_server.storage.sql import SqlStore
from tests.integration.conftest import API
from tests.integration.test_operator import one_line, repos_json, tokens_json
from tests.integration.test_server_cli import database_at_revision, database_env, run_cli
from tests.liveserver import LiveServer, run_live_server


def database_file(env: dict[str, str]) -> Path:
    return Path(env["MEMSYNC_DATABASE_URL"].removeprefix("sqlite:///"))


def history_rows(store: SqlStore, repo: str, up_to: int) -> list[tuple[Any, ...]]:
    history, repos = schema.history, schema.repos
    query = (
        select(
            history.c.key,
            history.c.version,
            history.c.op,
            history.c.checksum,
            history.c.text,
            history.c.author,
            history.c.at,
        )
        .join(repos, repos.c.id == history.c.repo_id)
        .where(repos.c.name == repo, history.c.version <= up_to)
        .order_by(history.c.id)
    )
    with store.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(query)]


def test_vacuum_gives_back_the_space_of_a_deleted_repo(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    store = SqlStore(env["MEMSYNC_DATABASE_URL"])
    store.migrate()
    for batch in range(8):
        entries = {f"n{batch}-{i}.md": f"{batch}-{i} " + "x" * 4000 for i in range(100)}
        store.put(
            "acme/big",
            entries,
            if_match=None,
            base_checksums=None,
            max_entries=10_000,
            author="test",
        )
    store.put(
        "acme/keep",
        {"k.md": "kept"},
        if_match=None,
        base_checksums=None,
        max_entries=10,
        author="test",
    )
    store.close()
    deleted = run_cli("repo", "delete", "acme/big", "--yes", env=env)
    assert deleted.returncode == 0, deleted.stderr
    path = database_file(env)
    before = disk_bytes(path)
    assert before > 6_000_000  # deleting gave nothing back
    vacuumed = run_cli("vacuum", env=env)
    assert vacuumed.returncode == 0, vacuumed.stderr
    after = disk_bytes(path)
    assert after < 500_000
    assert f"{before:,} bytes before, {after:,} after" in vacuumed.stdout
    assert [repo["repo"] for repo in repos_json(env)] == ["acme/keep"]


def test_a_backup_taken_during_writes_restores_to_an_equal_server(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    copy = tmp_path / "backup" / "memsync-copy.sqlite3"
    copy.parent.mkdir()
    said: dict[tuple[str, int], str] = {}  # (repo, version) -> checksum the server said
    stop = threading.Event()
    failures: list[str] = []

    def write(live: LiveServer, token: str) -> None:
        with live.client(token) as client:
            step = 0
            while not stop.is_set():
                repo = f"acme/r{step % 3}"
                entries = {f"n{step % 7}.md": f"step {step}", f"big{step % 2}.md": "y" * step}
                put = client.put(API, params={"repo": repo}, json={"entries": entries})
                if put.status_code != 200:
                    failures.append(put.text)
                    return
                said[repo, put.json()["version"]] = put.json()["checksum"]
                step += 1

    # Rate limits off: the writer PUTs as fast as the server answers, which is the point.
    settings = Settings(database_url=env["MEMSYNC_DATABASE_URL"], rate_limit_burst=0)
    with run_live_server(settings) as live:
        writer = threading.Thread(target=write, args=(live, live.token()), daemon=True)
        writer.start()
        while len(said) < 30 and writer.is_alive():
            threading.Event().wait(0.01)
        at_start = len(said)
        backed_up = run_cli("backup", str(copy), env=env)
        at_end = len(said)
        while len(said) < at_end + 10 and writer.is_alive():
            threading.Event().wait(0.01)
        stop.set()
        writer.join(timeout=30)
        assert backed_up.returncode == 0, backed_up.stderr
        assert not failures, failures
        assert at_end > at_start  # the server committed while the backup ran
        assert f"to {copy}" in backed_up.stdout
        taken = copy.read_bytes()
        again = run_cli("backup", str(copy), env=env)
        assert again.returncode == 1
        assert "--force" in one_line(again)
        assert copy.read_bytes() == taken
        older = copy.with_name("older.sqlite3")
        older.write_text("an older backup")
        assert run_cli("backup", str(older), "--force", env=env).returncode == 0
        assert older.read_bytes().startswith(b"SQLite format 3")
        assert sorted(p.name for p in copy.parent.iterdir()) == [copy.name, older.name]
        original = SqlStore(env["MEMSYNC_DATABASE_URL"])
        assert original.list_repos()[0].version > 0

    # The restore drill: a fresh server on the copy serves each repo as the original
    # did at the copy's version, entries, checksum and history alike.
    restore = tmp_path / "restored.sqlite3"
    restore.write_bytes(copy.read_bytes())
    copy_env = {"MEMSYNC_DATABASE_URL": sqlite_url(restore)}
    listed = repos_json(copy_env)
    assert {repo["repo"] for repo in listed} == {"acme/r0", "acme/r1", "acme/r2"}
    restored_store = SqlStore(copy_env["MEMSYNC_DATABASE_URL"])
    fresh_settings = Settings(database_url=copy_env["MEMSYNC_DATABASE_URL"])
    with run_live_server(fresh_settings) as fresh, fresh.client(fresh.token()) as client:
        for repo in listed:
            name, version = repo["repo"], repo["version"]
            assert said[name, version] == repo["checksum"]
            body = client.get(API, params={"repo": name}).json()
            assert body["version"] == version
            assert body["checksum"] == repo["checksum"]
            entries = body["content"]["entries"]
            sums = {key: entry_checksum(text) for key, text in entries.items()}
            assert repo_checksum(sums) == repo["checksum"]
            kept = history_rows(restored_store, name, version)
            assert kept == history_rows(original, name, version)
            assert max(row[1] for row in kept) == version
    # The original went on after the copy was taken: the copy is a snapshot mid-stream.
    assert sum(r.version for r in original.list_repos()) > sum(r["version"] for r in listed)
    original.close()
    restored_store.close()


def test_a_team_gets_one_token_each_in_one_command(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    # Rate limits off: the writer PUTs as fast as the server answers, which is the point.
    settings = Settings(database_url=env["MEMSYNC_DATABASE_URL"], rate_limit_burst=0)
    with run_live_server(settings) as live:
        created = run_cli(
            "token", "create", "--repo", "acme/*", "--name", "alice", "--names", "bob,carol",
            env=env,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        lines = created.stdout.splitlines()
        minted = dict(line.split("\t") for line in lines)
        assert list(minted) == ["alice", "bob", "carol"]
        for name, secret in minted.items():
            assert (created.stdout + created.stderr).count(secret) == 1
            with live.client(secret) as client:
                put = client.put(API, params={"repo": "acme/app"}, json={"entries": {name: name}})
                assert put.status_code == 200, put.text
                assert client.get("/v1/token").json()["name"] == name
                refused = client.get(API, params={"repo": "other/app"})
                assert refused.status_code == 403
        clash = run_cli("token", "create", "--repo", "*", "--names", "dave,bob", "--json", env=env)
        assert clash.returncode == 2
        assert "'bob'" in one_line(clash)
        assert "no token was created" in one_line(clash)
        assert [token["name"] for token in tokens_json(env)] == ["alice", "bob", "carol"]
        as_json = run_cli(
            "token", "create", "--repo", "*", "--names", "dave,erin", "--json", env=env
        )
        assert as_json.returncode == 0, as_json.stderr
        payload = json.loads(as_json.stdout)
        assert [token["name"] for token in payload["tokens"]] == ["dave", "erin"]
        with live.client(payload["tokens"][1]["token"]) as client:
            assert client.get("/v1/token").json()["name"] == "erin"


def test_token_create_on_an_unmigrated_database_says_so(tmp_path: Path) -> None:
    env = database_at_revision(tmp_path, "0002")
    refused = run_cli("token", "create", "--repo", "*", "--name", "ci", env=env)
    assert refused.returncode == 1
    line = one_line(refused)
    assert "revision 0002" in line
    assert "memsync-server migrate" in line
    assert refused.stdout == ""
    assert run_cli("migrate", env=env).returncode == 0
    assert run_cli("token", "create", "--repo", "*", "--name", "ci", env=env).returncode == 0


def test_postgresql_is_pointed_at_its_own_tools() -> None:
    env = {"MEMSYNC_DATABASE_URL": "postgresql+psycopg://memsync@127.0.0.1:1/memsync"}
    backed_up = run_cli("backup", "/nonexistent/copy", env=env)
    assert backed_up.returncode == 2
    assert "pg_dump" in one_line(backed_up)
    vacuumed = run_cli("vacuum", env=env)
    assert vacuumed.returncode == 2
    assert "VACUUM FULL" in one_line(vacuumed)
