"""Scanner throughput: memsync next to gitleaks and detect-secrets, on the same files.

Two corpora, each written to (or read from) files so every scanner reads the same ones:

- `notes`: 2,000 realistic Markdown notes of ~4.2 KB (`tests.scanner.corpus.
  realistic_notes`, as `bench/client.py` uses), with 20 fake credentials of 20 formats
  planted (`tests.scanner.corpus.FORMATS`), one in every 100th note;
- `big`: the big honest corpus fetched by `bench.fetch_corpus` (real SDK docs, tests and
  READMEs, Debian's docs), or, with `--big-megabytes N`, its first N MB in a fixed
  shuffled order of its files (seeded), so a prefix spans every source.

Rows, each over a whole corpus unless it says "sample":

- memsync `scan_text`, file by file (what a push does), one row per checkout: this one,
  and each `--memsync-src DIR` (e.g. a checkout of the pre-change main), each in its own
  subprocess with that DIR first on `sys.path`; files are read before the clock starts;
- gitleaks 8.16.0 (`detect --no-git`, default rules), on one core (`GOMAXPROCS=1`) and
  on both; wall time of the process, reading the files included. Its Debian package is
  fetched into `~/.cache/memsync-bench/tools` when missing (or give `--gitleaks PATH`);
- detect-secrets 1.5 with its default plugins and filters, and detect-secrets' own loop
  running memsync's rules as plugins, on a `--sample-megabytes` sample of each corpus
  (it runs at about 0.14 MB/s).

    .venv/bin/python -m bench.scanner [--big-megabytes N] [--cache DIR] [--gitleaks PATH]
        [--memsync-src DIR ...] [--sample-megabytes 0.5] [--no-big]

Columns: scanner, corpus, MB, seconds, MB/s, findings (a finding is one rule on one
line for memsync and detect-secrets, one reported leak for gitleaks).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench._table import markdown_table
from bench.fetch_corpus import DEFAULT_CACHE
from tests.scanner.corpus import FORMATS, realistic_notes

NOTES = 2_000
NOTE_BYTES = 4096
PLANTED_EVERY = 100
REPOSITORY = Path(__file__).resolve().parent.parent
TOOLS = Path("~/.cache/memsync-bench/tools").expanduser()
GITLEAKS_VERSION = "8.16.0"
GITLEAKS_DEB = "http://deb.debian.org/debian/pool/main/g/gitleaks/gitleaks_8.16.0-1+b12_amd64.deb"
COMMAND_TIMEOUT = 3600.0

# Runs in a subprocess with one checkout's directory first on sys.path: reads the listed
# files, then times `scan_text` over them. Prints JSON; never a finding's text.
_MEMSYNC_WORKER = """
import json, sys, time
source, listing = sys.argv[1], sys.argv[2]
sys.path.insert(0, source)
import scanner, scanner.engine
from scanner import scan_text
with open(listing, encoding="utf-8") as names:
    paths = names.read().splitlines()
texts = []
for path in paths:
    with open(path, encoding="utf-8", errors="replace") as file:
        texts.append(file.read())
started = time.perf_counter()
found = sum(len(scan_text(text)) for text in texts)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "findings": found, "module": scanner.__file__}))
"""


@dataclass(frozen=True)
class Corpus:
    """Files on disk, all of them scanned by every whole-corpus row."""

    name: str
    root: Path
    files: list[Path]
    bytes: int


@dataclass(frozen=True)
class Row:
    """One line of the table."""

    scanner: str
    corpus: str
    bytes: int
    seconds: float
    findings: int


def _size(paths: list[Path]) -> int:
    return sum(path.stat().st_size for path in paths)


def planted_notes(seed: int) -> list[str]:
    """The 2,000 notes, with a fake credential of another format in every 100th one."""
    rng = random.Random(seed)
    notes = realistic_notes(NOTES, NOTES * NOTE_BYTES, seed=seed)
    for number, index in enumerate(range(0, len(notes), PLANTED_EVERY)):
        credential = FORMATS[number % len(FORMATS)].generate(rng)
        lines = notes[index].split("\n")
        lines.insert(rng.randrange(1, len(lines)), f"the key for staging: {credential.text}")
        notes[index] = "\n".join(lines)
    return notes


def write_notes(folder: Path, notes: list[str]) -> Corpus:
    """The notes as `note-00000.md` files in `folder`."""
    paths = []
    for index, note in enumerate(notes):
        path = folder / f"note-{index:05}.md"
        path.write_text(note, encoding="utf-8")
        paths.append(path)
    return Corpus("notes", folder, paths, _size(paths))


def big_corpus(cache: Path, megabytes: float | None, seed: int, folder: Path) -> Corpus:
    """The fetched corpus; with `megabytes`, its first N MB (shuffled order) copied out."""
    files = sorted(
        path
        for path in cache.rglob("*")
        if path.is_file() and not path.is_symlink() and path.parent != cache
    )
    if not files:
        raise SystemExit(f"no corpus in {cache}: run `python -m bench.fetch_corpus` first")
    if megabytes is None:
        return Corpus("big", cache, files, _size(files))
    random.Random(seed).shuffle(files)
    chosen: list[Path] = []
    total = 0
    for path in files:
        if total >= megabytes * 1_000_000:
            break
        target = folder / path.relative_to(cache)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        chosen.append(target)
        total += target.stat().st_size
    return Corpus("big", folder, chosen, total)


def sample_of(corpus: Corpus, megabytes: float, seed: int) -> tuple[list[Path], int]:
    """Files of `corpus` in a seeded order, up to `megabytes` (for detect-secrets)."""
    files = list(corpus.files)
    random.Random(seed).shuffle(files)
    chosen: list[Path] = []
    total = 0
    for path in files:
        if total >= megabytes * 1_000_000:
            break
        chosen.append(path)
        total += path.stat().st_size
    return chosen, total


def time_memsync(source: Path, corpus: Corpus, listing: Path) -> Row:
    """memsync `scan_text` from checkout `source` over every file, in a subprocess."""
    listing.write_text("\n".join(str(path) for path in corpus.files) + "\n", encoding="utf-8")
    result = subprocess.run(  # our own worker, our own paths
        [sys.executable, "-c", _MEMSYNC_WORKER, str(source), str(listing)],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=True,
        cwd=source,
    )
    measured = json.loads(result.stdout)
    if not Path(measured["module"]).resolve().is_relative_to(source.resolve()):
        raise SystemExit(f"the scanner came from {measured['module']}, not from {source}")
    name = "memsync" if source.resolve() == REPOSITORY else f"memsync ({source})"
    return Row(name, corpus.name, corpus.bytes, measured["seconds"], measured["findings"])


def fetch_gitleaks() -> Path:
    """The gitleaks binary from Debian's package, fetched into the tools cache once."""
    binary = TOOLS / f"gitleaks-{GITLEAKS_VERSION}" / "usr" / "bin" / "gitleaks"
    if binary.exists():
        return binary
    TOOLS.mkdir(parents=True, exist_ok=True)
    deb = TOOLS / GITLEAKS_DEB.rsplit("/", 1)[-1]
    print(f"fetching gitleaks {GITLEAKS_VERSION} from Debian", file=sys.stderr)
    with urllib.request.urlopen(GITLEAKS_DEB, timeout=300) as response:
        deb.write_bytes(response.read())
    subprocess.run(
        ["dpkg-deb", "-x", str(deb), str(binary.parent.parent.parent)],
        check=True,
        timeout=COMMAND_TIMEOUT,
    )
    deb.unlink()
    return binary


def time_gitleaks(binary: Path, corpus: Corpus, cores: int, report: Path) -> Row:
    """gitleaks over the corpus's folder; its findings counted from its JSON report."""
    environment = dict(os.environ, GOMAXPROCS=str(cores))
    command = [str(binary), "detect", "--no-git", "--source", str(corpus.root)]
    command += ["--report-format", "json", "--report-path", str(report), "--exit-code", "0"]
    command += ["--redact", "--no-banner", "--log-level", "error"]
    started = time.perf_counter()
    subprocess.run(command, env=environment, check=True, timeout=COMMAND_TIMEOUT)
    seconds = time.perf_counter() - started
    findings = len(json.loads(report.read_text(encoding="utf-8") or "[]"))
    report.unlink()
    name = f"gitleaks {GITLEAKS_VERSION}, " + ("one core" if cores == 1 else f"{cores} cores")
    return Row(name, corpus.name, corpus.bytes, seconds, findings)


def time_detect_secrets(corpus: Corpus, megabytes: float, seed: int) -> list[Row]:
    """detect-secrets' defaults, and its loop with memsync's rules, on a sample."""
    from scanner.engine import detect_secrets_default_scan, detect_secrets_scan_with_memsync_rules

    paths, size = sample_of(corpus, megabytes, seed)

    def timed(action: Callable[[Path], int]) -> tuple[float, int]:
        started = time.perf_counter()
        found = sum(action(path) for path in paths)
        return time.perf_counter() - started, found

    name = f"{corpus.name} (sample)"
    seconds, found = timed(detect_secrets_default_scan)
    rows = [Row("detect-secrets 1.5 defaults", name, size, seconds, found)]
    seconds, found = timed(lambda path: len(detect_secrets_scan_with_memsync_rules(path)))
    rows.append(Row("detect-secrets loop, memsync rules", name, size, seconds, found))
    return rows


def print_table(rows: list[Row]) -> None:
    """The Markdown table of every row."""
    lines = [["scanner", "corpus", "MB", "seconds", "MB/s", "findings"]]
    for row in rows:
        rate = row.bytes / row.seconds / 1e6 if row.seconds else float("inf")
        lines.append(
            [
                row.scanner,
                row.corpus,
                f"{row.bytes / 1e6:.2f}",
                f"{row.seconds:.2f}",
                f"{rate:.2f}",
                str(row.findings),
            ]
        )
    print(markdown_table(lines, numeric={2, 3, 4, 5}))


def main() -> None:
    """Build or find both corpora, run every scanner on them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="the big corpus")
    parser.add_argument("--big-megabytes", type=float, default=None, help="a prefix of it")
    parser.add_argument("--no-big", action="store_true", help="the notes only")
    parser.add_argument("--gitleaks", type=Path, default=None, help="a gitleaks binary")
    parser.add_argument(
        "--memsync-src",
        type=Path,
        action="append",
        default=[],
        help="another checkout whose scanner to time too (repeatable)",
    )
    parser.add_argument("--sample-megabytes", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    arguments = parser.parse_args()
    gitleaks = arguments.gitleaks or fetch_gitleaks()
    sources = [REPOSITORY, *(path.resolve() for path in arguments.memsync_src)]

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="memsync-bench-scanner-") as temporary:
        work = Path(temporary)
        (work / "notes").mkdir()
        corpora = [write_notes(work / "notes", planted_notes(arguments.seed))]
        if not arguments.no_big:
            cache = arguments.cache.expanduser().resolve()
            (work / "big").mkdir()
            corpora.append(big_corpus(cache, arguments.big_megabytes, arguments.seed, work / "big"))
        for corpus in corpora:
            size = f"{len(corpus.files)} files, {corpus.bytes / 1e6:.1f} MB"
            print(f"{corpus.name}: {size}", flush=True)
            for source in sources:
                rows.append(time_memsync(source, corpus, work / "listing.txt"))
            for cores in (1, 2):
                rows.append(time_gitleaks(gitleaks, corpus, cores, work / "gitleaks.json"))
            rows += time_detect_secrets(corpus, arguments.sample_megabytes, arguments.seed)
    print()
    print_table(rows)


if __name__ == "__main__":
    main()
