"""`memsync-server` says the same words as recorded: every command's help.

Recorded when the token and person commands moved out of `sync_server/cli.py` (into
`cli_tokens.py`), so a later move that changes one word, option or exit-code line
fails here. Rerecord on purpose only: `MEMSYNC_RECORD_GOLDEN=1 pytest` this file.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sync_server.cli import main
from tests.unit.test_cli_golden import GOLDEN, RECORD, command_words

NAMES = [(), *command_words(main)]


def _golden_name(words: tuple[str, ...]) -> str:
    return "server-help-" + "-".join(("memsync-server", *words))


@pytest.mark.parametrize("words", NAMES, ids=lambda words: " ".join(words) or "memsync-server")
def test_server_help_is_as_recorded(words: tuple[str, ...]) -> None:
    result = CliRunner().invoke(
        main, [*words, "--help"], prog_name="memsync-server", env={}, terminal_width=80
    )
    seen = f"exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    path = GOLDEN / f"{_golden_name(words)}.txt"
    if RECORD:
        path.write_text(seen, encoding="utf-8")
    assert seen == path.read_text(encoding="utf-8"), path.name


def test_no_recorded_server_help_is_left_over() -> None:
    recorded = {path.stem for path in GOLDEN.glob("server-help-*.txt")}
    assert recorded == {_golden_name(words) for words in NAMES}
