"""The scanning engine, and the only module that touches detect-secrets.

Our own loop runs our rules (`rules.py`). The prefilter is one pass of an Aho-Corasick
automaton over every rule's literal prefixes (built once, on the first scan): it tells
which prefixes occur, and only the rules with one of them (and the few without any
prefix) run their regex, with `finditer` over the whole text, so a multi-line PEM block
is one match. The pass costs the same for 50 rules or 150, where a substring search per
rule grew with every rule. Candidates that look like documentation placeholders, or
fail the rule's structural or context check, are dropped. A finding carries the rule,
its label and the line number, never the matched text.

detect-secrets is used for what it is good at, its plugin interface: every rule is
also a `RegexBasedDetector` subclass built here (`plugins()`), so a team can load
memsync's rules into its own detect-secrets setup with
`--plugin path/to/scanner/detect_secrets_plugins.py`.
Its settings are process-global, so every use of them here holds `_DETECT_SECRETS_LOCK`.
Verification (which would send a candidate over the network) is never enabled.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ahocorasick_rs import AhoCorasick

from scanner.rules import RULES, Rule

if TYPE_CHECKING:
    from detect_secrets.plugins.base import RegexBasedDetector

_DETECT_SECRETS_LOCK = threading.Lock()
_VERIFICATION_FILTER = "detect_secrets.filters.common.is_ignored_due_to_verification_policies"

# Documentation placeholders: a run of one character, or the usual stand-ins.
_REPEATED_RUN = re.compile(r"(.)\1{5,}")
_PLACEHOLDER_MARKERS = (
    "EXAMPLE",
    "example",
    "Example",
    "...",
    "…",
    "<",
    ">",
    "XXXX",
    "xxxx",
    "****",
    "${",
    "{{",
)


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found: which rule, its human label, and the 1-based line. Never the text."""

    rule: str
    label: str
    line: int


@dataclass(frozen=True, slots=True)
class _Match:
    rule: Rule
    start: int
    end: int


def looks_like_placeholder(secret: str) -> bool:
    """True for documentation stand-ins rather than real credentials.

    A multi-line secret (a PEM block, also one folded into a JSON string with `\\n`
    escapes) is judged only by its markers: real key bodies contain long runs such as
    `AAAAAAAA`.
    """
    if any(marker in secret for marker in _PLACEHOLDER_MARKERS):
        return True
    multi_line = "\n" in secret or "\\n" in secret
    return not multi_line and _REPEATED_RUN.search(secret) is not None


def _secret_span(rule: Rule, match: re.Match[str]) -> tuple[int, int]:
    if "secret" in rule.regex.groupindex and match.group("secret") is not None:
        return match.span("secret")
    return match.span()


def _accepted_spans(rule: Rule, text: str) -> Iterator[tuple[int, int]]:
    """Spans of `text` that `rule` accepts (no prefilter): regex, placeholder, checks."""
    for match in rule.regex.finditer(text):
        start, end = _secret_span(rule, match)
        secret = text[start:end]
        if looks_like_placeholder(secret):
            continue
        if rule.validate is not None and not rule.validate(secret):
            continue
        if rule.context is None or rule.context(text, start, end):
            yield start, end


def _has_prefix(rule: Rule, text: str) -> bool:
    """The prefilter for one rule on its own: one of its prefixes occurs, or it has none."""
    return not rule.prefixes or any(prefix in text for prefix in rule.prefixes)


def rule_spans(rule: Rule, text: str) -> Iterator[tuple[int, int]]:
    """Spans of `text` that one rule accepts, the rule taken on its own.

    Its prefilter is a substring search per prefix: what a detect-secrets plugin runs on
    each line, and the reference the combined prefilter of `scan_text` must agree with.
    """
    if _has_prefix(rule, text):
        yield from _accepted_spans(rule, text)


@dataclass(frozen=True, slots=True)
class _Prefilter:
    """Every rule's prefixes in one automaton; which rules each prefix (by index) wakes."""

    automaton: AhoCorasick
    rules_by_prefix: tuple[frozenset[int], ...]
    always: frozenset[int]


@cache
def _prefilter() -> _Prefilter:
    """Built on the first scan, not on import (`rules_fingerprint` needs no automaton)."""
    index_of: dict[str, int] = {}
    wakes: list[set[int]] = []
    always: set[int] = set()
    for rule_index, rule in enumerate(RULES):
        # An empty prefix occurs in every text: such a rule always runs.
        if not rule.prefixes or "" in rule.prefixes:
            always.add(rule_index)
            continue
        for prefix in rule.prefixes:
            if prefix not in index_of:
                index_of[prefix] = len(wakes)
                wakes.append(set())
            wakes[index_of[prefix]].add(rule_index)
    return _Prefilter(
        automaton=AhoCorasick(list(index_of)),
        rules_by_prefix=tuple(frozenset(rules) for rules in wakes),
        always=frozenset(always),
    )


def _rules_to_run(text: str) -> list[Rule]:
    """The rules whose prefilter passes on `text`, in `RULES` order (which decides which
    rule claims a span first)."""
    prefilter = _prefilter()
    try:
        # Overlapping matches: a prefix that overlaps another one's occurrence counts too.
        found = prefilter.automaton.find_matches_as_indexes(text, overlapping=True)
    except UnicodeEncodeError:
        # Lone surrogates (text decoded with `surrogateescape`) are not valid UTF-8,
        # which the automaton needs: this text gets the rule-by-rule prefilter.
        return [rule for rule in RULES if _has_prefix(rule, text)]
    wanted = set(prefilter.always)
    for prefix_index in {prefix_index for prefix_index, _, _ in found}:
        wanted |= prefilter.rules_by_prefix[prefix_index]
    return [RULES[rule_index] for rule_index in sorted(wanted)]


def _matches(text: str) -> Iterator[_Match]:
    """Every accepted candidate in `text`, rule by rule.

    A span already claimed by an earlier (more specific) rule is not reported again.
    """
    claimed: set[tuple[int, int]] = set()
    for rule in _rules_to_run(text):
        for span in _accepted_spans(rule, text):
            if span not in claimed:
                claimed.add(span)
                yield _Match(rule, *span)


def scan_text(text: str) -> list[Finding]:
    """Findings in `text`, ordered by line then rule; one per rule and line."""
    found: set[tuple[int, str, str]] = set()
    for match in _matches(text):
        line = text.count("\n", 0, match.start) + 1
        found.add((line, match.rule.id, match.rule.label))
    return [Finding(rule=rule, label=label, line=line) for line, rule, label in sorted(found)]


def find_spans(text: str) -> list[tuple[str, int, int]]:
    """(rule id, start, end) of each secret in `text`, in text order.

    For reports that show where a finding is (a masked excerpt): never print the span.
    """
    return sorted(
        ((match.rule.id, match.start, match.end) for match in _matches(text)),
        key=lambda span: (span[1], span[2]),
    )


def redact(text: str, replacement: str = "[REDACTED:{rule}]") -> str:
    """`text` with every secret replaced (by default with `[REDACTED:<rule id>]`)."""
    spans = sorted((match.start, match.end, match.rule.id) for match in _matches(text))
    pieces: list[str] = []
    position = 0
    for start, end, rule_id in spans:
        if start < position:  # overlaps one already replaced
            continue
        pieces.append(text[position:start])
        pieces.append(replacement.format(rule=rule_id))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


# -- detect-secrets ------------------------------------------------------------------


def _plugin_class(rule: Rule) -> type[RegexBasedDetector]:
    """A detect-secrets plugin that applies one rule with our placeholder and checks."""
    from detect_secrets.plugins.base import RegexBasedDetector

    def analyze_string(self: RegexBasedDetector, string: str) -> Iterator[str]:
        # detect-secrets hands a plugin one line: a context rule sees only that line.
        del self
        for start, end in rule_spans(rule, string):
            yield string[start:end]

    name = "Memsync" + "".join(part.capitalize() for part in re.split(r"[^a-z0-9]+", rule.id))
    attributes: dict[str, Any] = {
        "secret_type": f"memsync: {rule.label}",
        "denylist": (rule.regex,),
        "analyze_string": analyze_string,
        "__module__": __name__,
        "__doc__": f"memsync rule `{rule.id}`: {rule.label}.",
    }
    return type(name, (RegexBasedDetector,), attributes)


def rules_fingerprint() -> str:
    """Changes whenever a rule changes: cached "clean" verdicts are void after it."""
    import hashlib

    digest = hashlib.sha256()
    for rule in RULES:
        digest.update(f"{rule.id}\0{rule.pattern}\0{rule.prefixes}\n".encode())
    return digest.hexdigest()[:16]


@cache
def plugins() -> dict[str, type[RegexBasedDetector]]:
    """One detect-secrets plugin class per rule, by rule id (built on first use, so
    scanning never pays for importing detect-secrets)."""
    return {rule.id: _plugin_class(rule) for rule in RULES}


_PLUGIN_FILE = Path(__file__).with_name("detect_secrets_plugins.py")


@contextmanager
def _detect_secrets_session(config: dict[str, Any] | None) -> Iterator[None]:
    """detect-secrets' global settings for one use, under our lock.

    `config` None means its default plugins and filters. Its plugin-class mapping is an
    lru_cache that its own `transient_settings` does not reset, so a custom plugin list
    after a default one (or the reverse) would see stale classes: we clear it around
    every session.
    """
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.settings import default_settings, get_settings, transient_settings

    with _DETECT_SECRETS_LOCK:
        get_mapping_from_secret_type_to_class.cache_clear()
        try:
            with default_settings() if config is None else transient_settings(config):
                # Verification would send candidates over the network: never.
                get_settings().filters.pop(_VERIFICATION_FILTER, None)
                yield
        finally:
            get_mapping_from_secret_type_to_class.cache_clear()


def _detect_secrets_findings(path: Path) -> list[tuple[int, str]]:
    from detect_secrets.core.secrets_collection import SecretsCollection

    collection = SecretsCollection()
    collection.scan_file(str(path))
    return sorted(
        (secret.line_number, secret.type)
        for _, secrets in collection.data.items()
        for secret in secrets
    )


def detect_secrets_default_scan(path: Path) -> int:
    """How many secrets detect-secrets' own default plugins and filters find in a file.

    For comparison in benchmarks and tests; never verifies anything over the network.
    """
    with _detect_secrets_session(None):
        return len(_detect_secrets_findings(path))


def detect_secrets_scan_with_memsync_rules(path: Path) -> list[tuple[int, str]]:
    """(line, secret type) for a file scanned by detect-secrets with memsync's plugins.

    Shows the plugins work inside detect-secrets itself (its loop, its filters).
    """
    config = {
        "plugins_used": [
            {"name": plugin.__name__, "path": f"file://{_PLUGIN_FILE.resolve()}"}
            for plugin in plugins().values()
        ],
        "filters_used": [],
    }
    with _detect_secrets_session(config):
        return _detect_secrets_findings(path)
