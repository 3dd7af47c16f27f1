"""Checksums exactly as docs/protocol.md section 2 defines them."""

from __future__ import annotations

import hashlib

from memsync_protocol.checksums import (
    EMPTY_REPO_CHECKSUM,
    entry_checksum,
    is_checksum,
    parse_etag_list,
    repo_checksum,
)


def test_entry_checksum_is_sha256_of_utf8() -> None:
    text = "Décision: PostgreSQL 🐘\n"
    assert entry_checksum(text) == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_repo_checksum_orders_keys_by_utf8_bytes() -> None:
    sums = {"b.md": entry_checksum("b"), "a.md": entry_checksum("a"), "é.md": entry_checksum("e")}
    manual = hashlib.sha256()
    for key in sorted(sums, key=lambda key: key.encode("utf-8")):
        manual.update(f"{key}\n{sums[key]}\n".encode())
    assert repo_checksum(sums) == "sha256:" + manual.hexdigest()
    assert repo_checksum(list(reversed(sums.items()))) == repo_checksum(sums)


def test_empty_repo_checksum() -> None:
    assert repo_checksum({}) == EMPTY_REPO_CHECKSUM
    assert "sha256:" + hashlib.sha256(b"").hexdigest() == EMPTY_REPO_CHECKSUM


def test_is_checksum() -> None:
    assert is_checksum(entry_checksum("x"))
    assert not is_checksum("sha256:" + "A" * 64)
    assert not is_checksum("md5:" + "0" * 64)
    assert not is_checksum(None)


def test_parse_etag_list() -> None:
    assert parse_etag_list('"a", W/"b" ,c') == ["a", "b", "c"]
    assert parse_etag_list("*") == ["*"]
    assert parse_etag_list(" , ") == []
