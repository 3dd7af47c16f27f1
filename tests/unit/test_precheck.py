"""The server's entry rules, checked by the client before upload, and the server's
refusals mapped to per-entry errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from memsync_protocol.keys import MAX_ENTRY_BYTES
from sync_client.answers import _raise_for_status
from sync_client.errors import (
    EntriesRefused,
    EntryTooLarge,
    InvalidEntries,
    PathClash,
    RequestRejected,
    ServerError,
)
from sync_client.precheck import (
    effective_limit,
    entry_problem,
    path_clashes,
    refusal_row,
    too_large_row,
)


def test_a_clean_entry_passes() -> None:
    assert entry_problem("notes/a.md", "fine\n") is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a\x00b", "contains a NUL character"),
        ("half \ud800", "is not valid UTF-8 (lone surrogate)"),
    ],
)
def test_a_text_the_server_cannot_store_is_refused(text: str, problem: str) -> None:
    row = entry_problem("a.md", text)
    assert row == {
        "key": "a.md",
        "reason": "invalid-text",
        "problem": problem,
        "detail": f"the text {problem}",
    }


@pytest.mark.parametrize("key", ["../x.md", "a\\b.md", "x" * 513, "/".join("a" * 33), "e\u0301"])
def test_a_key_the_server_refuses_is_refused(key: str) -> None:
    row = entry_problem(key, "fine\n")
    assert row is not None
    assert row["reason"] == "invalid-key"
    assert row["detail"].startswith("the name ")


def test_the_size_is_counted_in_utf8_bytes_against_the_limit() -> None:
    # 400 characters, 800 bytes: over a 500-byte limit although shorter in characters.
    assert entry_problem("a.md", "é" * 400, max_entry_bytes=500) == too_large_row("a.md", 800, 500)
    assert entry_problem("a.md", "é" * 250, max_entry_bytes=500) is None
    assert entry_problem("a.md", "x" * MAX_ENTRY_BYTES) is None
    assert entry_problem("a.md", "x" * (MAX_ENTRY_BYTES + 1)) is not None


def test_too_large_says_both_numbers_in_words() -> None:
    row = too_large_row("big.md", 312_004, 250_000)
    assert row["detail"] == "312,004 bytes, the server allows 250,000"
    assert (row["size"], row["max_bytes"]) == (312_004, 250_000)


def test_a_learned_limit_applies_only_when_lower() -> None:
    assert effective_limit(None) == MAX_ENTRY_BYTES
    assert effective_limit(1_000) == 1_000
    assert effective_limit(10 * MAX_ENTRY_BYTES) == MAX_ENTRY_BYTES
    assert effective_limit(0) == MAX_ENTRY_BYTES


def test_a_file_where_the_server_has_a_folder_clashes() -> None:
    clashes = path_clashes(["d", "e.md"], server_keys=["d/n.md", "d/z.md", "e.md"])
    assert list(clashes) == ["d"]
    assert clashes["d"]["clashes_with"] == "d/n.md"
    assert clashes["d"]["detail"] == "d is a file here but d/ is a folder on the server"


def test_a_file_under_a_folder_the_server_has_as_a_file_clashes() -> None:
    clashes = path_clashes(["d/deep/n.md"], server_keys=["d"])
    assert clashes["d/deep/n.md"]["detail"] == (
        "d/deep/n.md needs a folder d/ but d is a file on the server"
    )


def test_two_local_keys_that_clash_are_both_refused() -> None:
    clashes = path_clashes(["d", "d/n.md"], server_keys=[], local_keys=["d", "d/n.md"])
    assert set(clashes) == {"d", "d/n.md"}
    assert clashes["d"]["detail"].endswith("is a folder here too")


@pytest.mark.parametrize(
    ("key", "server"), [("d", ["dd/n.md"]), ("d.md", ["d/n.md"]), ("a/b", ["a/bc"]), ("a", ["a"])]
)
def test_names_that_only_look_alike_do_not_clash(key: str, server: list[str]) -> None:
    assert path_clashes([key], server_keys=server, local_keys=[key]) == {}


def test_server_refusals_become_rows_in_words() -> None:
    too_large = refusal_row("big.md", {"reason": "too-large", "max_bytes": 1_000}, "x" * 1_500)
    assert too_large["detail"] == "1,500 bytes, the server allows 1,000"
    clash = refusal_row("d", {"reason": "path-clash", "clashes_with": "d/n.md"}, "x")
    assert clash["detail"] == "d is a file here but d/ is a folder on the server"
    key = refusal_row("k.md", {"reason": "invalid-key", "problem": "is longer than 4 bytes"}, "")
    assert key["detail"] == "the name is longer than 4 bytes"
    text = refusal_row("t.md", {"reason": "invalid-text", "problem": None}, "")
    assert text["reason"] == "invalid-text"


def _answer(status: int, details: dict[str, Any], **extra: Any) -> httpx.Response:
    body = {"error": {"type": "x", "message": "refused", "details": details}, **extra}
    request = httpx.Request("PUT", "http://server.invalid/v1/team_memory")
    return httpx.Response(status, content=json.dumps(body).encode(), request=request)


def _refused(response: httpx.Response) -> EntriesRefused:
    with pytest.raises(EntriesRefused) as caught:
        _raise_for_status(response)
    return caught.value


def test_a_path_clash_409_is_a_per_entry_refusal_not_a_transient_conflict() -> None:
    error = _refused(
        _answer(
            409,
            {
                "error_code": "path_clash",
                "clashes": [{"key": "d", "clashesWith": "d/n.md"}],
                "keys": ["d"],
            },
        )
    )
    assert isinstance(error, PathClash)
    assert error.refusals == {"d": {"reason": "path-clash", "clashes_with": "d/n.md"}}


def test_a_path_clash_naming_no_key_is_permanent_and_other_409s_stay_transient() -> None:
    with pytest.raises(RequestRejected):
        _raise_for_status(_answer(409, {"error_code": "path_clash", "clashes": []}))
    with pytest.raises(ServerError):
        _raise_for_status(_answer(409, {"error_code": "something_else"}))


def test_invalid_key_and_text_400s_name_each_refused_entry() -> None:
    keys = _refused(
        _answer(
            400,
            {
                "error_code": "invalid_key",
                "keys": [{"key": "a.md", "reason": "is longer than 4 bytes"}],
            },
        )
    )
    assert isinstance(keys, InvalidEntries)
    assert keys.refusals == {"a.md": {"reason": "invalid-key", "problem": "is longer than 4 bytes"}}
    one_text = _refused(_answer(400, {"error_code": "invalid_text", "key": "t.md"}))
    assert one_text.refusals == {"t.md": {"reason": "invalid-text", "problem": None}}
    listed_texts = _refused(
        _answer(
            400,
            {
                "error_code": "invalid_text",
                "keys": [{"key": "n.md", "reason": "contains a NUL character"}],
            },
        )
    )
    assert listed_texts.refusals["n.md"]["problem"] == "contains a NUL character"


def test_entry_too_large_names_its_key_and_limit() -> None:
    error = _refused(
        _answer(413, {"error_code": "team_memory_entry_too_large", "key": "b", "max_bytes": 9})
    )
    assert isinstance(error, EntryTooLarge)
    assert (error.key, error.max_bytes) == ("b", 9)


@pytest.mark.parametrize(
    ("status", "details"),
    [
        (400, {"error_code": "invalid_key", "keys": []}),
        (400, {"error_code": "invalid_text"}),
        (413, {"error_code": "team_memory_body_too_large", "max_bytes": 1024}),
        (413, {"error_code": "team_memory_entry_too_large", "max_bytes": 9}),
    ],
)
def test_a_refusal_that_names_no_key_is_a_permanent_request_failure(
    status: int, details: dict[str, Any]
) -> None:
    with pytest.raises(RequestRejected):
        _raise_for_status(_answer(status, details))
