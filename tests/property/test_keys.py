"""Properties of `memsync_protocol.keys.key_problem`, the one function that decides keys.

(a) Whatever text comes in, an accepted key is safe to use as a path: UTF-8, NFC, no
    control characters, within the limits, no `.`/`..`/empty segment, it stays inside
    the team dir once joined, and no later reader that percent-decodes it (up to three
    rounds, leniently like `urllib.parse.unquote`) and NFKC-normalizes it (before,
    between or after the decoding) finds a `..` segment, a backslash or a leading `/`.
(b) Keys made of plain segments (`[a-z0-9_-][a-z0-9_.-]*`) are always accepted.
(c) A dangerous fragment put in at a segment boundary of such a key always gets it
    refused.
"""

from __future__ import annotations

import itertools
import os.path
import unicodedata
from collections.abc import Callable, Iterator
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memsync_protocol.keys import (
    INVISIBLE_IN_KEYS,
    MAX_KEY_BYTES,
    MAX_KEY_SEGMENTS,
    _general_key_problem,
    key_problem,
)

TEAM_DIR = "/root/team"
DECODE_ROUNDS = 3


# Pieces that make percent-encodings, NFKC confusables, separators and dots likely.
KEY_PIECES = [
    "/", ".", "..", "\\", ":", "C:", "%", "%%", "2e", "2E", "2f", "2F", "5c", "25",
    "%2e", "%2E", "%2f", "%2F", "%5c", "%5C", "%25", "%00", "%0a", "%ff", "%c0%ae", "%e2",
    "%ef%bc%8e", "%ef%bc%8f", "%ef%bc%bc",
    "\uff05", "\uff12", "\uff45", "\uff0e", "\uff0f", "\uff3c", "\u2024", "\u2025", "\ufe52",
    "\u2044", "\u2215", "\uff23\uff1a",
    "e\u0301", "\u00e9", "\u212b", "\x00", "\x1f", "\x7f", "\u0085", "\u200b",
    "\u202e", "\u2066", "\u200f", "\ufeff", "\u2028", "\u200d",
    "a", "b", "z", "0", "-", "_", "~", " ",
]  # fmt: skip

any_text = st.text(st.characters(exclude_categories=()), max_size=40)
key_like_text = st.lists(
    st.one_of(st.sampled_from(KEY_PIECES), st.text(max_size=2)), max_size=12
).map("".join)
candidate_keys = st.one_of(any_text, key_like_text)

safe_segments = st.from_regex(r"[a-z0-9_-][a-z0-9_.-]{0,15}", fullmatch=True).filter(
    lambda segment: segment not in (".", "..")
)
safe_segment_lists = st.lists(safe_segments, min_size=1, max_size=5)


def later_readings(key: str) -> Iterator[str]:
    """Every text a later reader could make of `key`: any sequence of up to
    DECODE_ROUNDS lenient percent-decodings mixed with NFKC normalizations.

    Written as a plain enumeration of operation sequences, independently of the
    search that `memsync_protocol.keys` uses, so the two can check each other.
    """
    steps: dict[str, Callable[[str], str]] = {
        "decode": unquote,
        "nfkc": lambda text: unicodedata.normalize("NFKC", text),
    }
    for length in range(2 * DECODE_ROUNDS + 2):
        for sequence in itertools.product(steps, repeat=length):
            if sequence.count("decode") > DECODE_ROUNDS:
                continue
            form = key
            for step in sequence:
                form = steps[step](form)
            yield form


# -- (a) accepted keys are safe ----------------------------------------------------------


@settings(max_examples=300)
@given(key=candidate_keys)
def test_accepted_key_is_plain_text_within_the_limits(key: str) -> None:
    if key_problem(key) is not None:
        return
    assert len(key.encode("utf-8")) <= MAX_KEY_BYTES
    assert not any(unicodedata.category(char) == "Cc" for char in key)
    assert not INVISIBLE_IN_KEYS & set(key)
    assert unicodedata.is_normalized("NFC", key)
    segments = key.split("/")
    assert len(segments) <= MAX_KEY_SEGMENTS
    assert not {".", "..", ""} & set(segments)
    assert "\\" not in key


@settings(max_examples=300)
@given(key=candidate_keys)
def test_accepted_key_stays_inside_the_team_dir(key: str) -> None:
    if key_problem(key) is not None:
        return
    joined = os.path.normpath(os.path.join(TEAM_DIR, key))
    assert joined.startswith(TEAM_DIR + "/")
    assert os.path.relpath(joined, TEAM_DIR) == key


@settings(max_examples=300)
@given(key=candidate_keys)
@example(key="%ff/%2e%2e/x")
@example(key="%ef%bc%8e%ef%bc%8e/x")
@example(key="\uff05\uff12\uff45\uff05\uff12\uff45/x")
def test_accepted_key_never_decodes_into_a_traversal(key: str) -> None:
    if key_problem(key) is not None:
        return
    for reading in later_readings(key):
        assert ".." not in reading.split("/"), (key, reading)
        assert "\\" not in reading, (key, reading)
        assert not reading.startswith("/"), (key, reading)


@settings(max_examples=300)
@given(key=candidate_keys)
def test_accepted_key_never_decodes_into_a_traversal_in_one_step(key: str) -> None:
    """Percent-decoding alone (strict UTF-8, as far as it goes) and NFKC alone."""
    if key_problem(key) is not None:
        return
    readings = [unicodedata.normalize("NFKC", key)]
    decoded = key
    for _ in range(DECODE_ROUNDS):
        try:
            decoded = unquote(decoded, errors="strict")
        except UnicodeDecodeError:
            break
        readings.append(decoded)
    for reading in readings:
        assert ".." not in reading.split("/"), (key, reading)
        assert "\\" not in reading, (key, reading)
        assert not reading.startswith("/"), (key, reading)


def test_later_readings_find_what_a_decoder_would() -> None:
    """The helper itself: each known trick is seen through."""
    assert "../x" in set(later_readings("%252e%252e/x"))
    assert "../x" in set(later_readings("\uff0e\uff0e\uff0fx"))
    assert "../x" in set(later_readings("%ef%bc%8e%ef%bc%8e/x"))
    assert "../x" in set(later_readings("\uff05\uff12\uff45\uff05\uff12\uff45/x"))
    assert "\ufffd/../x" in set(later_readings("%ff/%2e%2e/x"))
    assert "./x" in set(later_readings("%25252e/x")), "three rounds"
    assert "./x" not in set(later_readings("%2525252e/x")), "a fourth round"


# -- (b) plain keys are accepted --------------------------------------------------------


@settings(max_examples=300)
@given(segments=safe_segment_lists)
def test_plain_keys_are_accepted(segments: list[str]) -> None:
    key = "/".join(segments)
    assert key_problem(key) is None, key


@pytest.mark.parametrize(
    "key",
    [
        "a" * MAX_KEY_BYTES,
        "\u00e9" * (MAX_KEY_BYTES // 2),
        "/".join(["s"] * MAX_KEY_SEGMENTS),
        "notes/caf\u00e9.md",
        "notes/\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645.md",
        "notes/\U0001f469\u200d\U0001f4bb.md",
        "100%.md",
        "a..b/c...d",
        ".hidden/x",
    ],
    ids=["512-bytes", "512-bytes-multibyte", "32-segments", "nfc", "zwnj-persian", "zwj-emoji",
         "lone-percent", "inner-dots", "dot-file"],
)  # fmt: skip
def test_keys_at_the_limits_and_with_harmless_dots_are_accepted(key: str) -> None:
    assert key_problem(key) is None


# -- (c) dangerous fragments are refused ---------------------------------------------------

DANGEROUS_FRAGMENTS = {
    "dotdot": "..",
    "dot": ".",
    "empty-segment": "",
    "pct-dotdot": "%2e%2e",
    "pct-dotdot-mixed-case": "%2E%2e",
    "pct-dot": "%2e",
    "pct-dot-dot": ".%2e",
    "pct-pct-dotdot": "%252e%252e",
    "pct-pct-pct-dotdot": "%25252e%25252e",
    "pct-slash": "%2f",
    "pct-slash-in-name": "a%2Fb",
    "pct-backslash": "%5c",
    "backslash": "\\",
    "backslash-in-name": "x\\y",
    "fullwidth-dotdot": "\uff0e\uff0e",
    "fullwidth-dot": "\uff0e",
    "one-dot-leader-pair": "\u2024\u2024",
    "two-dot-leader": "\u2025",
    "fullwidth-slash-in-name": "a\uff0fb",
    "fullwidth-backslash": "\uff3c",
    "nul": "\x00",
    "nul-in-name": "a\x00b",
    "unit-separator": "\x1f",
    "delete": "\x7f",
    "next-line": "\u0085",
    "right-to-left-override": "\u202e",
    "right-to-left-override-in-name": "exe.\u202etxt",
    "first-strong-isolate": "\u2068",
    "left-to-right-mark": "\u200e",
    "arabic-letter-mark": "\u061c",
    "zero-width-space": "a\u200bb",
    "byte-order-mark": "\ufeff",
    "line-separator": "\u2028",
    "not-nfc": "e\u0301",
    "fullwidth-percent-dotdot": "\uff05\uff12\uff45\uff05\uff12\uff45",
    "pct-encoded-fullwidth-dotdot": "%ef%bc%8e%ef%bc%8e",
    "bad-escape-then-pct-dotdot": "%ff/%2e%2e",
}
FRAGMENT_PARAMS = [
    pytest.param(fragment, id=name) for name, fragment in DANGEROUS_FRAGMENTS.items()
]


@pytest.mark.parametrize("fragment", FRAGMENT_PARAMS)
@settings(max_examples=60)
@given(segments=safe_segment_lists, data=st.data())
def test_dangerous_fragment_at_a_segment_boundary_is_refused(
    fragment: str, segments: list[str], data: st.DataObject
) -> None:
    index = data.draw(st.integers(min_value=0, max_value=len(segments)), label="index")
    key = "/".join([*segments[:index], fragment, *segments[index:]])
    assert key_problem(key) is not None, key


ABSOLUTE_PREFIXES = {
    "slash": "/",
    "drive": "C:",
    "drive-lowercase": "c:",
    "drive-slash": "C:/",
    "drive-backslash": "C:\\",
    "unc": "\\\\server\\share\\",
    "pct-slash": "%2f",
    "fullwidth-drive": "\uff23\uff1a",
}


@pytest.mark.parametrize("prefix", ABSOLUTE_PREFIXES.values(), ids=ABSOLUTE_PREFIXES.keys())
@settings(max_examples=60)
@given(segments=safe_segment_lists)
def test_absolute_prefix_is_refused(prefix: str, segments: list[str]) -> None:
    key = prefix + "/".join(segments)
    assert key_problem(key) is not None, key


@settings(max_examples=100)
@given(segments=safe_segment_lists, extra=st.integers(min_value=1, max_value=4))
def test_keys_over_the_limits_are_refused(segments: list[str], extra: int) -> None:
    count = MAX_KEY_SEGMENTS + extra
    too_many = "/".join((segments * count)[:count])
    assert key_problem(too_many) is not None
    too_long = ("/".join(segments) + "x" * MAX_KEY_BYTES)[: MAX_KEY_BYTES + extra]
    assert key_problem(too_long) is not None


@given(key=st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text())))
def test_non_strings_are_refused(key: object) -> None:
    assert key_problem(key) == "is not a string"


plain_keys = st.from_regex(r"[A-Za-z0-9_.-]{1,14}(/[A-Za-z0-9_.-]{0,14}){0,40}", fullmatch=True)


@settings(max_examples=150)
@given(key=st.one_of(plain_keys, candidate_keys.filter(bool)))
@example(key="a" * (MAX_KEY_BYTES + 1))
@example(key="/".join(["a"] * (MAX_KEY_SEGMENTS + 1)))
@example(key="a/../b")
def test_the_plain_key_shortcut_answers_as_every_check_does(key: str) -> None:
    """`key_problem`'s shortcut for plain ASCII keys (the keys a scan meets by the
    thousand) gives the answer of the full checks, refusals and their words alike."""
    assert key_problem(key) == _general_key_problem(key, MAX_KEY_BYTES, MAX_KEY_SEGMENTS)
