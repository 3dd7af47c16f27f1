"""Text as a terminal shows it: the characters that act instead of showing, made visible.

A note, a proposal, a reason or a name comes from a teammate, an agent or a server, and
everything in it is untrusted wherever it is shown. Printed raw, `ESC[2K` and cursor
moves erase or overwrite lines, a carriage return writes over the start of a line, and
a bidi override (U+202E) shows a line's end first: what a reviewer reads is not what
the text says. `visible` writes each such character as an escape instead (docs/users.md,
"What a terminal shows"), so every command that prints such text shows what it is.

Standard library only: the client prints with it; the key rules (`keys.py`) refuse
keys holding `BIDI_CONTROLS` for the same reason.
"""

from __future__ import annotations

import re

# The characters that reorder the text around them (Unicode's bidi embeddings,
# overrides, isolates and marks): invisible, they make a line read otherwise than it is
# stored ("Trojan Source").
BIDI_CONTROLS = frozenset(
    "\u061c"  # ARABIC LETTER MARK
    "\u200e\u200f"  # LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK
    "\u202a\u202b\u202c\u202d\u202e"  # embeddings, pop, overrides (U+202E: RLO)
    "\u2066\u2067\u2068\u2069"  # isolates and their pop
)

# What `visible` escapes: C0 controls but tab and newline (a carriage return only where
# it does not end a line: CRLF is a line end), DEL, C1 controls, and the bidi controls.
_ACTING = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "]|\r(?!\n)"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character but tab and newline (and the CR of a CRLF),
    and every bidi control, written as an escape: `\\x1b` for ESC, `\\x0d` for a lone
    carriage return, `\\x9b` for a C1 CSI, `\\u202e` for a right-to-left override.
    Everything else, other backslashes included, is left as it is. Text without such a
    character is returned unchanged (and fast: one regex search)."""
    if _ACTING.search(text) is None:
        return text
    return _ACTING.sub(_escape, text)
