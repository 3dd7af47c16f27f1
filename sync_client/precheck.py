"""Every rule the server applies to an entry, checked before it is sent (docs/protocol.md 4.5).

One file the server would refuse must never fail the push of the others, so the push
skips it with its reason instead. The rules are the server's own functions
(`key_problem`, `text_problem`), the entry size in UTF-8 bytes (the default limit, or
a lower one the server taught us), and the file/folder rule: no key may be a file
where another key needs a folder. Each skip is a row `{key, reason, detail, ...}`,
`detail` saying it in words. Nothing here touches the disk or the network.

    entry_problem(key, text, max_entry_bytes) -> row | None   key, text and size rules
    path_clashes(keys, server_keys, local_keys) -> {key: row}  file/folder clashes
    refusal_row(key, refusal, text) -> row                     a server's refusal, in words
    key_row(key), text_row(key, problem) -> row                a refused name or text
    too_many_row(key, max_entries) -> row                      no room left in the repo
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memsync_protocol.keys import MAX_ENTRY_BYTES, key_problem, text_problem

__all__ = [
    "effective_limit",
    "entry_problem",
    "key_row",
    "path_clashes",
    "refusal_row",
    "text_row",
    "too_large_row",
    "too_many_row",
]


def effective_limit(learned: int | None) -> int:
    """The entry size limit to apply: the default, or the server's when it is lower."""
    return MAX_ENTRY_BYTES if learned is None or learned <= 0 else min(learned, MAX_ENTRY_BYTES)


def too_large_row(key: str, size: int, max_bytes: int) -> dict[str, Any]:
    """The skip row of an entry over the size limit, with both numbers in words."""
    return {
        "key": key,
        "reason": "too-large",
        "size": size,
        "max_bytes": max_bytes,
        "detail": f"{size:,} bytes, the server allows {max_bytes:,}",
    }


def too_many_row(key: str, max_entries: int | None) -> dict[str, Any]:
    """The skip row of a new entry the repo has no room for, with the server's limit."""
    row: dict[str, Any] = {"key": key, "reason": "too-many-entries", "max_entries": max_entries}
    if max_entries is not None:
        row["detail"] = f"the server allows {max_entries:,} entries in this repo"
    return row


def key_row(key: str, problem: str | None = None) -> dict[str, Any]:
    """The skip row of a key the rules refuse; `problem` defaults to `key_problem`'s."""
    problem = problem or key_problem(key) or "is refused by the server"
    return {
        "key": key,
        "reason": "invalid-key",
        "problem": problem,
        "detail": f"the name {problem}",
    }


def text_row(key: str, problem: str) -> dict[str, Any]:
    """The skip row of a text the rules refuse (`text_problem`'s words in `problem`)."""
    return {
        "key": key,
        "reason": "invalid-text",
        "problem": problem,
        "detail": f"the text {problem}",
    }


def entry_problem(
    key: str, text: str, *, max_entry_bytes: int = MAX_ENTRY_BYTES
) -> dict[str, Any] | None:
    """Why the server would refuse this one entry (as a skip row), or None."""
    if key_problem(key) is not None:
        return key_row(key)
    problem = text_problem(text)
    if problem is not None:
        return text_row(key, problem)
    size = len(text.encode("utf-8"))
    if size > max_entry_bytes:
        return too_large_row(key, size, max_entry_bytes)
    return None


def _clash_row(key: str, other: str | None, where: str) -> dict[str, Any]:
    if other is None:
        detail = f"{key} would be both a file and a folder {where}"
    elif other.startswith(key + "/"):
        detail = f"{key} is a file here but {key}/ is a folder {where}"
    else:
        detail = f"{key} needs a folder {other}/ but {other} is a file {where}"
    return {"key": key, "reason": "path-clash", "clashes_with": other, "detail": detail}


def path_clashes(
    keys: Iterable[str], server_keys: Iterable[str], local_keys: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """The `keys` that would be a file where another key needs a folder, or the reverse.

    `server_keys` are the keys the server is known to hold (the bases, or a hashes
    view), `local_keys` every syncable local key; `keys` (the ones about to be sent)
    are compared with both. The row names the other key and where it is.
    """
    where: dict[str, str] = {key: "here too" for key in local_keys}
    where.update((key, "on the server") for key in server_keys)
    # Each folder the known keys need, with the first key (sorted) that needs it.
    folders: dict[str, str] = {}
    for other in sorted(where):
        segments = other.split("/")
        for end in range(1, len(segments)):
            folders.setdefault("/".join(segments[:end]), other)
    clashes: dict[str, dict[str, Any]] = {}
    for key in sorted(set(keys)):
        inside = folders.get(key)
        if inside is not None:
            clashes[key] = _clash_row(key, inside, where[inside])
            continue
        segments = key.split("/")
        for end in range(1, len(segments)):
            parent = "/".join(segments[:end])
            if parent in where:
                clashes[key] = _clash_row(key, parent, where[parent])
                break
    return clashes


def refusal_row(key: str, refusal: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A server's refusal of one entry (`EntriesRefused.refusals[key]`) as a skip row."""
    reason = refusal.get("reason")
    if reason == "too-large":
        return too_large_row(key, len(text.encode("utf-8")), int(refusal.get("max_bytes") or 0))
    if reason == "path-clash":
        other = refusal.get("clashes_with")
        return _clash_row(key, other if isinstance(other, str) else None, "on the server")
    problem = refusal.get("problem")
    if reason == "invalid-text":
        return text_row(key, str(problem or "cannot be stored by the server"))
    return key_row(key, str(problem or "is refused by the server"))
