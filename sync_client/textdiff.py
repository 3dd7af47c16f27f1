"""The one unified diff of two note texts that `diff`, `review` and `status` show (pure)."""

from __future__ import annotations

import difflib


def unified(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff, each line ending in a newline (a text without its last one too):
    the one diff `diff`, `review` and their JSON show.

    Lines end at a newline only, as a file's lines do: a lone carriage return, a form
    feed or U+2028 stays inside its line, where the printing makes it visible
    (`\\x0d`), instead of splitting the line as `str.splitlines` would."""
    lines = difflib.unified_diff(_newline_lines(old), _newline_lines(new), old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _newline_lines(text: str) -> list[str]:
    """`text`'s lines, each with its newline (the last one without, when it has none)."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]
