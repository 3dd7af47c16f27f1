"""Provenance: how a version was made, as the wire carries it (docs/protocol.md 3.13).

Shared by the server (which refuses a bad value) and the client (which cleans what it
sends, so a write never fails over provenance). Pure: no I/O, nothing of ours imported.

A provenance is a small JSON object of optional strings: `via` (how the change was
made), `agent` and `agentVersion` (which program), `session` (which of its sessions)
and `commit` (the 40-hex `HEAD` of the writer's checkout). The person is never in it:
the server knows them from the token. Unknown fields are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

VIA = ("watcher", "cli", "mcp", "web", "snapshot")
# The wire names, in the order a stored provenance lists them.
FIELDS = ("via", "agent", "agentVersion", "session", "commit")
MAX_CHARS = 200
# The fields a writer words freely (the others are a fixed word and a commit hash): what
# a verification by a non-reviewer in a reviewed repo does not carry (3.13).
FREE_TEXT = ("agent", "agentVersion", "session")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class ProvenanceError(ValueError):
    """A provenance the server refuses; the message names the field and why."""


def _problem(name: str, value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > MAX_CHARS:
        return f"must be at most {MAX_CHARS} characters"
    if not value.isprintable():
        return "must be printable text (no control characters)"
    if name == "via" and value not in VIA:
        return "must be one of " + ", ".join(VIA)
    if name == "commit" and not _COMMIT.fullmatch(value):
        return "must be 40 lowercase hex digits"
    return None


def checked(value: object) -> dict[str, str] | None:
    """The known fields of a wire provenance, validated; None when it sets none.

    Raises `ProvenanceError` for a field that is too long, not text, or holds control
    characters: refused rather than cut, so what history shows is what was sent.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ProvenanceError("provenance must be an object")
    found: dict[str, str] = {}
    for name in FIELDS:
        if name not in value or value[name] is None:
            continue
        problem = _problem(name, value[name])
        if problem is not None:
            raise ProvenanceError(f"provenance.{name} {problem}")
        found[name] = value[name]
    return found or None


def cleaned(value: Mapping[str, str | None]) -> dict[str, str] | None:
    """What a client sends: control characters dropped, each string cut to `MAX_CHARS`,
    and any field still invalid left out; None when nothing is left."""
    found: dict[str, str] = {}
    for name in FIELDS:
        raw = value.get(name)
        if not isinstance(raw, str):
            continue
        text = "".join(char for char in raw if char.isprintable()).strip()[:MAX_CHARS]
        if _problem(name, text) is None:
            found[name] = text
    return found or None


def encode(value: Mapping[str, str] | None) -> str | None:
    """The stored form: compact JSON in `FIELDS` order, None for no provenance."""
    if not value:
        return None
    ordered = {name: value[name] for name in FIELDS if name in value}
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False)


def decode(stored: str | None) -> dict[str, str] | None:
    """The stored form read back; a damaged value reads as none, never an error."""
    if not stored:
        return None
    try:
        return checked(json.loads(stored))
    except (ValueError, ProvenanceError):
        return None


def without_free_text(value: Mapping[str, str] | None) -> tuple[dict[str, str] | None, list[str]]:
    """`value` without its free-text fields, and the names of those it had."""
    if not value:
        return None, []
    dropped = [name for name in FREE_TEXT if name in value]
    kept = {name: text for name, text in value.items() if name not in FREE_TEXT}
    return kept or None, dropped
