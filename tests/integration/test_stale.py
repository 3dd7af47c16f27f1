"""Notes that cite code which changed since: real git checkout, real server, real CLI.

Alice writes notes that cite Bob's code; Bob pulls them (his pull records his checkout's
HEAD as when they were written), then changes the code. `memsync stale`, `status`, the
session-start block and MCP's `read_note` all say which note cites what changed; a note
citing nothing, or a path the repository never had, is never stale.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

from mcp import ClientSession

from tests.integration.test_context_hook import hook
from tests.integration.test_mcp import AGENT, CALL_SECONDS, _data, _talk
from tests.integration.users import User

STALE = (
    "Stale: 1 team note cites code changed since it was written; check the code before "
    "relying on it (`memsync stale` says what changed): `notes/retry.md`."
)
INDEX = (
    "# Team memory\n"
    "- [Retry](notes/retry.md) — the retry loop\n"
    "- [Style](notes/plain.md) — how we write\n"
    "- [Ghost](notes/ghost.md) — an old plan\n"
    "- [Top](notes/top.md) — the file's header\n"
)


def _git(checkout: Path, *arguments: str, day: int = 1) -> None:
    """`git ARGUMENTS` as one fixed author at a fixed date (day `day` of 2026)."""
    stamp = f"2026-01-{day:02d}T12:00:00Z"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(checkout),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Bob",
        "GIT_AUTHOR_EMAIL": "bob@example.com",
        "GIT_COMMITTER_NAME": "Bob",
        "GIT_COMMITTER_EMAIL": "bob@example.com",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }
    subprocess.run(["git", *arguments], cwd=checkout, env=env, check=True, capture_output=True)


def _stale(user: User) -> dict[str, list[dict[str, Any]]]:
    """`memsync stale --json` (exit 3: something is stale): key -> its reasons."""
    report = user.json("stale", expect=3)
    return {note["key"]: note["reasons"] for note in report["stale"]}


def test_a_note_citing_changed_lines_or_a_removed_file_is_stale_everywhere(
    alice: User, bob: User, tmp_path: Path
) -> None:
    # Bob's home is his checkout (his team dir is inside it, untracked: no matter).
    checkout = bob.home
    (checkout / "src").mkdir()
    (checkout / "docs").mkdir()
    (checkout / "src" / "a.py").write_text("".join(f"line_{n} = {n}\n" for n in range(1, 21)))
    (checkout / "docs" / "b.md").write_text("# B\n")
    _git(checkout, "init", "-q")
    _git(checkout, "add", "src", "docs")
    _git(checkout, "commit", "-qm", "First version")

    alice.write("MEMORY.md", INDEX)
    alice.write("notes/retry.md", "The retry loop is `src/a.py:10`; see `docs/b.md`.\n")
    alice.write("notes/plain.md", "Short sentences. No code here.\n")
    alice.write("notes/ghost.md", "The plan was src/ghost.py:3, never written.\n")
    alice.write("notes/top.md", "The header is src/a.py#L1-L2.\n")
    assert alice.run("push").returncode == 0
    pulled = bob.run("pull")
    assert pulled.returncode == 0, pulled.stderr

    fresh = bob.run("stale")
    assert fresh.returncode == 0, fresh.stderr
    assert "no stale note: 4 notes checked" in fresh.stdout

    source = (checkout / "src" / "a.py").read_text().replace("line_10 = 10", "line_10 = 99")
    (checkout / "src" / "a.py").write_text(source)
    _git(checkout, "commit", "-qam", "Change line ten", day=2)

    stale = _stale(bob)
    assert list(stale) == ["notes/retry.md"]
    [reason] = stale["notes/retry.md"]
    assert (reason["kind"], reason["path"], reason["lines"]) == ("lines", "src/a.py", [10, 10])
    assert reason["commits"] == 1
    assert reason["newest"]["subject"] == "Change line ten"
    shown = bob.run("stale")
    assert shown.returncode == 3
    assert "stale: notes/retry.md\n  src/a.py:10 changed (1 commit since, newest " in shown.stdout
    assert "notes/plain.md" not in shown.stdout
    assert "notes/ghost.md" not in shown.stdout

    assert "1 note may be stale: `memsync stale`" in bob.run("status").stdout

    started = hook(bob, "--hook")
    assert started.returncode == 0, started.stderr
    assert "- [Retry](notes/retry.md) — the retry loop\n" in started.stdout
    assert started.stdout.endswith(f"</team-memory-index>\n{STALE}\n")

    async def conversation(session: ClientSession) -> None:
        read = _data(
            await asyncio.wait_for(
                session.call_tool("read_note", {"key": "notes/retry.md"}), CALL_SECONDS
            )
        )
        assert read["stale"] is True
        assert "src/a.py:10 changed" in read["freshness"]
        assert read["text"].startswith("The retry loop")
        plain = _data(
            await asyncio.wait_for(
                session.call_tool("read_note", {"key": "notes/plain.md"}), CALL_SECONDS
            )
        )
        assert plain["stale"] is False

    _talk(bob, tmp_path, conversation)

    _git(checkout, "rm", "-q", "docs/b.md")
    _git(checkout, "commit", "-qm", "Drop b", day=3)
    stale = _stale(bob)
    assert list(stale) == ["notes/retry.md"]
    gone = [reason for reason in stale["notes/retry.md"] if reason["kind"] == "gone"]
    assert [reason["path"] for reason in gone] == ["docs/b.md"]
    assert "docs/b.md is gone from the checkout" in bob.run("stale").stdout

    # Bob checks the note against the code and records it: fresh again, in its history.
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout.strip()
    verified = bob.run("verify", "notes/retry.md")
    assert verified.returncode == 0, verified.stderr
    assert f"verified notes/retry.md at {head[:12]}" in verified.stdout
    assert bob.run("stale").returncode == 0
    newest = bob.json("log", "notes/retry.md")["versions"][-1]
    assert (newest["op"], newest["author"]) == ("verify", "bob")
    assert newest["provenance"] == {"via": "cli", "commit": head}
    assert "verify   bob" in bob.run("log", "notes/retry.md").stdout
    # The text and the team's checksum did not change: alice has nothing to pull.
    assert alice.json("pull")["written"] == []

    # Over MCP: note_history shows the verification's provenance, and verify_note
    # records another one, named for the MCP client.
    async def checked_again(session: ClientSession) -> None:
        history = _data(
            await asyncio.wait_for(
                session.call_tool("note_history", {"key": "notes/retry.md"}), CALL_SECONDS
            )
        )
        assert history["versions"][-1]["provenance"] == {"via": "cli", "commit": head}
        assert history["versions"][0]["provenance"] == {"via": "cli"}  # alice's push
        again = _data(
            await asyncio.wait_for(
                session.call_tool("verify_note", {"key": "notes/retry.md"}), CALL_SECONDS
            )
        )
        assert (again["commit"], again["summary"]) == (
            head,
            f"recorded that you checked notes/retry.md against the code at commit {head}",
        )

    _talk(bob, tmp_path, checked_again)
    newest = bob.json("log", "notes/retry.md")["versions"][-1]
    assert (newest["op"], newest["provenance"]) == (
        "verify",
        {"via": "mcp", **AGENT, "commit": head},
    )


def test_a_teammates_note_is_judged_from_the_commit_its_writer_had(alice: User, bob: User) -> None:
    """Bob's checkout already has a commit that changed the cited line when he pulls
    alice's note: his pull records his own HEAD, but the server says alice wrote it at
    the commit before, so `stale` names it (and the session-start block marks it)."""
    lines = "".join(f"line_{n} = {n}\n" for n in range(1, 21))
    for checkout in (alice.home, bob.home):
        (checkout / "src").mkdir()
        (checkout / "src" / "a.py").write_text(lines)
        _git(checkout, "init", "-q")
        _git(checkout, "add", "src")
        # The same tree, author, date and message: the same commit in both checkouts.
        _git(checkout, "commit", "-qm", "First version")
    (bob.home / "src" / "a.py").write_text(lines.replace("line_10 = 10", "line_10 = 99"))
    _git(bob.home, "commit", "-qam", "Change line ten", day=2)

    alice.write(
        "MEMORY.md",
        "# Team memory\n- [Retry](notes/retry.md) — the retry loop\n- [Plan](notes/plan.md)\n",
    )
    alice.write("notes/retry.md", "The retry loop is `src/a.py:10`.\n")
    # Past its date, and naming a file only in passing (no citation): expired, and
    # said so in its own words, never "cites changed code".
    alice.write(
        "notes/plan.md",
        "---\nname: plan\nexpires: 2026-01-01\n---\nThe loop in src/a.py moves in March.\n",
    )
    assert alice.run("push").returncode == 0
    pulled = bob.run("pull")
    assert pulled.returncode == 0, pulled.stderr

    stale = _stale(bob)
    assert list(stale) == ["notes/plan.md", "notes/retry.md"]
    [reason] = stale["notes/retry.md"]
    assert (reason["kind"], reason["path"], reason["lines"]) == ("lines", "src/a.py", [10, 10])
    assert reason["newest"]["subject"] == "Change line ten"
    assert [reason["words"] for reason in stale["notes/plan.md"]] == [
        "expired on 2026-01-01 (its `expires` frontmatter)"
    ]
    started = hook(bob, "--hook")
    assert started.returncode == 0, started.stderr
    assert "- [Retry](notes/retry.md) — the retry loop\n" in started.stdout
    assert started.stdout.endswith(
        f"</team-memory-index>\n{STALE}\nExpired: 1 team note is past its `expires` date or "
        "due for review; check that it still holds before relying on it: `notes/plan.md`.\n"
    )
