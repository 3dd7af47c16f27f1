"""Checksums exactly as docs/protocol.md section 2 defines them, computed here by hand."""

from __future__ import annotations

import hashlib

import pytest

from memsync_protocol.checksums import (
    EMPTY_REPO_CHECKSUM,
    REPO_CHECKSUM_VERSION,
    entry_checksum,
    is_checksum,
    matches_any_definition,
    parse_etag_list,
    repo_checksum,
)

SUMS = {"b.md": entry_checksum("b"), "a.md": entry_checksum("a"), "é.md": entry_checksum("e")}


def test_entry_checksum_is_sha256_of_utf8() -> None:
    text = "Décision: PostgreSQL 🐘\n"
    assert entry_checksum(text) == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_definition_1_hashes_every_line_in_utf8_key_order() -> None:
    manual = hashlib.sha256()
    for key in sorted(SUMS, key=lambda key: key.encode("utf-8")):
        manual.update(f"{key}\n{SUMS[key]}\n".encode())
    assert repo_checksum(SUMS, 1) == "sha256:" + manual.hexdigest()
    assert repo_checksum(list(reversed(SUMS.items())), 1) == repo_checksum(SUMS, 1)


def test_definition_2_hashes_256_bucket_digests() -> None:
    buckets: list[list[str]] = [[] for _ in range(256)]
    for key in SUMS:
        buckets[hashlib.sha256(key.encode("utf-8")).digest()[0]].append(key)
    top = hashlib.sha256()
    for keys in buckets:
        lines = "".join(f"{key}\n{SUMS[key]}\n" for key in sorted(keys, key=str.encode))
        top.update(hashlib.sha256(lines.encode("utf-8")).digest())
    assert repo_checksum(SUMS, 2) == "sha256:" + top.hexdigest()
    assert repo_checksum(list(reversed(SUMS.items()))) == repo_checksum(SUMS)
    assert REPO_CHECKSUM_VERSION == 2
    assert repo_checksum(SUMS) == repo_checksum(SUMS, 2)


def test_the_documented_examples() -> None:
    # docs/protocol.md section 2: a repo holding only `x.md` = `hi`.
    one = {"x.md": entry_checksum("hi")}
    assert repo_checksum(one, 1) == (
        "sha256:280aa069243b70ff23e1b9ea25c75236352e541e91d7d2dd35fd38fbc2b09c94"
    )
    assert repo_checksum(one, 2) == (
        "sha256:e7823be318824def9a7e8bc4484434d6c447b1e67319f4662656bc8316f2d5d6"
    )


def test_an_empty_repo_has_the_same_checksum_under_both_definitions() -> None:
    assert repo_checksum({}, 1) == repo_checksum({}, 2) == EMPTY_REPO_CHECKSUM
    assert "sha256:" + hashlib.sha256(b"").hexdigest() == EMPTY_REPO_CHECKSUM


def test_an_unknown_definition_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown repo checksum version 3"):
        repo_checksum(SUMS, 3)


def test_matches_any_definition() -> None:
    assert matches_any_definition(repo_checksum(SUMS, 1), SUMS)
    assert matches_any_definition(repo_checksum(SUMS, 2), SUMS)
    assert not matches_any_definition(repo_checksum({"a.md": SUMS["a.md"]}), SUMS)
    assert not matches_any_definition(None, SUMS)


def test_is_checksum() -> None:
    assert is_checksum(entry_checksum("x"))
    assert not is_checksum("sha256:" + "A" * 64)
    assert not is_checksum("md5:" + "0" * 64)
    assert not is_checksum(None)


def test_parse_etag_list() -> None:
    assert parse_etag_list('"a", W/"b" ,c') == ["a", "b", "c"]
    assert parse_etag_list("*") == ["*"]
    assert parse_etag_list(" , ") == []
