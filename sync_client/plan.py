"""Pure planning: local checksums + bases + server checksums -> what to do, per key.

This is git's three-way rule one key at a time (docs/protocol.md 4.3 and 4.4). Nothing here
touches the disk or the network, so every rule is a small unit test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum


class PullKind(Enum):
    """What a pull does with one key."""

    WRITE = "write"  # local absent or unchanged since base: take the server text
    SAME = "same"  # local already equals the server: only the base moves
    KEEP_LOCAL = "keep_local"  # changed here, not on the server: pending push
    CONFLICT = "conflict"  # changed on both sides: server wins, local copy saved
    DELETE = "delete"  # deleted on the server, unchanged here: remove the file
    FORGET = "forget"  # deleted on the server and already gone here: drop the base
    KEEP_DELETED = "keep_deleted"  # deleted on the server, changed here: keep, push later


@dataclass(frozen=True)
class PullAction:
    """One key's outcome."""

    key: str
    kind: PullKind


def plan_pull(
    local: Mapping[str, str],
    bases: Mapping[str, str],
    server: Mapping[str, str],
    deleted: Iterable[str],
) -> list[PullAction]:
    """Actions for the keys the server reported (changed or all) and those it deleted.

    `local`: key -> checksum of syncable local files; `bases`: key -> base checksum;
    `server`: key -> server checksum for the keys in this answer; `deleted`: keys the
    server no longer has.
    """
    actions: list[PullAction] = []
    for key in sorted(server):
        remote = server[key]
        here = local.get(key)
        base = bases.get(key)
        if here == remote:
            kind = PullKind.SAME
        elif here is None or here == base:
            kind = PullKind.WRITE
        elif remote == base:
            kind = PullKind.KEEP_LOCAL
        else:
            kind = PullKind.CONFLICT
        actions.append(PullAction(key, kind))
    for key in sorted(set(deleted) - set(server)):
        here = local.get(key)
        base = bases.get(key)
        if here is None:
            kind = PullKind.FORGET
        elif here == base:
            kind = PullKind.DELETE
        else:
            kind = PullKind.KEEP_DELETED
        actions.append(PullAction(key, kind))
    return actions


def push_delta(local: Mapping[str, str], bases: Mapping[str, str]) -> list[str]:
    """Keys whose local checksum differs from base (new keys included), sorted.

    A key with a base but no local file was deleted here: deleting locally never
    deletes for the team, so it is not in the delta.
    """
    return sorted(key for key, checksum in local.items() if bases.get(key) != checksum)


@dataclass(frozen=True)
class ConflictSort:
    """After a refused push: what is settled, what conflicts, what to send again."""

    done: list[str]
    conflicts: list[str]
    retry: list[str]


def sort_after_refusal(
    keys: Iterable[str],
    local: Mapping[str, str],
    bases: Mapping[str, str],
    server: Mapping[str, str],
) -> ConflictSort:
    """docs/protocol.md 4.3 step 5, for the keys of a refused batch, given the hashes view.

    Equal to the server already: done. Changed on the server since base (a teammate)
    and changed here: a conflict, never uploaded. Otherwise: upload again.
    """
    done, conflicts, retry = [], [], []
    for key in sorted(keys):
        remote = server.get(key)
        if remote == local[key]:
            done.append(key)
        elif remote != bases.get(key):
            conflicts.append(key)
        else:
            retry.append(key)
    return ConflictSort(done=done, conflicts=conflicts, retry=retry)


def allowed_keys(
    local_keys: Iterable[str], server_keys: Iterable[str], max_entries: int
) -> set[str]:
    """The local keys that fit under `max_entries` live entries on the server.

    Keys the server already has always fit (an update adds nothing). New keys fill the
    room left in alphabetical order, so the left-out files are always the
    alphabetically last ones, the same every time.
    """
    server = set(server_keys)
    mine = set(local_keys)
    new = sorted(mine - server)
    room = max(0, max_entries - len(server))
    return (mine & server) | set(new[:room])
