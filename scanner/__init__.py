"""memsync's secret scanner: high-confidence rules, fast, never a false alarm on prose.

    scan_text(text) -> list[Finding]        rule id, label and line; never the secret
    scan_path(path) -> Iterator[(Path, Finding)]   a file, or a folder recursively
    check_write(path, text)                 raises SecretRefused before an agent writes
    redact(text) -> str                     the text with each secret replaced

Used before every upload, by `memsync scan PATH`, and by agent tooling through
`check_write`. Nothing here sends a candidate anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scanner.engine import Finding

__all__ = ["Finding", "SecretRefused", "check_write", "redact", "scan_path", "scan_text"]

# Larger files are not notes; they are skipped by `scan_path` (reported as unreadable).
MAX_SCAN_BYTES = 50 * 1024 * 1024


# The engine (and the rules' Aho-Corasick prefilter) is loaded by the first scan, not with
# this package, so a command that scans nothing (a no-op push) never pays for it; a rule's
# regex is compiled only when its prefix first occurs in a scanned text.


def scan_text(text: str) -> list[Finding]:
    """Findings in `text`, ordered by line then rule; one per rule and line."""
    from scanner.engine import scan_text as engine_scan_text

    return engine_scan_text(text)


def redact(text: str, replacement: str = "[REDACTED:{rule}]") -> str:
    """`text` with every secret replaced (by default with `[REDACTED:<rule id>]`)."""
    from scanner.engine import redact as engine_redact

    return engine_redact(text, replacement)


def __getattr__(name: str) -> Any:
    """`scanner.Finding`, loaded with the engine on first use."""
    if name == "Finding":
        from scanner.engine import Finding

        return Finding
    raise AttributeError(f"module 'scanner' has no attribute {name!r}")


class SecretRefused(ValueError):
    """A write refused because its text contains a secret; names rule labels only."""

    def __init__(self, path: str, findings: list[Finding]) -> None:
        labels = ", ".join(dict.fromkeys(finding.label for finding in findings))
        super().__init__(
            f"refusing to write {path}: it contains a secret ({labels}); remove it and write again"
        )
        self.path = path
        self.findings = findings


def check_write(path: str | os.PathLike[str], text: str) -> None:
    """Raise `SecretRefused` if `text` holds a secret; return quietly otherwise.

    For agent tooling that is about to write `text` to `path` in a team dir. There is
    no inline way to bypass it: an agent could write the bypass too.
    """
    findings = scan_text(text)
    if findings:
        raise SecretRefused(os.fspath(path), findings)


def _files(root: Path) -> Iterator[Path]:
    """Regular files under `root` (or `root` itself), sorted; symlinks never followed."""
    if root.is_file() and not root.is_symlink():
        yield root
        return
    for directory, subdirectories, names in os.walk(root, followlinks=False):
        subdirectories.sort()
        for name in sorted(names):
            candidate = Path(directory, name)
            if candidate.is_file() and not candidate.is_symlink():
                yield candidate


def scan_path(path: str | os.PathLike[str]) -> Iterator[tuple[Path, Finding]]:
    """Findings in a file, or in every regular file under a folder.

    Text is read as UTF-8 (undecodable bytes replaced, so a credential in a mostly-text
    file is still found); files with NUL bytes (binary) or over `MAX_SCAN_BYTES` are
    skipped. Raises OSError for a file that cannot be read.
    """
    for file in _files(Path(path)):
        if file.stat().st_size > MAX_SCAN_BYTES:
            continue
        data = file.read_bytes()
        if b"\x00" in data[:8192]:
            continue
        for finding in scan_text(data.decode("utf-8", errors="replace")):
            yield file, finding
