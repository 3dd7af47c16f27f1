"""Any database password works: a real PostgreSQL role whose password holds every
printable ASCII character, required by the server (scram-sha-256), through `migrate`,
two `serve` processes (the password apart, and in a file), a commit crossing between
them, and `token list`; the password never shows in what the commands print.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from urllib.parse import quote

import pytest
from psycopg import sql

from tests.integration.test_events import assert_commits_cross, cli_token, serve_env
from tests.integration.test_server_cli import run_cli
from tests.liveserver import ServerProcess
from tests.pgcluster import PostgresCluster

# Every printable ASCII character, the space included, twice shuffled in.
PRINTABLE = "".join(chr(code) for code in range(32, 127))
PASSWORD = "p@ss w:rd/" + PRINTABLE


def _pieces(secret: str, size: int = 6) -> set[str]:
    """Every run of `size` characters of the password: none may be printed."""
    return {secret[start : start + size] for start in range(len(secret) - size + 1)}


def _shown(output: str) -> list[str]:
    return [piece for piece in _pieces(PASSWORD) if piece in output]


def _role_with_password(cluster: PostgresCluster) -> tuple[str, str]:
    """A login role that must give PASSWORD over TCP, owning a fresh database; the
    database's URL without a password."""
    role = f"memsync_pw_{secrets.token_hex(4)}"
    database = f"{role}_db"
    hba = cluster.data_dir / "pg_hba.conf"
    rules = hba.read_text(encoding="utf-8")
    with hba.open("w", encoding="utf-8") as file:  # (keeps the file's owner)
        file.write(f"host all {role} 127.0.0.1/32 scram-sha-256\n{rules}")
    with cluster._connect("postgres") as connection:
        connection.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
        connection.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(database), sql.Identifier(role)
            )
        )
        connection.execute("SELECT pg_reload_conf()")
    return role, f"postgresql+psycopg://{role}@{cluster.host}:{cluster.port}/{database}"


@pytest.mark.postgres
def test_a_password_of_every_printable_character_works_end_to_end(
    postgres_cluster: PostgresCluster, tmp_path: Path
) -> None:
    role, url = _role_with_password(postgres_cluster)
    apart = {**serve_env(url), "MEMSYNC_DATABASE_PASSWORD": PASSWORD}
    password_file = tmp_path / "db-password"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    password_file.chmod(0o600)
    in_file = {**serve_env(url), "MEMSYNC_DATABASE_PASSWORD_FILE": str(password_file)}

    # Without the password, PostgreSQL refuses, in one line and without a traceback.
    refused = run_cli("migrate", env=serve_env(url))
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr, refused.stderr

    migrated = run_cli("migrate", env=apart)
    assert migrated.returncode == 0, migrated.stderr
    token = cli_token(apart)
    with (
        ServerProcess(apart, log_path=tmp_path / "one.log") as first,
        ServerProcess(in_file, log_path=tmp_path / "two.log") as second,
    ):
        # A commit on either process reaches a stream on the other: the LISTEN
        # connection got the password intact too.
        assert_commits_cross(first, second, token)
    listed = run_cli("token", "list", env=in_file)
    assert listed.returncode == 0, listed.stderr
    # The percent-encoded form works as well, and is masked the same way.
    encoded = url.replace(f"{role}@", f"{role}:{quote(PASSWORD, safe='')}@")
    listed_too = run_cli("token", "list", env=serve_env(encoded))
    assert listed_too.returncode == 0, listed_too.stderr
    for output in (migrated, listed, listed_too, refused):
        assert _shown(output.stdout + output.stderr) == []
    for log in ("one.log", "two.log"):
        text = (tmp_path / log).read_text(encoding="utf-8")
        assert "Traceback" not in text
        assert "listener lost the database" not in text
        assert _shown(text) == []
