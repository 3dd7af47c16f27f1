"""`memsync diff KEY` asks the server for that key alone (`GET ?key=K`), not the repo.

Through a recording proxy in front of a real server: the one-key request is the only
one, and small; its output is the one the whole-repo GET gives (what a server without
`key` in `supports` still gets); offline it shows the local side as before.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.users import REPO, User, make_user
from tests.integration.watchkit import Proxy
from tests.liveserver import LiveServer

NOTES = 40
NOTE_BYTES = 1800


def note(index: int) -> str:
    """~1.8 KB that gzip cannot shrink much (the server gzips answers): 40 of them weigh
    far more on the wire than one short note, compressed or not."""
    random = base64.b64encode(os.urandom(NOTE_BYTES * 3 // 4)).decode("ascii")
    return f"{index}\n" + "\n".join(random[i : i + 60] for i in range(0, len(random), 60))


@pytest.fixture
def proxy(live: LiveServer) -> Iterator[Proxy]:
    forwarder = Proxy(live.base_url)
    yield forwarder
    forwarder.close()


@pytest.fixture
def carol(live: LiveServer, proxy: Proxy, tmp_path: Path, alice: User) -> User:
    """A teammate who reaches the server through the proxy, after alice's first push
    (40 notes and a.md), with a local edit of a.md and alice's later edit of it."""
    for index in range(NOTES):
        alice.write(f"notes/n{index:02}.md", note(index))
    alice.write("a.md", "line one\nline two\n")
    alice.json("push")
    user = make_user("carol", tmp_path, live, live.token())
    user.env["MEMSYNC_SERVER"] = proxy.url
    user.json("pull")
    user.write("c.md", "carol's own note\n")
    user.json("push")  # a write answer carries the server's `supports`
    alice.json("pull")
    alice.write("a.md", "line one\nalice's line\n")
    alice.json("push")
    user.write("a.md", "line one\ncarol's line\n")
    return user


def forget_one_key_support(user: User) -> None:
    """Make the state hold what an older server (no `key` in `supports`) taught it."""
    [path] = (user.home / ".state").rglob("state.json")
    state = json.loads(path.read_text(encoding="utf-8"))
    assert "key" in state["supports"]
    state["supports"] = ["since", "base-precondition", "history", "events"]
    path.write_text(json.dumps(state), encoding="utf-8")


def diff_requests(user: User, proxy: Proxy, *args: str) -> tuple[str, list[tuple[str, str, int]]]:
    """(stdout of `memsync diff ARGS`, the requests it made through the proxy)."""
    before = len(proxy.control.answered)
    result = user.run("diff", *args)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout, proxy.control.answered[before:]


def test_diff_of_one_key_makes_one_small_request_with_the_same_output(
    carol: User, proxy: Proxy
) -> None:
    shown, requests = diff_requests(carol, proxy, "a.md")
    as_json, _ = diff_requests(carol, proxy, "a.md", "--json")

    [(method, target, size)] = requests
    assert method == "GET"
    assert "key=a.md" in target
    assert size < 500  # one short note and its fields, not 40 notes of ~2 KB
    assert "-alice's line\n+carol's line\n" in shown
    assert "-line two\n+carol's line\n" in shown

    forget_one_key_support(carol)
    old_shown, old_requests = diff_requests(carol, proxy, "a.md")
    old_json, _ = diff_requests(carol, proxy, "a.md", "--json")
    [(method, target, size)] = old_requests
    assert method == "GET"
    assert "key=" not in target
    assert size > NOTES * NOTE_BYTES // 2  # the whole repo, even gzipped
    assert shown == old_shown
    assert json.loads(as_json) == json.loads(old_json)


# A key that is nowhere (`nowhere.md`) is an error since issue 20: test_history_cli.py.
@pytest.mark.parametrize("key", ["only-here.md", "notes/n07.md"])
def test_a_key_missing_on_either_side_diffs_as_with_the_whole_repo(
    carol: User, proxy: Proxy, key: str
) -> None:
    carol.write("only-here.md", "not pushed yet\n")
    new, requests = diff_requests(carol, proxy, key, "--json")
    assert [target for _, target, _ in requests] == [
        f"/v1/team_memory?repo=acme%2Fapp&key={key.replace('/', '%2F')}"
    ]
    forget_one_key_support(carol)
    old, _ = diff_requests(carol, proxy, key, "--json")
    assert json.loads(new) == json.loads(old)


def test_diff_of_one_key_offline_shows_the_local_side(carol: User, proxy: Proxy) -> None:
    proxy.close()  # the same server URL (so the same state), now unreachable
    result = carol.run("diff", "a.md")
    assert result.returncode == 0, result.stderr
    assert "server unreachable" in result.stdout
    assert "-line two\n+carol's line\n" in result.stdout
    assert "local against server" not in result.stdout


def test_get_one_key_answers_that_entry_or_404(live: LiveServer, alice: User) -> None:
    alice.write("notes/a.md", "hello\n")
    alice.write("b.md", "other\n")
    alice.json("push")
    with live.client(live.token()) as api:
        found = api.get("/v1/team_memory", params={"repo": REPO, "key": "notes/a.md"})
        missing = api.get("/v1/team_memory", params={"repo": REPO, "key": "notes/zz.md"})
        never = api.get("/v1/team_memory", params={"repo": "acme/empty", "key": "a.md"})
        mixed = api.get("/v1/team_memory", params={"repo": REPO, "key": "b.md", "since": 0})
        unsafe = api.get("/v1/team_memory", params={"repo": REPO, "key": "../x.md"})
        hashes = api.get("/v1/team_memory", params={"repo": REPO, "view": "hashes"})
    body = found.json()
    assert found.status_code == 200
    assert set(body) == {"repo", "key", "version", "checksum", "content"}
    assert (body["repo"], body["key"], body["content"]) == (REPO, "notes/a.md", "hello\n")
    assert body["checksum"] == hashes.json()["entryChecksums"]["notes/a.md"]
    assert body["version"] == hashes.json()["version"]
    assert missing.status_code == 404
    assert missing.json()["error"]["details"]["error_code"] == "not_found"
    assert never.status_code == 404
    assert never.json()["error"]["details"]["error_code"] == "no_team_memory"
    assert (mixed.status_code, unsafe.status_code) == (400, 400)
    assert "key" in hashes.json()["supports"]
