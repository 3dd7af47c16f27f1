"""The two facts of Claude Code's text that need nothing else: the index's name and how
long a text is as Claude Code counts it.

Apart from `memory_index` (which re-exports both) so that `memsync context`, which every
session start waits for, can cut the index without importing the index parser.
"""

from __future__ import annotations

INDEX_NAME = "MEMORY.md"


def utf16_length(text: str) -> int:
    """A text's length as Claude Code (JavaScript) counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2
