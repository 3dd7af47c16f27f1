"""`memsync scan` as a user runs it: exit codes, table, JSON, and no secret printed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sync_server.auth import mint_token


def memsync(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("memsync")
    return subprocess.run(
        [str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_clean_folder_exits_0(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Decision\n\nWe rotate tokens monthly.\n")
    result = memsync("scan", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0
    assert "no secrets found" in result.stdout


def test_secret_exits_3_with_path_line_and_label_never_the_value(tmp_path: Path) -> None:
    token = mint_token().secret
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "bot.md").write_text(f"# Bot\n\nuse {token}\n")
    result = memsync("scan", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 3
    assert "bot.md" in result.stdout
    assert token not in result.stdout + result.stderr
    assert token[4:16] not in result.stdout + result.stderr
    as_json = memsync("scan", "--json", str(tmp_path / "notes" / "bot.md"), cwd=tmp_path)
    assert as_json.returncode == 3
    rows = json.loads(as_json.stdout)["findings"]
    assert len(rows) == 1
    assert rows[0]["path"].endswith("bot.md")
    assert rows[0]["line"] == 3
    assert set(rows[0]) == {"path", "line", "rule", "label"}
    assert token not in as_json.stdout


def test_piped_output_is_one_whole_line_per_finding(tmp_path: Path) -> None:
    """Not a table cut to the pipe's width: a long path stays whole, for grep and editors."""
    token = mint_token().secret
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "runbooks"
    deep.mkdir(parents=True)
    (deep / "bot.md").write_text(f"# Bot\n\nuse {token}\n")
    result = memsync("scan", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 3
    assert result.stdout.splitlines() == [
        f"{deep / 'bot.md'}:3: memsync token (memsync-token)",
    ]
    assert token[4:16] not in result.stdout + result.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert memsync("scan", cwd=tmp_path).returncode == 2
    missing = memsync("scan", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
