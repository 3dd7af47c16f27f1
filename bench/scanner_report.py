"""Every finding of memsync's scanner on the big honest corpus, by rule, masked.

Scans each file of the corpus cache (`bench.fetch_corpus`) with `scan_text`, as a push
would, and prints:

- the size scanned and the time it took;
- a table of findings by rule: rule id, findings, files;
- for review, each finding: its file (relative to the cache), line, rule and a masked
  excerpt of its line, where every secret keeps only its first 4 and last 2
  characters (`AKIA**************Q7`), so the output can be pasted into docs.

    .venv/bin/python -m bench.scanner_report [--cache DIR] [--context 40]

Each finding must be a credential-shaped fixture (a test key, a PEM private key in a
test file); a finding in an honest sentence, an identifier, a hash or a URL is a false
positive, to be fixed in `scanner/rules.py` with a hard-negative test.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench._table import markdown_table
from bench.fetch_corpus import DEFAULT_CACHE
from scanner import scan_text
from scanner.engine import find_spans

# Longer secrets (a PEM block) show this many `*` at most, then their length.
MAX_STARS = 16


@dataclass(frozen=True)
class Reported:
    """One finding with what a reviewer needs to judge it, the secret masked."""

    path: str
    line: int
    rule: str
    excerpt: str


def corpus_files(cache: Path) -> Iterator[Path]:
    """Every text file of the corpus, sorted (the manifest is not corpus)."""
    for path in sorted(cache.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.parent != cache:
            yield path


def mask(secret: str) -> str:
    """The first 4 and last 2 characters of `secret`, the rest as `*` (capped).

    A PEM block keeps its BEGIN line instead (its label, not secret).
    """
    if secret.startswith("-----BEGIN"):
        header = secret[: secret.index("-----", len("-----BEGIN")) + 5]
        return f"{header}{'*' * MAX_STARS}({len(secret)} chars)"
    if len(secret) <= 8:
        return "*" * len(secret)
    hidden = len(secret) - 6
    stars = "*" * min(hidden, MAX_STARS)
    suffix = "" if hidden <= MAX_STARS else f"({len(secret)} chars)"
    return f"{secret[:4]}{stars}{secret[-2:]}{suffix}".replace("\n", "\\n")


def masked_line(text: str, spans: list[tuple[str, int, int]], start: int, context: int) -> str:
    """The line holding `start`, every secret on it masked, cut to `context` each side."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line_end = len(text) if line_end == -1 else line_end
    pieces: list[str] = []
    position = line_start
    for _, span_start, span_end in spans:
        if span_end <= line_start or span_start >= line_end or span_start < position:
            continue
        pieces.append(text[position:span_start])
        pieces.append(mask(text[span_start:span_end]))
        position = span_end
    if position < line_end:
        pieces.append(text[position:line_end])
    # Cut around the finding: `context` characters before it, and as many after it.
    offset = start - line_start
    joined = "".join(pieces)
    left = max(0, offset - context)
    right = min(len(joined), offset + context + 40)
    excerpt = joined[left:right].strip()
    return ("…" if left else "") + excerpt + ("…" if right < len(joined) else "")


def report_file(path: Path, cache: Path, context: int) -> list[Reported]:
    """The findings of one file, each with its masked excerpt."""
    text = path.read_text(encoding="utf-8", errors="replace")
    findings = scan_text(text)
    if not findings:
        return []
    spans = find_spans(text)
    reported = []
    for finding in findings:
        start = next(
            span_start
            for rule, span_start, _ in spans
            if rule == finding.rule and text.count("\n", 0, span_start) + 1 == finding.line
        )
        excerpt = masked_line(text, spans, start, context)
        relative = path.relative_to(cache).as_posix()
        reported.append(Reported(relative, finding.line, finding.rule, excerpt))
    return reported


def main() -> None:
    """Scan the cache, print the table by rule and every finding, masked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--context", type=int, default=40, help="characters shown before")
    arguments = parser.parse_args()
    cache: Path = arguments.cache.expanduser().resolve()
    if not cache.is_dir():
        raise SystemExit(f"no corpus in {cache}: run `python -m bench.fetch_corpus` first")

    started = time.perf_counter()
    size = 0
    files = 0
    reported: list[Reported] = []
    for path in corpus_files(cache):
        size += path.stat().st_size
        files += 1
        reported += report_file(path, cache, arguments.context)
    seconds = time.perf_counter() - started

    by_rule: dict[str, list[Reported]] = defaultdict(list)
    for finding in reported:
        by_rule[finding.rule].append(finding)
    print(f"{files} files, {size / 1e6:.1f} MB scanned in {seconds:.1f} s", end="")
    print(f": {len(reported)} findings")
    print()
    lines = [["rule", "findings", "files"]]
    for rule, found in sorted(by_rule.items()):
        lines.append([rule, str(len(found)), str(len({finding.path for finding in found}))])
    print(markdown_table(lines, numeric={1, 2}))
    for rule, found in sorted(by_rule.items()):
        print()
        print(f"## {rule}")
        for finding in found:
            print(f"- {finding.path}:{finding.line}: {finding.excerpt}")


if __name__ == "__main__":
    main()
