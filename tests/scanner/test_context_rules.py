"""The context rules: an AWS secret access key beside its key id, a password in a
database or broker URL. Found only where the surrounding text leaves no doubt."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from scanner import redact, scan_text
from scanner.engine import detect_secrets_scan_with_memsync_rules
from tests.scanner.corpus import pem_line

AWS_SECRET = "aws-secret-access-key"
AWS_KEY_ID = "aws-access-key-id"
URL_PASSWORD = "database-url-password"

_rng = random.Random(12)


def key_id(prefix: str = "AKIA") -> str:
    return prefix + "".join(_rng.choices(string.ascii_uppercase + "234567", k=16))


def aws_secret() -> str:
    """40 characters of base64 with both cases, a digit and a `/`."""
    alphabet = string.ascii_letters + string.digits + "+"
    body = "".join(_rng.choices(alphabet, k=36))
    return "Ab3" + body[:18] + "/" + body[18:]


def url_password() -> str:
    return "".join(_rng.choices(string.ascii_letters + string.digits, k=20)) + "-9Qz"


def rules_by_line(text: str) -> list[tuple[int, str]]:
    return [(finding.line, finding.rule) for finding in scan_text(text)]


# ---------------------------------------------------------------------------------------
# AWS secret access key


def test_a_credentials_file_section_holds_both_halves() -> None:
    kid, secret = key_id(), aws_secret()
    text = (
        f"# Staging\n\n```ini\n[default]\naws_access_key_id = {kid}\n"
        f"aws_secret_access_key = {secret}\nregion = eu-west-1\n```\n"
    )
    assert rules_by_line(text) == [(5, AWS_KEY_ID), (6, AWS_SECRET)]


@pytest.mark.parametrize(
    "block",
    [
        "AWS_ACCESS_KEY_ID={kid}\nAWS_DEFAULT_REGION=us-east-1\nAWS_SECRET_ACCESS_KEY={secret}",
        "aws:\n  access_key_id: {kid}\n  secret_access_key: '{secret}'",
        '{{\n  "Credentials": {{\n    "AccessKeyId": "{kid}",\n    "SecretAccessKey": "{secret}",'
        '\n    "Expiration": "2026-01-01T00:00:00Z"\n  }}\n}}',
        "Access key ID,Secret access key\n{kid},{secret}",
        "aws_secret_access_key={secret}\naws_access_key_id={kid}",
    ],
    ids=["env", "yaml", "sts-json", "csv", "secret-first"],
)
def test_the_secret_is_found_in_the_same_block_as_the_key_id(block: str) -> None:
    kid, secret = key_id("ASIA"), aws_secret()
    text = "Notes from the incident:\n\n" + block.format(kid=kid, secret=secret) + "\n\nDone.\n"
    secret_line = text[: text.index(secret)].count("\n") + 1
    assert (secret_line, AWS_SECRET) in rules_by_line(text)
    assert secret not in repr(scan_text(text))


@pytest.mark.parametrize("gap", ["\n\n", "\n   \n", "\n\n" + "A paragraph.\n\n"])
def test_a_key_id_in_another_block_is_no_context(gap: str) -> None:
    kid, secret = key_id(), aws_secret()
    text = f"The key id is {kid}.{gap}Later, about something else: {secret}\n"
    assert rules_by_line(text) == [(1, AWS_KEY_ID)]
    # The same two lines with no blank line between: one block.
    assert (2, AWS_SECRET) in rules_by_line(f"The key id is {kid}.\nAnd: {secret}\n")


def test_without_a_key_id_a_forty_character_string_is_nothing() -> None:
    assert scan_text(f"aws_secret_access_key = {aws_secret()}\n") == []


@pytest.mark.parametrize(
    "candidate",
    [
        "".join(_rng.choices("0123456789abcdef", k=40)),  # a git SHA
        "".join(_rng.choices("0123456789ABCDEF", k=40)),
        "".join(_rng.choices(string.ascii_lowercase + string.digits, k=40)),  # no upper case
        "".join(_rng.choices(string.ascii_letters, k=40)),  # no digit
        "src/billing/Handlers/v2/RetryPolicy/Test",  # a path of words
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",  # the documentation's stand-in
        "Ab1" + "Z" * 37,
        "abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    ],
    ids=["sha", "upper-hex", "no-upper", "no-digit", "path", "example", "run", "sequence"],
)
def test_strings_that_are_not_secrets_beside_a_key_id(candidate: str) -> None:
    assert len(candidate) == 40
    text = f"aws_access_key_id = {key_id()}\nvalue = {candidate}\n"
    assert rules_by_line(text) == [(1, AWS_KEY_ID)]


@pytest.mark.parametrize("extra", ["", "a", "ab"], ids=["39", "40-in-41", "40-in-42"])
def test_only_exactly_forty_characters(extra: str) -> None:
    secret = aws_secret()
    candidate = secret[:39] if not extra else secret + extra
    text = f"aws_access_key_id = {key_id()}\naws_secret_access_key = {candidate}\n"
    assert rules_by_line(text) == [(1, AWS_KEY_ID)]


def test_base64_in_a_pem_block_beside_a_key_id_is_not_a_secret() -> None:
    last_line = aws_secret()
    lines = ["".join(_rng.choices(string.ascii_letters + string.digits, k=64)) for _ in range(3)]
    certificate = [pem_line("BEGIN", "CERTIFICATE"), *lines, last_line]
    certificate.append(pem_line("END", "CERTIFICATE"))
    text = "\n".join([f"aws_access_key_id = {key_id()}", *certificate]) + "\n"
    assert rules_by_line(text) == [(1, AWS_KEY_ID)]
    # The same line after the block (and beside a key id) is found.
    after = text + f"{key_id()}\n{last_line}\n"
    assert (after.count("\n"), AWS_SECRET) in rules_by_line(after)


def test_redact_removes_both_halves_and_keeps_the_rest() -> None:
    kid, secret = key_id(), aws_secret()
    text = f"[ci]\naws_access_key_id = {kid}\naws_secret_access_key = {secret}\n"
    assert redact(text) == (
        f"[ci]\naws_access_key_id = [REDACTED:{AWS_KEY_ID}]\n"
        f"aws_secret_access_key = [REDACTED:{AWS_SECRET}]\n"
    )


def test_the_detect_secrets_plugin_sees_one_line(tmp_path: Path) -> None:
    kid, secret, other_kid, other_secret = key_id(), aws_secret(), key_id(), aws_secret()
    note = tmp_path / "note.md"
    note.write_text(f"# Keys\n\n{kid},{secret}\n\nid {other_kid}\nsecret {other_secret}\n")
    found = detect_secrets_scan_with_memsync_rules(note)
    secret_lines = [line for line, kind in found if "secret access key" in kind.lower()]
    assert secret_lines == [3]  # the CSV row; line 6 has no key id on its own line
    assert [line for line, kind in found if "access key id" in kind.lower()] == [3, 5]


# ---------------------------------------------------------------------------------------
# Passwords in database and broker URLs


@pytest.mark.parametrize(
    "scheme",
    [
        "postgres",
        "postgresql",
        "postgresql+psycopg",
        "mysql",
        "mysql+pymysql",
        "jdbc:mysql",
        "mariadb",
        "mongodb",
        "mongodb+srv",
        "redis",
        "rediss",
        "amqp",
        "amqps",
        "mssql",
        "sqlserver",
        "clickhouse",
        "cockroachdb",
    ],
)
def test_a_password_in_a_database_or_broker_url_is_found(scheme: str) -> None:
    password = url_password()
    text = f"# DB\n\nprod: {scheme}://ledger_rw:{password}@db.internal:5432/ledger\n"
    assert rules_by_line(text) == [(3, URL_PASSWORD)]
    assert password not in repr(scan_text(text))


def test_redis_with_no_user_and_a_password_with_an_at_sign() -> None:
    password = url_password()
    assert rules_by_line(f"REDIS_URL=redis://:{password}@cache:6379/0\n") == [(1, URL_PASSWORD)]
    at_sign = password[:10] + "@" + password[10:]
    text = f"mongodb://app:{at_sign}@mongo-0:27017/notes\n"
    assert redact(text) == f"mongodb://app:[REDACTED:{URL_PASSWORD}]@mongo-0:27017/notes\n"


def test_redact_removes_only_the_password() -> None:
    password = url_password()
    text = f"DATABASE_URL=postgresql+psycopg://ledger_rw:{password}@db.internal:5432/ledger?ssl=1\n"
    assert redact(text) == (
        f"DATABASE_URL=postgresql+psycopg://ledger_rw:[REDACTED:{URL_PASSWORD}]"
        "@db.internal:5432/ledger?ssl=1\n"
    )


PLACEHOLDERS = [
    "password",
    "pass",
    "passwd",
    "secret",
    "changeme",
    "change_me",
    "${DB_PASSWORD}",
    "$DB_PASSWORD",
    "%(password)s",
    "{{ db_password }}",
    "{{db_password}}",
    "<password>",
    "<...>",
    "[password]",
    "xxx",
    "xxxxxxxxxxxx",
    "***",
    "************",
    "aaaaaaaaaaaa",
    "abababababab",
    "ledger_rw",  # the user name again
    "example",
    "test",
    "dummy",
    "postgres",
    "root",
    "admin",
    # and similar: the same words with digits or in a longer stand-in
    "Password1",
    "P@ssw0rd2024",
    "Adm1n-2024x",
    "l3tm31nN0w",
    "mysecretpassword",
    "ChangeMe2024!",
    "Example2024x",
    "test1234",
    "dummy-value-1",
    "postgres123",
    "root2024!",
    "Admin12345",
    "ledger_rw2024",
    "%24%7BDB_PASSWORD%7D",  # ${DB_PASSWORD}, percent-encoded
    "DB_PASSWORD",
    "12345678",
    "tiger",
    "hunter2",
    # seen in SDK docs and tests (the big-corpus report): an ini file's `%%` escapes,
    # and separators inside the word
    "P%%40ssw%%25rd",
    "p,ass@word",
]


@pytest.mark.parametrize("password", PLACEHOLDERS)
def test_a_placeholder_password_is_not_a_finding(password: str) -> None:
    text = f"DATABASE_URL=postgresql://ledger_rw:{password}@db.internal:5432/ledger\n"
    assert scan_text(text) == []


@pytest.mark.parametrize("host", ["db.example.com", "cluster0.example.mongodb.net", "your-host"])
def test_a_url_to_a_documentation_host_is_an_example(host: str) -> None:
    text = f"mongodb+srv://notes:{url_password()}@{host}/notes?retryWrites=true\n"
    assert scan_text(text) == []
    assert rules_by_line(text.replace(host, "mongo-0.internal")) == [(1, URL_PASSWORD)]


def test_urls_without_a_password_are_nothing() -> None:
    text = "\n".join(
        [
            "postgres://db.internal:5432/app",
            "postgres://app@db.internal/app",
            "mongodb://mongo-0:27017,mongo-1:27017/?replicaSet=rs0",
            "redis://cache:6379/0",
            "sqlserver://sql.internal:1433;databaseName=app",
            "clickhouse://default:@clickhouse:8123/default",
            f"https://ledger_rw:{url_password()}.example.com/docs",
            f"postgres://app:{url_password()}",
        ]
    )
    assert scan_text(text) == []
