"""Token format, repo names and scopes."""

from __future__ import annotations

import pytest

from memsync_protocol.repos import InvalidRepoError, normalize_repo, normalize_scope
from memsync_protocol.tokens import is_well_formed_token, token_checksum
from sync_server.auth import mint_token, scope_allows


def test_minted_tokens_are_prefixed_checksummed_and_unique() -> None:
    tokens = {mint_token().secret for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        assert token.startswith("mst_")
        assert len(token) == 46
        assert is_well_formed_token(token)
        assert token_checksum(token[4:40]) == token[40:]


def test_a_changed_character_breaks_the_checksum() -> None:
    token = mint_token().secret
    flipped = token[:10] + ("a" if token[10] != "a" else "b") + token[11:]
    assert not is_well_formed_token(flipped)
    assert not is_well_formed_token(token[:-1])
    assert not is_well_formed_token("mst_" + "A" * 42)


def test_hash_at_rest_is_not_the_token() -> None:
    minted = mint_token()
    assert minted.secret not in minted.secret_hash
    assert minted.lookup_id == minted.secret[4:16]


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("acme/app", "acme/app"),
        ("Acme/My.App", "acme/my.app"),
        ("a_b/c-d", "a_b/c-d"),
        ("acme/.github", "acme/.github"),
        (".acme/x", ".acme/x"),
        ("Acme/.GitHub", "acme/.github"),
        ("acme/..x", "acme/..x"),
        ("acme/x..", "acme/x.."),
    ],
)
def test_repo_names_are_validated_and_case_folded(raw: str, normalized: str) -> None:
    assert normalize_repo(raw) == normalized


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "noslash",
        "a/b/c",
        "../x",
        "a/..",
        "./x",
        "a/.",
        "a/...",
        "./.",
        "a b/c",
        "/a",
        "a/",
        "-x/y",
        "a/" + "b" * 101,
    ],
)
def test_bad_repo_names_are_refused(raw: str) -> None:
    with pytest.raises(InvalidRepoError):
        normalize_repo(raw)


@pytest.mark.parametrize(
    ("pattern", "repo", "allowed"),
    [
        ("acme/app", "acme/app", True),
        ("acme/app", "acme/other", False),
        ("acme/*", "acme/other", True),
        ("acme/*", "acmex/other", False),
        ("*", "anyone/anything", True),
        ("acme/*", "acme/.github", True),
        ("Acme/*", "acme/.github", True),
        (".acme/*", ".acme/x", True),
        (".acme/*", "acme/x", False),
        ("acme/.github", "acme/.github", True),
        ("acme/.github", "acme/github", False),
    ],
)
def test_scopes(pattern: str, repo: str, allowed: bool) -> None:
    assert scope_allows(normalize_scope(pattern), repo) is allowed


@pytest.mark.parametrize(
    "pattern", ["", "*/*/x", "acme", "a/b*", "**", "./*", "../*", "acme/..", "*/x"]
)
def test_bad_scopes_are_refused(pattern: str) -> None:
    with pytest.raises(ValueError, match="repo pattern"):
        normalize_scope(pattern)
