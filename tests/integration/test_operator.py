"""What an operator of `memsync-server` sees: real commands on real databases and servers.

Commands run as subprocesses (`run_cli`) or through click's CliRunner; servers are real
uvicorn servers on loopback, in a thread (`run_live_server`) or in their own processes
(`ServerProcess`), on the same database file the commands use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from sync_server.auth import issue_token, mint_token
from sync_server.cli import main
from sync_server.config import Settings, sqlite_url
from tests.integration.conftest import API
from tests.integration.test_server_cli import database_at_revision, database_env, run_cli
from tests.liveserver import (
    LiveServer,
    ServerProcess,
    free_port,
    run_live_server,
    server_command,
    stop_process,
)
from tests.pgcluster import PostgresCluster

WHEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def parse_time(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed on stderr, checked to be just one."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("memsync-server: ")
    assert "Traceback" not in result.stderr
    return lines[0]


def tokens_json(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = run_cli("token", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    payload = json.loads(listed.stdout)
    assert list(payload) == ["tokens"]
    tokens: list[dict[str, Any]] = payload["tokens"]
    return tokens


def repos_json(env: dict[str, str]) -> list[dict[str, Any]]:
    listed = run_cli("repo", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    payload = json.loads(listed.stdout)
    assert list(payload) == ["repos"]
    repos: list[dict[str, Any]] = payload["repos"]
    return repos


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[dict[str, str], LiveServer]]:
    """A live server and the environment under which commands reach its database."""
    env = database_env(tmp_path)
    with run_live_server(Settings(database_url=env["MEMSYNC_DATABASE_URL"])) as live:
        yield env, live


# -- tokens ---------------------------------------------------------------------------


class TestTokenExpiry:
    def test_expiry_is_listed_and_reported_by_the_server(
        self, shared: tuple[dict[str, str], LiveServer]
    ) -> None:
        env, live = shared
        before = datetime.now(UTC).replace(microsecond=0)
        created = run_cli(
            "token", "create", "--repo", "*", "--name", "ci", "--expires", "90d", env=env
        )
        assert created.returncode == 0, created.stderr
        assert "expires" in created.stderr
        secret = created.stdout.splitlines()[-1]
        run_cli("token", "create", "--repo", "*", "--name", "forever", env=env)
        listed = {token["name"]: token for token in tokens_json(env)}
        expires = parse_time(listed["ci"]["expiresAt"])
        assert before + timedelta(days=90) <= expires <= datetime.now(UTC) + timedelta(days=90)
        assert listed["ci"]["state"] == "live"
        assert listed["forever"]["expiresAt"] is None
        assert listed["forever"]["state"] == "live"
        with live.client(secret) as client:
            info = client.get("/v1/token")
        assert info.status_code == 200
        assert info.json()["expiresAt"] == listed["ci"]["expiresAt"]
        table = run_cli("token", "list", env=env).stdout
        assert expires.strftime("%Y-%m-%d") in table
        assert "never" in table

    @pytest.mark.parametrize(
        ("value", "days"), [("12h", 0.5), ("2w", 14), ("1D", 1)], ids=["hours", "weeks", "upper"]
    )
    def test_hours_days_and_weeks_are_accepted(
        self, tmp_path: Path, value: str, days: float
    ) -> None:
        env = database_env(tmp_path)
        created = run_cli("token", "create", "--repo", "*", "--expires", value, env=env)
        assert created.returncode == 0, created.stderr
        [token] = tokens_json(env)
        lifetime = parse_time(token["expiresAt"]) - parse_time(token["createdAt"])
        assert abs(lifetime - timedelta(days=days)) <= timedelta(seconds=2)

    @pytest.mark.parametrize("value", ["0d", "90", "d", "-1d", "1.5d", "90x", "3651d", "1y", ""])
    def test_nonsense_is_refused_with_exit_2_and_creates_nothing(
        self, tmp_path: Path, value: str
    ) -> None:
        env = database_env(tmp_path)
        refused = run_cli("token", "create", "--repo", "*", "--expires", value, env=env)
        assert refused.returncode == 2
        assert "--expires" in one_line(refused)
        assert not (tmp_path / "data").exists()

    def test_an_expired_token_gets_401_saying_so_and_the_list_says_expired(
        self, shared: tuple[dict[str, str], LiveServer]
    ) -> None:
        env, live = shared
        _, secret = issue_token(
            live.store,
            repo_pattern="*",
            name="old",
            expires_at=datetime.now(UTC) - timedelta(minutes=1),
        )
        with live.client(secret) as client:
            for path in ("/v1/token", f"{API}?repo=acme/app"):
                refused = client.get(path)
                assert refused.status_code == 401
                assert refused.json()["error"]["type"] == "unauthorized"
                assert "expired" in refused.json()["error"]["message"]
        [token] = tokens_json(env)
        assert token["state"] == "expired"
        assert "expired" in run_cli("token", "list", env=env).stdout

    def test_a_cached_token_stops_working_when_it_expires(self, tmp_path: Path) -> None:
        settings = Settings(
            database_url=sqlite_url(tmp_path / "db.sqlite3"), token_cache_seconds=300
        )
        with run_live_server(settings) as live:
            expires_at = datetime.now(UTC) + timedelta(seconds=2)
            _, secret = issue_token(live.store, repo_pattern="*", expires_at=expires_at)
            with live.client(secret) as client:
                assert client.get("/v1/token").status_code == 200  # now cached for 300 s
                time.sleep(max(0.0, (expires_at - datetime.now(UTC)).total_seconds()) + 0.2)
                expired = client.get("/v1/token")
        assert expired.status_code == 401
        assert "expired" in expired.json()["error"]["message"]


class TestTokenNamesAndJson:
    def test_a_live_name_is_refused_naming_the_existing_token(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        assert run_cli("token", "create", "--repo", "*", "--name", "ci", env=env).returncode == 0
        [first] = tokens_json(env)
        again = run_cli("token", "create", "--repo", "acme/*", "--name", "ci", env=env)
        assert again.returncode == 2
        line = one_line(again)
        assert "'ci'" in line
        assert first["id"] in line
        assert again.stdout == ""
        assert len(tokens_json(env)) == 1
        assert run_cli("token", "revoke", "ci", env=env).returncode == 0
        assert run_cli("token", "create", "--repo", "*", "--name", "ci", env=env).returncode == 0
        assert [token["state"] for token in tokens_json(env)] == ["revoked", "live"]

    def test_json_lists_every_field_and_never_a_secret(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        secret = run_cli(
            "token", "create", "--repo", "acme/*", "--read-only", "--name", "bot", env=env
        ).stdout.splitlines()[-1]
        run_cli("token", "create", "--repo", "*", "--name", "gone", env=env)
        run_cli("token", "revoke", "gone", env=env)
        listed = run_cli("token", "list", "--json", env=env).stdout
        assert secret[4:16] not in listed
        assert secret[4:] not in listed
        assert hashlib.sha256(secret.encode()).hexdigest() not in listed
        bot, gone = json.loads(listed)["tokens"]
        assert set(bot) == {
            "name",
            "id",
            "repos",
            "access",
            "reviewer",
            "person",
            "createdAt",
            "expiresAt",
            "revokedAt",
            "state",
        }
        assert bot["person"] is None  # only --person gives a token a person
        assert (bot["name"], bot["repos"], bot["access"], bot["state"]) == (
            "bot",
            "acme/*",
            "read-only",
            "live",
        )
        assert bot["id"] == secret[4:10]
        assert WHEN.fullmatch(bot["createdAt"])
        assert bot["revokedAt"] is None
        assert gone["state"] == "revoked"
        assert WHEN.fullmatch(gone["revokedAt"])


# -- repos ----------------------------------------------------------------------------


class TestRepos:
    def test_list_shows_entries_bytes_version_and_last_write(
        self, shared: tuple[dict[str, str], LiveServer]
    ) -> None:
        env, live = shared
        assert repos_json(env) == []
        with live.client(live.token()) as client:
            client.put(API, params={"repo": "acme/app"}, json={"entries": {"a.md": "héllo"}})
            put = client.put(
                API, params={"repo": "acme/app"}, json={"entries": {"b.md": "x" * 2000}}
            )
            client.put(API, params={"repo": "acme/typo"}, json={"entries": {"a.md": "t"}})
        assert put.status_code == 200
        app, typo = repos_json(env)
        assert app == {
            "repo": "acme/app",
            "entries": 2,
            "bytes": len("héllo".encode()) + 2000,
            "version": 2,
            "lastModified": put.json()["lastModified"],
            "checksum": put.json()["checksum"],
            "review": False,
            "pending": 0,
        }
        assert (typo["repo"], typo["entries"], typo["bytes"], typo["version"]) == (
            "acme/typo",
            1,
            1,
            1,
        )
        table = run_cli("repo", "list", env=env)
        assert table.returncode == 0
        assert "acme/app" in table.stdout
        assert "acme/typo" in table.stdout
        assert "2.0 kB" in table.stdout

    def test_delete_needs_yes_then_removes_the_repo_and_its_history(
        self, shared: tuple[dict[str, str], LiveServer]
    ) -> None:
        env, live = shared
        with live.client(live.token()) as client:
            for text in ("one", "two"):
                client.put(API, params={"repo": "acme/typo"}, json={"entries": {"n.md": text}})
            client.put(API, params={"repo": "acme/app"}, json={"entries": {"keep.md": "k"}})
            cached = client.get(API, params={"repo": "acme/typo"})
            assert cached.json()["content"]["entries"] == {"n.md": "two"}

            asked = run_cli("repo", "delete", "acme/typo", env=env)
            assert asked.returncode == 2
            line = one_line(asked)
            assert "would delete acme/typo" in line
            assert "1 entries" in line
            assert "--yes" in line
            assert client.get(API, params={"repo": "acme/typo"}).status_code == 200

            deleted = run_cli("repo", "delete", "acme/typo", "--yes", env=env)
            assert deleted.returncode == 0, deleted.stderr
            assert "deleted acme/typo: 1 entries and 2 history rows" in deleted.stdout
            gone = client.get(API, params={"repo": "acme/typo"})
            assert gone.status_code == 404
            assert gone.json()["error"]["details"]["error_code"] == "no_team_memory"
            history = client.get(f"{API}/history", params={"repo": "acme/typo", "key": "n.md"})
            assert history.status_code == 404
            assert [repo["repo"] for repo in repos_json(env)] == ["acme/app"]
            kept = client.get(API, params={"repo": "acme/app"})
            assert kept.json()["content"]["entries"] == {"keep.md": "k"}

            # Written again, it starts afresh: no old text, from a cache or otherwise.
            again = client.put(
                API, params={"repo": "acme/typo"}, json={"entries": {"new.md": "fresh"}}
            )
            assert again.json()["version"] == 3
            fresh = client.get(API, params={"repo": "acme/typo"})
            assert fresh.json()["content"]["entries"] == {"new.md": "fresh"}
            old_base = client.get(API, params={"repo": "acme/typo", "since": "1"})
            assert old_base.status_code == 410

    def test_unknown_or_malformed_repo(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        unknown = run_cli("repo", "delete", "acme/none", "--yes", env=env)
        assert unknown.returncode == 1
        assert "no repo acme/none" in one_line(unknown)
        bad = run_cli("repo", "delete", "not a repo", env=env)
        assert bad.returncode == 2
        assert "owner/name" in one_line(bad)

    def test_help_says_history_goes_too(self) -> None:
        helped = CliRunner().invoke(main, ["repo", "delete", "--help"])
        assert helped.exit_code == 0
        assert "whole history" in helped.output
        assert "--yes" in helped.output


# -- migrate, databases, ports --------------------------------------------------------


class TestMigrate:
    def test_created_then_up_to_date(self, tmp_path: Path) -> None:
        env = database_env(tmp_path)
        created = run_cli("migrate", env=env)
        assert created.returncode == 0
        assert created.stdout.startswith("created the schema at revision ")
        again = run_cli("migrate", env=env)
        assert again.stdout.startswith("schema is up to date at revision ")

    def test_an_older_schema_is_upgraded_and_says_from_what(self, tmp_path: Path) -> None:
        env = database_at_revision(tmp_path, "0002")
        upgraded = run_cli("migrate", env=env)
        assert upgraded.returncode == 0, upgraded.stderr
        assert re.match(r"upgraded the schema from revision 0002 to \d{4} ", upgraded.stdout)


def env_without_database_url() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "MEMSYNC_DATABASE_URL"}


def test_without_a_database_url_it_says_which_file_it_creates_private(tmp_path: Path) -> None:
    def migrate() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*server_command(), "migrate"],
            env=env_without_database_url(),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    first = migrate()
    assert first.returncode == 0, first.stderr
    database = tmp_path / "data" / "memsync.sqlite3"
    assert one_line(first) == (
        "memsync-server: MEMSYNC_DATABASE_URL is not set: "
        f"creating the SQLite database {database.resolve()}"
    )
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    second = migrate()
    assert second.returncode == 0
    assert second.stderr == ""


def test_serve_without_a_database_url_says_it_once_in_its_log(tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*server_command(), "serve", "--port", str(port)],
            env=env_without_database_url(),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            ready = False
            while not ready and time.monotonic() < deadline and process.poll() is None:
                try:
                    ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).is_success
                except httpx.TransportError:
                    time.sleep(0.05)
            assert ready, log_path.read_text()
        finally:
            stop_process(process)
    database = (tmp_path / "data" / "memsync.sqlite3").resolve()
    text = log_path.read_text()
    assert text.count(f"creating the SQLite database {database}") == 1, text
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_a_new_database_file_named_by_url_is_private_too(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    created = run_cli("migrate", env=env)
    assert created.stderr == ""
    assert stat.S_IMODE((tmp_path / "data" / "memsync.sqlite3").stat().st_mode) == 0o600


def test_a_sqlite_file_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain-file").write_text("not a folder")
    url = sqlite_url(tmp_path / "plain-file" / "memsync.sqlite3")
    result = run_cli("migrate", env={"MEMSYNC_DATABASE_URL": url})
    assert result.returncode == 1
    line = one_line(result)
    assert "storage is unavailable: cannot create its folder: file exists" in line


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "junk.sqlite3").write_bytes(b"not a database, " * 512)
    url = sqlite_url(tmp_path / "junk.sqlite3")
    result = run_cli("migrate", env={"MEMSYNC_DATABASE_URL": url})
    assert result.returncode == 1
    assert "storage is unavailable: the file is not a SQLite database" in one_line(result)


@pytest.mark.postgres
class TestUnavailable:
    def failure(self, url: str) -> str:
        result = run_cli("migrate", env={"MEMSYNC_DATABASE_URL": url})
        assert result.returncode == 1
        line = one_line(result)
        assert "storage is unavailable" in line
        assert "s3cret-pw" not in result.stderr
        return line

    def test_connection_refused(self) -> None:
        line = self.failure(f"postgresql+psycopg://memsync:s3cret-pw@127.0.0.1:{free_port()}/db")
        assert "storage is unavailable: connection refused" in line
        assert "memsync:***@127.0.0.1" in line

    def test_no_such_database(self, postgres_cluster: PostgresCluster) -> None:
        line = self.failure(
            postgres_cluster.url("no_such_db").replace("postgres@", "postgres:s3cret-pw@")
        )
        assert "storage is unavailable: no such database" in line

    def test_no_such_user(self, postgres_cluster: PostgresCluster) -> None:
        line = self.failure(postgres_cluster.url().replace("postgres@", "nobody:s3cret-pw@"))
        assert "storage is unavailable: authentication failed" in line


def test_a_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--port", str(port), env=database_env(tmp_path))
    assert result.returncode == 1
    assert one_line(result).startswith(f"memsync-server: port {port} on 127.0.0.1 is in use")


def test_an_address_not_on_this_machine_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("serve", "--host", "192.0.2.1", env=database_env(tmp_path))
    assert result.returncode == 2
    assert "not an address of this machine" in one_line(result)


COMMANDS = [
    [],
    ["serve"],
    ["migrate"],
    ["prune"],
    ["vacuum"],
    ["backup"],
    ["token"],
    ["token", "create"],
    ["token", "list"],
    ["token", "revoke"],
    ["repo"],
    ["repo", "list"],
    ["repo", "delete"],
]


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "main")
def test_every_help_lists_the_exit_codes(words: list[str]) -> None:
    helped = CliRunner().invoke(main, [*words, "--help"])
    assert helped.exit_code == 0
    flat = " ".join(helped.output.split())
    assert "Exit codes: 0 " in flat
    assert "1 failed" in flat
    assert "2 usage or configuration error" in flat


def test_serve_help_names_the_port_in_use_failure() -> None:
    flat = " ".join(CliRunner().invoke(main, ["serve", "--help"]).output.split())
    assert "1 failed (the port is in use" in flat


# -- logs -----------------------------------------------------------------------------


def request_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "GET /v1/token 200" in line]


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_every_worker_logs_every_request(
    tmp_path: Path, postgres_url: str, log_format: str
) -> None:
    env = {"MEMSYNC_DATABASE_URL": postgres_url}
    secret = run_cli("token", "create", "--repo", "*", "--name", "probe", env=env).stdout
    token = secret.splitlines()[-1]
    requests = 12
    log_path = tmp_path / "server.log"
    with ServerProcess(
        env, log_path=log_path, workers=2, args=["--log-format", log_format]
    ) as server:
        for _ in range(requests):
            # A new connection each time, so the kernel may hand it to either worker.
            answer = httpx.get(
                f"{server.base_url}/v1/token",
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
            assert answer.status_code == 200
    log = log_path.read_text()
    assert token not in log
    assert token[4:16] not in log
    if log_format == "text":
        lines = request_lines(log)
        assert len(lines) == requests, log[-3000:]
        assert all("by=probe" in line for line in lines)
        return
    records = [json.loads(line) for line in log.splitlines() if line.strip()]
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
    served = [r for r in records if r["logger"] == "memsync.access" and r["path"] == "/v1/token"]
    assert len(served) == requests, log[-3000:]
    for record in served:
        assert (record["method"], record["status"], record["token_name"]) == ("GET", 200, "probe")
        assert record["level"] == "INFO"
        assert isinstance(record["duration_ms"], float)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["time"])
    workers = {r["pid"] for r in records if "Started server process" in r["message"]}
    assert len(workers) >= 2
    assert {r["pid"] for r in served} <= workers


def test_json_logs_on_one_worker_carry_no_entry_text(tmp_path: Path) -> None:
    env = database_env(tmp_path)
    token = run_cli("token", "create", "--repo", "*", env=env).stdout.splitlines()[-1]
    marker = "PRIVATE-NOTE-CONTENT-91c2"
    log_path = tmp_path / "server.log"
    with ServerProcess(env, log_path=log_path, args=["--log-format", "json"]) as server:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.base_url, headers=headers, timeout=30) as client:
            put = client.put(API, params={"repo": "acme/app"}, json={"entries": {"n.md": marker}})
            assert put.status_code == 200
    lines = log_path.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    assert any(r.get("method") == "PUT" and r.get("status") == 200 for r in records)
    assert marker not in log_path.read_text()
    assert token[4:16] not in log_path.read_text()


# -- /docs ----------------------------------------------------------------------------


ASSET = re.compile(r'(?:src|href)="([^"]+)"')


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_load_only_the_servers_own_assets(live: LiveServer, page: str) -> None:
    with live.client() as client:
        html = client.get(page)
        assert html.status_code == 200
        assert html.headers["content-type"].startswith("text/html")
        assets = ASSET.findall(html.text)
        assert any(asset.endswith(".js") for asset in assets)
        assert "http://" not in html.text
        assert "https://" not in html.text
        for asset in assets:
            assert asset.startswith("/docs/assets/"), asset
            fetched = client.get(asset)
            assert fetched.status_code == 200, asset
            assert len(fetched.content) > 0
        assert client.get("/openapi.json").status_code == 200
        missing = client.get("/docs/assets/nothing-here.js")
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "not_found"


def access_messages(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "memsync.access"]


def test_a_client_gone_mid_body_is_a_499_and_a_refused_token_is_named_by_its_id(
    live: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="memsync.access")
    token = live.token(name="uploader")
    host, port = live.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(
            f"PUT {API}?repo=acme/app HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n"
            '{"entries": {"a.md": "half a bo'.encode()
        )
    deadline = time.monotonic() + 5
    while not any(r.__dict__.get("status") == 499 for r in access_messages(caplog)):
        assert time.monotonic() < deadline, [r.getMessage() for r in access_messages(caplog)]
        time.sleep(0.02)
    (gone,) = [r for r in access_messages(caplog) if r.__dict__.get("status") == 499]
    assert gone.getMessage().startswith(f"PUT {API} 499 ")
    with live.client(token) as client:
        metrics = client.get("/metrics").text
    assert re.search(r'memsync_requests_total\{method="PUT",route="[^"]+",status="499"\}', metrics)
    assert not re.search(r'status="5\d\d"', metrics), metrics

    # Unknown, then revoked: `by=?id:<lookup id>`, never the secret.
    unknown = mint_token()
    revoked = live.token(name="leaver")
    assert live.store.revoke_token("leaver") == 1
    caplog.clear()
    for secret in (unknown.secret, revoked):
        with live.client(secret) as client:
            assert client.get("/v1/token").status_code == 401
    refused = access_messages(caplog)
    assert [r.getMessage().rsplit(" ", 1)[-1] for r in refused] == [
        f"by=?id:{unknown.lookup_id}",
        f"by=?id:{revoked[4:16]}",
    ]
    assert [r.__dict__["token_id"] for r in refused] == [unknown.lookup_id, revoked[4:16]]
    assert all(r.__dict__["token_name"] == "-" for r in refused)
    assert not any(s in r.getMessage() for r in refused for s in (unknown.secret, revoked))


def test_a_rate_limited_request_names_its_token_too(
    sqlite_database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A 429 is attributed like any other answer: by the token's name, or, for refused
    tokens limited per address (the API's header, the web page's sign-in form), by the
    token's public lookup id; never `by=-`, never the secret."""
    caplog.set_level(logging.INFO, logger="memsync.access")
    settings = Settings(
        database_url=sqlite_database_url, rate_limit_burst=2, rate_limit_per_second=0.01
    )
    unknown, stranger = mint_token(), mint_token()
    with run_live_server(settings) as live:
        token = live.token(name="busy bee")
        with live.client(token) as client:
            statuses = [client.get("/v1/token").status_code for _ in range(4)]
        assert statuses[-1] == 429
        with live.client(unknown.secret) as client:
            refused = [client.get("/v1/token").status_code for _ in range(4)]
        assert refused[0] == 401
        assert refused[-1] == 429
        with live.client() as client:
            signin = client.post(
                "/ui/signin", data={"token": stranger.secret}, headers={"Origin": live.base_url}
            )
        # The address's failed attempts were used up above: the form is limited too.
        assert signin.status_code == 429
    lines = [(r.__dict__["status"], r.getMessage()) for r in access_messages(caplog)]
    by_status: dict[tuple[str, int], set[str]] = {}
    for status, message in lines:
        path = message.split(" ")[1]
        by_status.setdefault((path, status), set()).add(message.split(" by=", 1)[1])
    assert by_status[("/v1/token", 200)] == {"busy bee"}
    assert by_status[("/v1/token", 429)] == {"busy bee", f"?id:{unknown.lookup_id}"}
    assert by_status[("/v1/token", 401)] == {f"?id:{unknown.lookup_id}"}
    assert by_status[("/ui/signin", 429)] == {f"?id:{stranger.lookup_id}"}
    assert not any(s in m for _, m in lines for s in (token, unknown.secret, stranger.secret))
