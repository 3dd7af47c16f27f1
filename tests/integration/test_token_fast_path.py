"""`memsync-server token ...` on an existing SQLite file: the standard library's
`sqlite3` and no pydantic, SQLAlchemy or Alembic, and tokens a real server accepts.

The same database read through `SqlStore` (a URL with a query string takes that way)
gives the same answers and the same errors, word for word.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from sync_server.config import sqlite_url
from tests.integration.conftest import API
from tests.integration.test_operator import one_line
from tests.integration.test_server_cli import database_at_revision, database_env, run_cli
from tests.liveserver import ServerProcess

# Never imported by a token command on SQLite; rich only for `token list`'s table.
HEAVY = {"pydantic", "pydantic_core", "pydantic_settings", "sqlalchemy", "alembic", "psycopg"}
# The same database through `SqlStore`: the pysqlite driver reads `timeout` from the query.
THROUGH_SQLALCHEMY = "?timeout=30"


def imported(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `memsync-server ARGS` under `-X importtime`: its result and the top-level
    packages it imported (the import log is taken off stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sync_server", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    modules, stderr = set(), []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            modules.add(line.rsplit("|", 1)[1].strip().split(".")[0])
        else:
            stderr.append(line)
    assert "sync_server" in modules  # the log is there at all
    done.stderr = "\n".join(stderr) + ("\n" if stderr else "")
    return done, modules


def migrated(tmp_path: Path) -> dict[str, str]:
    env = database_env(tmp_path)
    assert run_cli("migrate", env=env).returncode == 0
    return env


def test_token_commands_import_neither_pydantic_nor_sqlalchemy(tmp_path: Path) -> None:
    env = migrated(tmp_path)
    runs = [
        ("token", "create", "--repo", "acme/*", "--name", "alice"),
        ("token", "create", "--repo", "*", "--names", "bob,carol", "--expires", "90d", "--json"),
        ("token", "list", "--json"),
        ("token", "revoke", "bob"),
        ("token", "list"),
    ]
    for args in runs:
        done, modules = imported(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        assert not modules & HEAVY, (args, modules & HEAVY)
        if args[:2] != ("token", "list") or "--json" in args:
            assert "rich" not in modules, args
    # Refusals take the same way: a taken name, a database an older server left.
    refused, modules = imported("token", "create", "--repo", "*", "--name", "alice", env=env)
    assert refused.returncode == 2
    assert "'alice'" in one_line(refused)
    assert not modules & HEAVY
    old = database_at_revision(tmp_path / "old", "0002")
    refused, modules = imported("token", "list", env=old)
    assert refused.returncode == 1
    assert "memsync-server migrate" in one_line(refused)
    assert not modules & HEAVY


def test_a_token_minted_without_sqlalchemy_works_on_a_real_server(tmp_path: Path) -> None:
    env = migrated(tmp_path)
    server_env = {**env, "MEMSYNC_TOKEN_CACHE_SECONDS": "0"}
    with ServerProcess(server_env, log_path=tmp_path / "server.log") as server:
        created, modules = imported(
            "token", "create", "--repo", "acme/*", "--name", "alice", "--expires", "2w", env=env
        )
        assert created.returncode == 0, created.stderr
        assert not modules & HEAVY
        secret = created.stdout.splitlines()[-1]
        read_only, _ = imported(
            "token", "create", "--repo", "*", "--name", "ci", "--read-only", "--json", env=env
        )
        ci = json.loads(read_only.stdout)["tokens"][0]
        headers = {"Authorization": f"Bearer {secret}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            info = client.get("/v1/token").json()
            assert info["name"] == "alice"
            assert (info["repos"], info["access"]) == ("acme/*", "read-write")
            assert info["expiresAt"] is not None
            put = client.put(API, params={"repo": "acme/app"}, json={"entries": {"a.md": "a"}})
            assert put.status_code == 200, put.text
            assert client.get(API, params={"repo": "other/app"}).status_code == 403
            with httpx.Client(base_url=server.base_url, timeout=30) as other:
                as_ci = {"Authorization": f"Bearer {ci['token']}"}
                assert other.get(API, params={"repo": "acme/app"}, headers=as_ci).status_code == 200
                written = other.put(
                    API, params={"repo": "acme/app"}, json={"entries": {}}, headers=as_ci
                )
                assert written.status_code == 403
            revoked, modules = imported("token", "revoke", "alice", env=env)
            assert revoked.returncode == 0, revoked.stderr
            assert not modules & HEAVY
            assert client.get("/v1/token").status_code == 401
    assert secret not in (tmp_path / "server.log").read_text()


def test_both_ways_give_the_same_answers_and_the_same_errors(tmp_path: Path) -> None:
    env = migrated(tmp_path)
    slow = {"MEMSYNC_DATABASE_URL": env["MEMSYNC_DATABASE_URL"] + THROUGH_SQLALCHEMY}
    assert run_cli("token", "create", "--repo", "*", "--names", "a,b", env=env).returncode == 0
    assert run_cli("token", "create", "--repo", "acme/x", "--name", "c", env=slow).returncode == 0
    assert run_cli("token", "revoke", "b", env=slow).returncode == 0
    for args in [("token", "list", "--json"), ("token", "list")]:
        fast_answer = run_cli(*args, env={**env, "COLUMNS": "200"})
        slow_answer, modules = imported(*args, env={**slow, "COLUMNS": "200"})
        assert "sqlalchemy" in modules  # this one did take the other way
        assert fast_answer.returncode == slow_answer.returncode == 0
        assert fast_answer.stdout == slow_answer.stdout
    refusals: list[tuple[str, ...]] = [
        ("token", "create", "--repo", "*", "--name", "a"),
        ("token", "revoke", "zz"),
    ]
    for args in refusals:
        fast_refusal, slow_refusal = run_cli(*args, env=env), run_cli(*args, env=slow)
        assert fast_refusal.returncode == slow_refusal.returncode != 0
        assert one_line(fast_refusal) == one_line(slow_refusal)
    old = database_at_revision(tmp_path / "old", "0002")
    old_slow = {"MEMSYNC_DATABASE_URL": old["MEMSYNC_DATABASE_URL"] + THROUGH_SQLALCHEMY}
    fast_refusal = run_cli("token", "create", "--repo", "*", "--name", "d", env=old)
    slow_refusal = run_cli("token", "create", "--repo", "*", "--name", "d", env=old_slow)
    assert fast_refusal.returncode == slow_refusal.returncode == 1
    assert one_line(fast_refusal) == one_line(slow_refusal).replace(THROUGH_SQLALCHEMY, "")


def test_what_sqlite3_cannot_open_is_worded_as_before(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database, " * 512)
    refused = run_cli("token", "list", env={"MEMSYNC_DATABASE_URL": sqlite_url(junk)})
    assert refused.returncode == 1
    assert "storage is unavailable: the file is not a SQLite database" in one_line(refused)
    # An empty file (a database never migrated) gets its schema, as a new one does.
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    env = {"MEMSYNC_DATABASE_URL": sqlite_url(empty)}
    created = run_cli("token", "create", "--repo", "*", "--name", "first", env=env)
    assert created.returncode == 0, created.stderr
    assert "first" in run_cli("token", "list", "--json", env=env).stdout


def test_only_the_database_settings_are_read(tmp_path: Path) -> None:
    env = {**migrated(tmp_path), "MEMSYNC_MAX_ENTRIES": "lots"}
    assert run_cli("token", "create", "--repo", "*", "--name", "a", env=env).returncode == 0
    assert run_cli("token", "list", "--json", env=env).returncode == 0
    refused = run_cli("repo", "list", env=env)
    assert refused.returncode == 2
    assert one_line(refused).startswith("memsync-server: bad setting MEMSYNC_MAX_ENTRIES: ")
