"""The engine's contract: findings without values, placeholders, redact, check_write."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

import scanner
from scanner import Finding, SecretRefused, check_write, redact, scan_path, scan_text
from scanner.engine import (
    detect_secrets_default_scan,
    detect_secrets_scan_with_memsync_rules,
    find_spans,
    looks_like_placeholder,
    plugins,
    rule_spans,
)
from scanner.rules import RULES
from sync_server.auth import mint_token
from tests.scanner import corpus


def memsync_rule_id() -> str:
    return next(rule.id for rule in RULES if "memsync" in rule.id)


def test_public_surface_is_pinned() -> None:
    assert sorted(scanner.__all__) == [
        "Finding",
        "SecretRefused",
        "check_write",
        "redact",
        "scan_path",
        "scan_text",
    ]


def test_rule_ids_are_unique_and_labelled() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert all(rule.label and rule.id == rule.id.lower() for rule in RULES)
    assert len(RULES) >= 40


def test_finding_has_rule_label_line_and_never_the_secret() -> None:
    token = mint_token().secret
    text = f"# Notes\n\nthe bot uses {token} for staging\n"
    findings = scan_text(text)
    assert [(finding.rule, finding.line) for finding in findings] == [(memsync_rule_id(), 3)]
    assert token not in repr(findings)
    assert token[4:20] not in json.dumps([asdict(finding) for finding in findings])


def test_a_broken_checksum_is_not_a_memsync_token() -> None:
    token = mint_token().secret
    broken = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert scan_text(f"value: {broken}\n") == []


@pytest.mark.parametrize(
    "candidate",
    ["XXXXXXXXXXXXXXXX", "abcEXAMPLEdef", "sk-...", "<your-token>", "${TOKEN}", "ab****cd"],
)
def test_placeholders_are_recognised(candidate: str) -> None:
    assert looks_like_placeholder(candidate)


def test_random_looking_value_is_not_a_placeholder() -> None:
    assert not looks_like_placeholder(mint_token().secret)


def test_redact_replaces_every_secret_and_keeps_the_rest() -> None:
    first, second = mint_token().secret, mint_token().secret
    text = f"a {first}\nb {second} end\n"
    redacted = redact(text)
    assert first not in redacted
    assert second not in redacted
    rule = memsync_rule_id()
    assert redacted == f"a [REDACTED:{rule}]\nb [REDACTED:{rule}] end\n"
    assert redact("nothing here\n") == "nothing here\n"


def test_find_spans_gives_each_secret_where_scan_text_reports_it() -> None:
    first, second = mint_token().secret, mint_token().secret
    text = f"# Notes\n\nthe bot uses {first}\nand {second} too\n"
    spans = find_spans(text)
    assert [text[start:end] for _, start, end in spans] == [first, second]
    lines = [(rule, text.count("\n", 0, start) + 1) for rule, start, _ in spans]
    assert lines == [(finding.rule, finding.line) for finding in scan_text(text)]
    assert find_spans("nothing here\n") == []


def test_check_write_refuses_naming_labels_only(tmp_path: Path) -> None:
    token = mint_token().secret
    with pytest.raises(SecretRefused) as refused:
        check_write(tmp_path / "note.md", f"key {token}\n")
    message = str(refused.value)
    assert str(tmp_path / "note.md") in message
    label = next(rule.label for rule in RULES if rule.id == memsync_rule_id())
    assert label in message
    assert token not in message
    assert token[4:20] not in message
    check_write(tmp_path / "fine.md", "an honest note about tokens and passwords\n")


def test_scan_path_walks_folders_without_following_symlinks(tmp_path: Path) -> None:
    token = mint_token().secret
    (tmp_path / "team" / "deep").mkdir(parents=True)
    (tmp_path / "team" / "deep" / "a.md").write_text(f"x\n{token}\n")
    (tmp_path / "team" / "b.md").write_text("clean\n")
    outside = tmp_path / "outside.md"
    outside.write_text(f"{token}\n")
    (tmp_path / "team" / "link.md").symlink_to(outside)
    (tmp_path / "team" / "binary.bin").write_bytes(b"\x00\x01" + token.encode())
    found = [(path.name, finding.line) for path, finding in scan_path(tmp_path / "team")]
    assert found == [("a.md", 2)]


def test_every_rule_is_a_detect_secrets_plugin(tmp_path: Path) -> None:
    assert set(plugins()) == {rule.id for rule in RULES}
    token = mint_token().secret
    note = tmp_path / "note.md"
    note.write_text(f"# x\n\nstaging: {token}\n")
    # Its global settings: a default session first must not hide our plugins after it.
    detect_secrets_default_scan(note)
    found = detect_secrets_scan_with_memsync_rules(note)
    assert [line for line, _ in found] == [3]
    assert "memsync" in found[0][1].lower()


def test_an_identifier_shaped_like_a_letters_only_token_is_not_a_secret() -> None:
    name = "AutoModelForSequenceClassification"
    assert len(name) == 34
    assert scan_text(f"see hf_{name} in the docs\n") == []
    assert scan_text(f"api_org_{name}\n") == []


def _rule_by_rule(text: str) -> list[Finding]:
    """The findings with each rule's own prefilter (a substring search per prefix), rule
    after rule: what `scan_text` found before its prefilter became one automaton pass."""
    claimed: set[tuple[int, int]] = set()
    found: set[tuple[int, str, str]] = set()
    for rule in RULES:
        for start, end in rule_spans(rule, text):
            if (start, end) not in claimed:
                claimed.add((start, end))
                found.add((text.count("\n", 0, start) + 1, rule.id, rule.label))
    return [Finding(rule=rule, label=label, line=line) for line, rule, label in sorted(found)]


def test_one_prefilter_pass_finds_what_the_rules_find_one_by_one() -> None:
    every_prefix = " ".join(prefix for rule in RULES for prefix in rule.prefixes)
    notes = [positive.note for positive in corpus.positives()]
    notes += [negative.note for negative in corpus.negatives()]
    notes.append(corpus.multi_secret_note().note)
    compared = 0
    for note in notes:
        for text in (note, f"{every_prefix}\n{note}\n{every_prefix}\n"):
            expected = _rule_by_rule(text)
            assert scan_text(text) == expected
            compared += bool(expected)
    # Most texts hold findings: the comparison is not between two empty lists.
    assert compared >= len(corpus.positives()) * 2


def test_text_the_automaton_cannot_take_is_still_scanned() -> None:
    token = mint_token().secret
    # A lone surrogate, as `surrogateescape` decoding leaves for an undecodable byte.
    text = f"bad byte \udcff then {token}\n"
    assert [finding.rule for finding in scan_text(text)] == [memsync_rule_id()]
    assert redact(text) == f"bad byte \udcff then [REDACTED:{memsync_rule_id()}]\n"


def test_a_scan_compiles_only_the_rules_whose_prefix_occurs() -> None:
    """A push of one honest note must not compile a hundred regexes (start-up time)."""
    program = (
        "from scanner import scan_text\n"
        "from scanner.rules import RULES\n"
        "scan_text('# Decision\\n\\nWe rotate the AKIA keys monthly.\\n')\n"
        "print(sorted(rule.id for rule in RULES if 'regex' in vars(rule)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    compiled = set(ast.literal_eval(result.stdout))
    prefixless = {rule.id for rule in RULES if not rule.prefixes}
    assert compiled == prefixless | {"aws-access-key-id", "aws-secret-access-key"}
