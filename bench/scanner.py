"""Scanner throughput: memsync's engine next to detect-secrets, on the same notes.

Builds ~10 MB of realistic Markdown notes (the test corpus generator, no secrets, plus
a few fake credentials so every path of the engine runs) and prints one table:

- memsync `scan_text`, note by note (what a push does) and as one 10 MB text;
- detect-secrets 1.5 with its default plugins and filters (`SecretsCollection.scan_file`),
  on a sample of the same notes, since it runs at about 0.1 MB/s;
- detect-secrets' own loop running memsync's rules as plugins, on the same sample.

Run: `.venv/bin/python -m bench.scanner [--megabytes 10] [--sample-megabytes 0.5]`.
Single-threaded, so it measures one core.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scanner import scan_text
from scanner.engine import detect_secrets_default_scan, detect_secrets_scan_with_memsync_rules
from sync_server.auth import mint_token
from tests.scanner.corpus import realistic_notes


def _timed(action: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    found = action()
    return time.perf_counter() - started, found


def _with_some_secrets(notes: list[str], seed: int) -> list[str]:
    """Put a memsync token (a real, checksummed one) into every 200th note."""
    chooser = random.Random(seed)
    seeded = list(notes)
    for index in range(0, len(seeded), 200):
        lines = seeded[index].split("\n")
        position = chooser.randrange(len(lines))
        lines.insert(position, f"token for the staging bot: {mint_token().secret}")
        seeded[index] = "\n".join(lines)
    return seeded


def _write_files(folder: Path, notes: list[str]) -> list[Path]:
    paths = []
    for index, note in enumerate(notes):
        path = folder / f"note-{index:05}.md"
        path.write_text(note, encoding="utf-8")
        paths.append(path)
    return paths


def main() -> None:
    """Build the input, run every scanner on it, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--sample-megabytes", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args()

    total_bytes = int(arguments.megabytes * 1_000_000)
    notes = _with_some_secrets(realistic_notes(2_500, total_bytes, arguments.seed), arguments.seed)
    size = sum(len(note.encode("utf-8")) for note in notes)
    sample: list[str] = []
    sample_size = 0
    for note in notes:
        if sample_size >= arguments.sample_megabytes * 1_000_000:
            break
        sample.append(note)
        sample_size += len(note.encode("utf-8"))

    rows: list[tuple[str, int, float, int]] = []
    seconds, found = _timed(lambda: sum(len(scan_text(note)) for note in notes))
    rows.append(("memsync scan_text, note by note", size, seconds, found))
    blob = "\n".join(notes)
    seconds, found = _timed(lambda: len(scan_text(blob)))
    rows.append(("memsync scan_text, one text", len(blob.encode("utf-8")), seconds, found))
    with tempfile.TemporaryDirectory() as folder:
        paths = _write_files(Path(folder), sample)
        seconds, found = _timed(lambda: sum(detect_secrets_default_scan(path) for path in paths))
        rows.append(("detect-secrets defaults (sample)", sample_size, seconds, found))
        seconds, found = _timed(
            lambda: sum(len(detect_secrets_scan_with_memsync_rules(path)) for path in paths)
        )
        rows.append(("detect-secrets loop, memsync rules (sample)", sample_size, seconds, found))

    ours = rows[0][1] / rows[0][2]
    print(f"{len(notes)} notes, {size / 1e6:.1f} MB; sample {len(sample)} notes")
    print()
    print("| scanner | input MB | seconds | MB/s | findings | memsync note by note is |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, input_bytes, seconds, found in rows:
        rate = input_bytes / seconds / 1e6
        print(
            f"| {name} | {input_bytes / 1e6:.2f} | {seconds:.2f} | {rate:.2f} | {found} "
            f"| {ours / 1e6 / rate:,.0f}x faster |"
        )


if __name__ == "__main__":
    main()
