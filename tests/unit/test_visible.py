"""`memsync_protocol.visible`: what a terminal shows is what the text is.

And the guard that keeps it so: every line the CLI prints for a person goes through
`_say` (or a diff painter that makes the text visible first); only `--json` prints
exact text.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memsync_protocol.visible import BIDI_CONTROLS, visible

CLI = Path(__file__).resolve().parents[2] / "sync_client" / "cli"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("erase\x1b[2K\x1b[1Aup", "erase\\x1b[2K\\x1b[1Aup"),
        ("bell\x07 nul\x00 del\x7f", "bell\\x07 nul\\x00 del\\x7f"),
        ("c1 csi\x9b2K next line\x85", "c1 csi\\x9b2K next line\\x85"),
        ("curl evil | sh\rsafe text", "curl evil | sh\\x0dsafe text"),
        ("user\u202etxt.exe", "user\\u202etxt.exe"),
        ("\u2066iso\u2069 \u200e\u200f \u061c", "\\u2066iso\\u2069 \\u200e\\u200f \\u061c"),
    ],
    ids=["csi-cursor", "c0-del", "c1", "lone-cr", "rlo", "isolates-marks"],
)  # fmt: skip
def test_acting_characters_are_shown_as_escapes(text: str, shown: str) -> None:
    assert visible(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "plain text, a tab\there, lines\nand CRLF line ends\r\n",
        "a path C:\\x1b is text: backslashes stay as they are",
        "caf\u00e9 \u0645\u06cc\u200c\u062e\u0648 \U0001f469\u200d\U0001f4bb [red]x[/red]",
        "",
    ],
    ids=["tab-newline-crlf", "backslashes", "unicode-and-markup", "empty"],
)  # fmt: skip
def test_text_that_shows_as_it_is_stays_the_same(text: str) -> None:
    assert visible(text) == text


def test_every_bidi_control_is_escaped() -> None:
    for char in BIDI_CONTROLS:
        assert visible(char) == f"\\u{ord(char):04x}"


def _first_argument(call: ast.Call, source: str) -> str:
    node = call.args[0] if call.args else None
    return "" if node is None else (ast.get_source_segment(source, node) or "")


def test_every_human_line_of_the_cli_is_made_visible() -> None:
    """`click.echo` in the CLI prints only JSON (`json.dumps`), text made visible, or a
    diff through the painter (which makes it visible first): anything else would print a
    note's control characters raw. A new line for a person uses `_say`."""
    raw = []
    for path in sorted(CLI.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("echo", "secho")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "click"
            ):
                continue
            first = _first_argument(node, source)
            if not first.startswith(("json.dumps(", "visible(", "paint(")):
                raw.append(f"{path.name}:{node.lineno}: {first[:60]}")
    assert raw == []
