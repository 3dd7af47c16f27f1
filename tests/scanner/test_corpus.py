"""The secret scanner against the generated corpus (`tests/scanner/corpus.py`).

Every fake credential is found once, on its line, by a rule of the right provider;
no near miss is flagged; a finding never carries the secret; and our own source tree
holds no credential (the corpus builds its fakes at run time).
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
from pathlib import Path

import pytest

from scanner import Finding, scan_text
from scanner.rules import RULES
from tests.scanner import corpus

REPO_ROOT = Path(__file__).resolve().parents[2]
RULE_IDS = frozenset(rule.id for rule in RULES)
LEAK_WINDOW = 8


def _describe(findings: list[Finding]) -> str:
    return ", ".join(f"{finding.rule}@{finding.line}" for finding in findings) or "none"


def _check_rule(finding: Finding, tokens: frozenset[str]) -> str | None:
    """Why `finding.rule` is not an acceptable rule for a format, or None if it is."""
    if finding.rule not in RULE_IDS:
        return f"rule {finding.rule!r} is not in scanner.rules.RULES"
    if not corpus.rule_id_matches(finding.rule, tokens):
        return f"rule {finding.rule!r} does not name any of {sorted(tokens)}"
    return None


def _finding_texts(finding: Finding) -> list[str]:
    """Every way a finding could be shown or serialised."""
    texts = [repr(finding), str(finding)]
    if dataclasses.is_dataclass(finding) and not isinstance(finding, type):
        texts.append(json.dumps(dataclasses.asdict(finding)))
    texts.append(json.dumps([finding.rule, finding.label, finding.line]))
    return texts


def _leaks(findings: list[Finding], material: str) -> list[str]:
    """Pieces of `material` (LEAK_WINDOW characters or more) that a finding shows."""
    texts = [text for finding in findings for text in _finding_texts(finding)]
    pieces = {material[i : i + LEAK_WINDOW] for i in range(len(material) - LEAK_WINDOW + 1)}
    return sorted(piece for piece in pieces if any(piece in text for text in texts))


# ---------------------------------------------------------------------------------------
# Positives


@pytest.mark.parametrize("positive", corpus.positives(), ids=lambda p: p.id)
def test_each_fake_credential_is_found_once_on_its_line(positive: corpus.Positive) -> None:
    findings = scan_text(positive.note)
    context = positive.note.split("\n")[positive.line - 1].replace(
        positive.secret.split("\n")[0], f"<{positive.format}>"
    )
    assert [finding.line for finding in findings] == [positive.line], (
        f"{positive.format} placed as {positive.placement} on line {positive.line} "
        f"({context[:120]!r}); findings: {_describe(findings)}"
    )
    problem = _check_rule(findings[0], positive.rule_tokens)
    assert problem is None, f"{positive.format}: {problem}"


@pytest.mark.parametrize("fmt", corpus.FORMATS, ids=lambda f: f.name)
def test_a_secret_that_is_the_whole_text_is_found(fmt: corpus.Format) -> None:
    """No character before or after it: the boundary checks must accept the text's ends."""
    for positive in corpus.positives():
        if positive.format != fmt.name:
            continue
        findings = scan_text(positive.secret)
        assert [finding.line for finding in findings] == [1], (
            f"{positive.id}: {_describe(findings)}"
        )
        problem = _check_rule(findings[0], fmt.rule_tokens)
        assert problem is None, f"{positive.id}: {problem}"


def test_the_corpus_is_deterministic() -> None:
    assert corpus.positives.__wrapped__() == corpus.positives()
    assert corpus.negatives.__wrapped__() == corpus.negatives()


def test_the_corpus_covers_every_format_three_times() -> None:
    counts = {fmt.name: 0 for fmt in corpus.FORMATS}
    for positive in corpus.positives():
        counts[positive.format] += 1
    assert set(counts.values()) == {corpus.SAMPLES_PER_FORMAT}


@pytest.mark.parametrize("positive", corpus.positives(), ids=lambda p: p.id)
def test_findings_never_contain_the_secret(positive: corpus.Positive) -> None:
    findings = scan_text(positive.note)
    assert findings, f"{positive.format}: nothing found, so nothing to check"
    assert _leaks(findings, positive.material) == []


def test_several_secrets_come_back_in_line_order_on_their_lines() -> None:
    note = corpus.multi_secret_note()
    findings = scan_text(note.note)
    assert [finding.line for finding in findings] == [line for line, _ in note.expected], (
        f"expected {list(note.expected)}, found {_describe(findings)}"
    )
    for finding, (_, format_name) in zip(findings, note.expected, strict=True):
        problem = _check_rule(finding, corpus.FORMATS_BY_NAME[format_name].rule_tokens)
        assert problem is None, f"{format_name}: {problem}"
    for material in note.materials:
        assert _leaks(findings, material) == []


def test_windows_line_endings_keep_the_lines() -> None:
    note = corpus.multi_secret_note()
    findings = scan_text(note.note.replace("\n", "\r\n"))
    assert [finding.line for finding in findings] == [line for line, _ in note.expected], (
        f"expected {list(note.expected)}, found {_describe(findings)}"
    )


@pytest.mark.parametrize("sample", corpus.same_line_notes(), ids=lambda s: s.format)
def test_two_secrets_of_one_rule_on_one_line_are_found(sample: corpus.SameLineNote) -> None:
    findings = scan_text(sample.note)
    assert findings, f"{sample.format}: nothing found on line {sample.line}"
    assert {finding.line for finding in findings} == {sample.line}, _describe(findings)
    for finding in findings:
        problem = _check_rule(finding, sample.rule_tokens)
        assert problem is None, f"{sample.format}: {problem}"


# ---------------------------------------------------------------------------------------
# Negatives


@pytest.mark.parametrize("category", corpus.NEGATIVE_CATEGORIES)
def test_near_misses_produce_no_findings(category: str) -> None:
    tripped = []
    for negative in corpus.negatives():
        if negative.category != category:
            continue
        lines = negative.note.split("\n")
        tripped += [
            f"{negative.id} line {finding.line}: {finding.rule} on {lines[finding.line - 1]!r}"
            for finding in scan_text(negative.note)
        ]
    assert tripped == [], "\n".join(tripped)


def test_the_negative_corpus_has_hundreds_of_notes() -> None:
    """Every format's near misses together: several hundred notes."""
    assert 300 <= len(corpus.negatives()) <= 500


def test_a_megabyte_of_realistic_notes_has_no_findings() -> None:
    (note,) = corpus.realistic_notes(1, 1_000_000, seed=7)
    assert len(note.encode("utf-8")) >= 1_000_000
    assert scan_text(note) == []


def test_realistic_notes_are_deterministic_and_sized() -> None:
    notes = corpus.realistic_notes(20, 200_000, seed=3)
    assert notes == corpus.realistic_notes(20, 200_000, seed=3)
    assert len(notes) == 20
    total = sum(len(note.encode("utf-8")) for note in notes)
    assert 200_000 <= total <= 220_000


# ---------------------------------------------------------------------------------------
# Our own repository


def _repository_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files: what a push could carry."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO_ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        pytest.skip(f"not a git checkout: {error}")
    names = listing.decode("utf-8").split("\0")
    return sorted(REPO_ROOT / name for name in names if name and (REPO_ROOT / name).is_file())


def test_the_repository_holds_no_credential() -> None:
    files = _repository_files()
    assert REPO_ROOT / "tests" / "scanner" / "corpus.py" in files
    found = []
    for path in files:
        data = path.read_bytes()
        if b"\0" in data:  # binary
            continue
        for finding in scan_text(data.decode("utf-8", errors="replace")):
            found.append(f"{path.relative_to(REPO_ROOT)}:{finding.line}: {finding.rule}")
    assert found == [], "\n".join(found)


def test_every_rule_is_listed_in_the_scanner_docs() -> None:
    """docs/scanner.md tells users what is refused: a rule missing there is a surprise."""
    listed = (REPO_ROOT / "docs" / "scanner.md").read_text(encoding="utf-8")
    missing = [rule.id for rule in RULES if f"| `{rule.id}` | {rule.label} |" not in listed]
    assert missing == [], f"add to docs/scanner.md's rules table: {missing}"


def test_a_dropbox_token_on_the_line_after_another_token_is_found() -> None:
    """Only a bare line inside a block of base64 lines is taken for binary data."""
    fmt = corpus.FORMATS_BY_NAME
    rng = random.Random(11)
    short = fmt["dropbox_short_lived_token"].generate(rng).text
    long_lived = fmt["dropbox_long_lived_token"].generate(rng).text
    note = f"DROPBOX_SHORT={short}\nDROPBOX_LONG={long_lived}\n"
    found = [(finding.line, finding.rule) for finding in scan_text(note)]
    assert found == [(1, "dropbox-short-lived-token"), (2, "dropbox-long-lived-token")]


def _single_line_cases() -> list[tuple[str, str, str, int]]:
    """(format, placement, note, line of the secret): one sample of every one-line
    format in every one-line placement (`positives()` spreads its three over them)."""
    cases = []
    for positive in corpus.positives():
        fmt = corpus.FORMATS_BY_NAME[positive.format]
        if fmt.multiline or positive.index != 0:
            continue
        for name, builder in corpus.SINGLE_LINE_PLACEMENTS:
            if name == "url" and corpus.URL_SAFE.fullmatch(positive.secret) is None:
                continue
            lines, focus = builder(positive.secret, "SERVICE_TOKEN")
            note = "\n".join(["# Notes", "", *lines, ""])
            cases.append((positive.format, name, note, 3 + focus))
    return cases


def test_every_one_line_format_is_found_in_every_placement() -> None:
    """`KEY=value`, quotes, backticks, YAML, JSON, a URL, a table, a sentence's end."""
    missed = [
        f"{fmt} as {placement}"
        for fmt, placement, note, line in _single_line_cases()
        if [finding.line for finding in scan_text(note)] != [line]
    ]
    assert missed == [], "\n".join(missed)
