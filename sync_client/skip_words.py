"""A skipped (or refused) file's reason in words, with the limit and the fix.

One home for the words, so the CLI's lines and the watcher's log say the same thing.
"""

from __future__ import annotations

from typing import Any


def skip_words(row: dict[str, Any]) -> str:
    """One skipped file's reason in words, with the limit and the fix where they apply:
    `too large: 312,004 bytes, the server allows 250,000; shorten or split it`."""
    reason = row["reason"]
    detail = row.get("detail")
    if reason == "secret":
        where = f" on line {row['line']}" if row.get("line") else ""
        return f"contains a secret ({row.get('label') or row.get('rule')}){where}: remove it"
    if reason == "too-large":
        if row.get("size") and row.get("max_bytes"):
            detail = f"{row['size']:,} bytes, the server allows {row['max_bytes']:,}"
        return f"too large: {detail or 'over the server limit'}; shorten or split it"
    if reason == "binary":
        return (
            "a binary file, not text: memsync syncs text notes; move it out or list it in "
            ".memsyncignore"
        )
    if reason == "not-utf8":
        return "not UTF-8 text; save it as UTF-8"
    if reason == "too-many-entries":
        limit = row.get("max_entries")
        allows = f"the server allows {limit:,}" if isinstance(limit, int) else "no room left"
        return f"too many entries: {allows}; remove notes with `memsync rm`"
    if reason == "too-many-proposals":
        limit = row.get("max")
        count = f"{limit:,} proposals" if isinstance(limit, int) and limit > 0 else "the most"
        return (
            f"not proposed: {count} of yours already wait for review in this repo; "
            "it is sent once a reviewer decides some and the file changes"
        )
    if reason == "invalid-key":
        problem = row.get("problem") or detail or "is refused by the server"
        name = problem if problem.startswith("the name") else f"the name {problem}"
        if "\\x" in row["key"] and "UTF-8" in problem:
            # The key shows the bytes as `\xNN` (`local.shown_key`), as bash's $'...' reads them.
            quoted = str(row["key"]).replace("'", "\\'")
            return f"invalid name: {name}; rename it (in a shell: mv $'{quoted}' NEW-NAME)"
        return f"invalid name: {name}; rename it"
    if reason == "invalid-text":
        text = detail or "the text cannot be stored by the server"
        return f"invalid text: {text}; remove that character"
    if reason == "path-clash":
        other = row.get("clashes_with")
        clash = f"file/folder clash with {other}" if other else "file/folder clash"
        return f"{clash}: {detail}; rename one of them" if detail else f"{clash}; rename one"
    words = {
        "symlink": "a symbolic link (memsync never follows links)",
        "not-a-regular-file": "not a regular file (a FIFO, socket or device)",
        "duplicate-name": "the decomposed (NFD) spelling of a name that also exists in NFC; "
        "remove one of the two",
        "unreadable": "cannot be read (permission denied); fix its permissions",
        "reserved-name": "a name memsync keeps for itself; rename it",
        "hidden": "hidden (its name starts with `.`)",
        "editor-leftover": "an editor's or a sync tool's temporary or leftover file",
        "ignored": "listed in .memsyncignore",
    }
    if reason in words:
        return words[reason]
    return f"{str(reason).replace('-', ' ')}: {detail}" if detail else str(reason)
