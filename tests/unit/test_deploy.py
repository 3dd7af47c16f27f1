"""The compose deployment: every server setting reaches the servers, and the check script
behaves as CI needs (fails there when docker-compose is missing, skips elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sync_server.config import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_passed_to_the_servers(field: str) -> None:
    assert f"\n  MEMSYNC_{field.upper()}:" in COMPOSE


def _check(path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "check-compose")],
        env={"PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_check_compose_without_docker_compose(tmp_path: Path) -> None:
    (tmp_path / "dirname").symlink_to(shutil.which("dirname") or "/usr/bin/dirname")
    skipped = _check(str(tmp_path))
    assert skipped.returncode == 0
    assert "skipping" in skipped.stderr
    failed = _check(str(tmp_path), CI="true")
    assert failed.returncode == 1
    assert "not installed" in failed.stderr


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose not installed")
def test_check_compose_validates_the_file() -> None:
    result = _check(os.environ.get("PATH", ""), CI="true")
    assert result.returncode == 0, result.stderr
    assert "docker-compose.yml is valid" in result.stdout
