"""Repo names (`owner/name`) and token scopes (`owner/name`, `owner/*`, `*`).

Both sides fold a repo name the same way: the client to find the repo of a checkout,
the server to validate the `repo` query parameter (which it answers with a 400).
"""

from __future__ import annotations

import re

# A part of `owner/name` as git hosts allow it: letters, digits, `.`, `_`, `-`, a leading
# dot included (`acme/.github`). Never a part made only of dots (`.`, `..`), checked
# apart, nor a leading `-`, which a command line would read as an option.
_REPO_SEGMENT = r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,99}"
REPO_PATTERN = re.compile(rf"{_REPO_SEGMENT}/{_REPO_SEGMENT}")
SCOPE_PATTERN = re.compile(rf"\*|{_REPO_SEGMENT}/(\*|{_REPO_SEGMENT})")
REPO_RULE = "repo must be owner/name (letters, digits, '.', '_', '-')"


class InvalidRepoError(ValueError):
    """A repo name neither side accepts; the message is `REPO_RULE`."""

    def __init__(self) -> None:
        super().__init__(REPO_RULE)


def _only_dots(parts: list[str]) -> bool:
    """Whether a part is `.`, `..` or any other run of dots alone (a path, not a name)."""
    return any(part.strip(".") == "" for part in parts)


def normalize_repo(value: str) -> str:
    """Validate an `owner/name` repo and fold its case (hosts treat names case-blind).

    A leading dot is a name like any other (`acme/.github`, `.acme/x`). Raises
    `InvalidRepoError` for anything else: more or fewer segments, dots-only names,
    spaces, or characters a git host would not allow.
    """
    if not REPO_PATTERN.fullmatch(value) or _only_dots(value.split("/")):
        raise InvalidRepoError()
    return value.lower()


def normalize_scope(pattern: str) -> str:
    """Validate a token's repo pattern: `owner/name`, `owner/*`, or `*` (every repo).

    Raises `ValueError` for anything else.
    """
    if not SCOPE_PATTERN.fullmatch(pattern) or (pattern != "*" and _only_dots(pattern.split("/"))):
        raise ValueError("repo pattern must be owner/name, owner/* or *")
    return pattern.lower()
