"""Provenance and verification on the wire (docs/protocol.md 3.13), against a real
server: what is stored comes back in /history and /log and on the page (inert), a bad
value is a 400 and never a 500, and a write without provenance answers as before."""

from __future__ import annotations

import json

import httpx

from memsync_protocol.checksums import entry_checksum
from tests.integration.conftest import API, REPO
from tests.liveserver import LiveServer

HEAD = "0123456789abcdef0123456789abcdef01234567"
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_provenance_round_trips_and_bad_values_are_refused(
    server: LiveServer, api: httpx.Client
) -> None:
    params = {"repo": REPO}
    plain = api.put(API, params=params, json={"entries": {"plain.md": "p"}})
    assert plain.status_code == 200, plain.text
    assert "provenance" in plain.json()["supports"]
    # Absent provenance: the history entry and the commit carry exactly today's fields.
    [entry] = api.get(f"{API}/history", params={**params, "key": "plain.md"}).json()
    assert set(entry) == {"version", "checksum", "op", "author", "at"}
    [commit] = api.get(f"{API}/log", params=params).json()["commits"]
    assert set(commit) == {"version", "at", "author", "ops", "keys", "key_count"}
    assert commit["ops"] == {"put": 1, "delete": 0, "restore": 0}

    sent = {
        "via": "watcher",
        "agent": HOSTILE,
        "agentVersion": "2.1.197",
        "session": "5e55-10n",
        "commit": HEAD,
        "hostname": "never-stored",
    }
    written = api.put(API, params=params, json={"entries": {"a.md": "a"}, "provenance": sent})
    assert written.status_code == 200, written.text
    kept = {name: value for name, value in sent.items() if name != "hostname"}
    [entry] = api.get(f"{API}/history", params={**params, "key": "a.md"}).json()
    assert entry["provenance"] == kept
    newest = api.get(f"{API}/log", params=params).json()["commits"][0]
    assert newest["provenance"] == kept

    refused = [
        {"via": "cli", "agent": "x" * 10_240},
        {"via": "cli", "agent": "a\x1b[31mred"},
        {"via": "cli", "session": "line\nbreak"},
        {"via": "telepathy"},
        {"via": "cli", "commit": "HEAD"},
        {"via": 7},
    ]
    for provenance in refused:
        answer = api.put(
            API, params=params, json={"entries": {"b.md": "b"}, "provenance": provenance}
        )
        assert answer.status_code == 400, (provenance, answer.text)
        assert answer.json()["error"]["details"]["error_code"] == "invalid_provenance", answer.text
    not_an_object = api.put(API, params=params, json={"entries": {"b.md": "b"}, "provenance": []})
    assert not_an_object.status_code == 400, not_an_object.text
    header = {"X-Memsync-Provenance": json.dumps({"agent": "y" * 10_240})}
    too_long = api.delete(API, params={**params, "key": "a.md"}, headers=header)
    assert too_long.status_code == 400, too_long.text
    assert "b.md" not in api.get(API, params=params).json()["content"]["entries"]

    # A DELETE says it in a header; a verification adds a version and changes no text.
    header = {"X-Memsync-Provenance": json.dumps({"via": "cli", "commit": HEAD})}
    gone = api.delete(API, params={**params, "key": "plain.md"}, headers=header)
    assert gone.status_code == 200, gone.text
    before = api.get(API, params=params).json()
    verified = api.post(
        f"{API}/verify", params=params, json={"key": "a.md", "provenance": {"commit": HEAD}}
    )
    assert verified.status_code == 200, verified.text
    after = api.get(API, params=params).json()
    assert after["version"] == before["version"] + 1
    assert (after["checksum"], after["content"]) == (before["checksum"], before["content"])
    versions = api.get(f"{API}/history", params={**params, "key": "a.md"}).json()
    assert [(v["op"], v.get("provenance")) for v in versions][-1] == ("verify", {"commit": HEAD})
    assert api.get(f"{API}/log", params=params).json()["commits"][0]["ops"]["verify"] == 1
    missing = api.post(f"{API}/verify", params=params, json={"key": "nope.md"})
    assert missing.status_code == 404, missing.text

    # The page shows it as text: the hostile agent name is escaped, never markup.
    with httpx.Client(base_url=server.base_url, timeout=30) as page:
        signed_in = page.post("/ui/signin", data={"token": server.token("*", name="carol")})
        assert signed_in.status_code == 303, signed_in.text[:300]
        note = page.get(f"/ui/repo/{REPO}/note", params={"key": "a.md"}).text
        activity = page.get(f"/ui/repo/{REPO}/activity").text
    for html in (note, activity):
        assert "&lt;script&gt;alert(" in html
        assert "<script>alert(" not in html
        assert "5e55-10n" in html
        assert HEAD in html


def test_sources_name_each_live_keys_newest_write_with_its_commit(
    server: LiveServer, api: httpx.Client
) -> None:
    repo = "acme/sources"
    params = {"repo": repo}
    never = api.get(f"{API}/provenance", params=params)
    assert never.status_code == 404
    assert never.json()["error"]["details"]["error_code"] == "no_team_memory"
    first = api.put(
        API,
        params=params,
        json={"entries": {"a.md": "a", "b.md": "b"}, "provenance": {"via": "cli", "commit": HEAD}},
    )
    assert first.status_code == 200, first.text
    assert "sources" in first.json()["supports"]
    assert api.put(API, params=params, json={"entries": {"b.md": "b2"}}).status_code == 200
    assert api.delete(API, params={**params, "key": "a.md"}).status_code == 200
    assert api.put(API, params=params, json={"entries": {"c.md": "c"}}).status_code == 200
    verified = api.post(
        f"{API}/verify", params=params, json={"key": "c.md", "provenance": {"commit": "f" * 40}}
    )
    assert verified.status_code == 200, verified.text
    with server.client(server.token(repo, read_only=True)) as reader:
        answer = reader.get(f"{API}/provenance", params=params)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["repo"] == repo
    assert set(body["keys"]) == {"b.md", "c.md"}  # a.md is deleted
    b, c = body["keys"]["b.md"], body["keys"]["c.md"]
    assert set(b) == {"version", "checksum", "at", "author", "commit"}
    assert (b["version"], b["commit"]) == (2, None)
    assert b["checksum"] == entry_checksum("b2")
    assert (c["version"], c["commit"]) == (5, "f" * 40)
    assert b["author"] == c["author"]
