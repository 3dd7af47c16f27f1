"""`memsync-server token` and `memsync-server person`: access tokens, and the persons
whose tokens reach personal spaces (docs/protocol.md 3.14).

Registered on `memsync-server` by `sync_server.cli`; each command opens the store
through `cli_common`, as the other commands do.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from sync_server.cli_common import (
    _TIME,
    EXIT_CODES,
    EXIT_USAGE,
    _fail,
    _iso,
    _settings,
    _store,
    _tokens,
    print_table,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sync_server.storage.base import TokenRecord, TokenStore

# `token create --expires`: a whole number of hours, days or weeks.
_EXPIRY_PATTERN = re.compile(r"([1-9][0-9]{0,5})([hdw])")
_EXPIRY_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
MAX_EXPIRY = timedelta(days=3650)


# -- tokens ------------------------------------------------------------------------------


@click.group(epilog=EXIT_CODES)
def token() -> None:
    """Create, list and revoke access tokens."""


def parse_expiry(value: str) -> timedelta:
    """`90d`, `12h` or `2w` as a duration; `ValueError` for anything else."""
    match = _EXPIRY_PATTERN.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(
            f"--expires {value!r}: give a whole number of hours, days or weeks (12h, 90d, 2w)"
        )
    duration = int(match.group(1)) * _EXPIRY_UNITS[match.group(2)]
    if duration > MAX_EXPIRY:
        raise ValueError(f"--expires {value!r}: at most 3650 days; leave it out for no expiry")
    return duration


def _access(record: TokenRecord) -> str:
    """`read-only`, `read-write`, or `read-write, reviewer`, as the CLI shows a token."""
    if record.read_only:
        return "read-only"
    return "read-write, reviewer" if record.reviewer else "read-write"


def _token_state(record: TokenRecord, now: datetime) -> str:
    if record.revoked_at is not None:
        return "revoked"
    return "expired" if record.expired(now) else "live"


def token_names(names: tuple[str, ...], joined: str | None) -> list[str]:
    """The names of `--name` (repeated) and `--names a,b`, in order; each once."""
    wanted = list(names)
    if joined is not None:
        wanted += [part.strip() for part in joined.split(",")]
    if any(not name for name in wanted):
        raise ValueError("--names: an empty name (a stray comma?)")
    if any(not (len(name) <= 100 and name.isprintable()) for name in wanted):
        # issue_token's rule, checked for all names before the first token is made
        raise ValueError("a token name must be 1 to 100 printable characters")
    repeated = sorted({name for name in wanted if wanted.count(name) > 1})
    if repeated:
        raise ValueError(f"the name {repeated[0]!r} is given twice")
    return wanted


@token.command("create", epilog=EXIT_CODES)
@click.option("--repo", "repo_pattern", required=True, help="owner/name, owner/* or *.")
@click.option("--read-only", is_flag=True, help="May read but not write.")
@click.option(
    "--name",
    "names",
    multiple=True,
    help="Shown as the author of writes; no two live tokens share one. "
    "Repeat it to mint one token per name.",
)
@click.option(
    "--names", "joined", metavar="A,B,...", help="Several names at once, comma-separated."
)
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Stop working after this long: 12h, 90d or 2w (default: never).",
)
@click.option(
    "--reviewer",
    is_flag=True,
    help="In reviewed repos, its writes publish directly and it may accept or reject "
    "others' proposals (not with --read-only).",
)
@click.option(
    "--person",
    default=None,
    help="Whose personal spaces it reaches (one per machine may share a person); "
    "without it, none, whatever the name.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object on stdout: {"tokens": [{"name", "id", "repos", "access", '
    '"expiresAt", "reviewer", "person", "token"}]}.',
)
def token_create(
    repo_pattern: str,
    read_only: bool,
    names: tuple[str, ...],
    joined: str | None,
    expires: str | None,
    reviewer: bool,
    person: str | None,
    as_json: bool,
) -> None:
    """Mint a token (or one per --name); each token is printed once, on stdout.

    One token: alone on the last line. Several: one line each, NAME then the token,
    separated by a tab. All are minted or, when one cannot be (a name already live),
    none is.
    """
    from memsync_protocol.repos import normalize_scope
    from sync_server.auth import issue_token

    if reviewer and read_only:
        _fail("a reviewer token writes: --reviewer cannot go with --read-only", EXIT_USAGE)
    try:
        normalize_scope(repo_pattern)  # refuse bad input before touching the database
        lifetime = None if expires is None else parse_expiry(expires)
        if person is not None:
            from sync_server.personal import normalize_person

            person = normalize_person(person)
        wanted: list[str | None] = [*token_names(names, joined)] or [None]
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    from sync_server.storage.base import DuplicateTokenName

    with _tokens() as store:
        taken = {r.name: r for r in store.list_tokens() if r.revoked_at is None}
        clash = next((taken[name] for name in wanted if name in taken), None)
        if clash is not None:
            none_made = "; no token was created" if len(wanted) > 1 else ""
            _fail(f"{DuplicateTokenName(clash)}{none_made}", EXIT_USAGE)
        inherits = person is not None and _unclaimed_spaces(store, person, taken.values())
        expires_at = None if lifetime is None else datetime.now(UTC) + lifetime
        minted: list[tuple[TokenRecord, str]] = []
        for name in wanted:
            try:
                minted.append(
                    issue_token(
                        store,
                        repo_pattern=repo_pattern,
                        read_only=read_only,
                        name=name,
                        expires_at=expires_at,
                        reviewer=reviewer,
                        person=person,
                    )
                )
            except ValueError as error:
                # Another `token create` took the name meanwhile: take back the ones made.
                for record, _ in minted:
                    store.revoke_token(record.lookup_id)
                _fail(str(error), EXIT_USAGE)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "tokens": [
                        {
                            "name": record.name,
                            "id": record.lookup_id[:6],
                            "repos": record.repo_pattern,
                            "access": "read-only" if record.read_only else "read-write",
                            "expiresAt": _iso(record.expires_at),
                            "reviewer": record.reviewer,
                            "person": record.person,
                            "token": secret,
                        }
                        for record, secret in minted
                    ]
                },
                ensure_ascii=False,
            )
        )
        return
    for record, _ in minted:
        access = _access(record)
        if record.person is not None:
            access += f", person {record.person}"
        until = f", expires {record.expires_at.strftime(_TIME)} UTC" if record.expires_at else ""
        click.echo(
            f"created token {record.name!r} ({access}, repos: {record.repo_pattern}{until})",
            err=True,
        )
    if inherits:
        click.echo(
            f"note: {person} has personal memory on this server that no live token "
            f"reaches: {'these tokens reach' if len(minted) > 1 else 'this token reaches'} "
            f"it. If this {person} is someone else, revoke the new token and run "
            f"`memsync-server person delete {person} --yes` before making theirs",
            err=True,
        )
    click.echo("store it now: it is not shown again", err=True)
    if len(minted) == 1:
        click.echo(minted[0][1])
        return
    for record, secret in minted:
        click.echo(f"{record.name}\t{secret}")


def _unclaimed_spaces(store: TokenStore, person: str, live: Iterable[TokenRecord]) -> bool:
    """Whether `person` has personal spaces that no live token reaches (its tokens were
    revoked, or made before tokens had a person only by `--person`): a new token of
    that person inherits them, which `token create` says."""
    from sync_server.personal import prefix

    if any(record.person == person for record in live):
        return False
    return store.has_spaces(prefix(person))


@token.command("list", epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"tokens": [...]}.')
def token_list(as_json: bool) -> None:
    """List tokens with their scope, expiry and state (never their secrets)."""
    with _tokens() as store:
        records = store.list_tokens()
    now = datetime.now(UTC)
    if as_json:
        tokens = [
            {
                "name": record.name,
                "id": record.lookup_id[:6],
                "repos": record.repo_pattern,
                "access": "read-only" if record.read_only else "read-write",
                "reviewer": record.reviewer,
                "person": record.person,
                "createdAt": _iso(record.created_at),
                "expiresAt": _iso(record.expires_at),
                "revokedAt": _iso(record.revoked_at),
                "state": _token_state(record, now),
            }
            for record in records
        ]
        click.echo(json.dumps({"tokens": tokens}, ensure_ascii=False))
        return
    from rich.table import Table

    # The person column only when some token has a person: the table stays within 80
    # columns for a team that uses no personal spaces.
    with_person = any(record.person is not None for record in records)
    table = Table()
    # A name is never cut short (`…`): on a narrow terminal it wraps instead.
    table.add_column("name", overflow="fold")
    table.add_column("id")
    if with_person:
        table.add_column("person", overflow="fold")
    table.add_column("repos")
    table.add_column("access")
    table.add_column("created")
    table.add_column("expires")
    table.add_column("state")
    for record in records:
        person = [record.person or "-"] if with_person else []
        table.add_row(
            record.name,
            record.lookup_id[:6],
            *person,
            record.repo_pattern,
            _access(record),
            record.created_at.strftime(_TIME),
            record.expires_at.strftime(_TIME) if record.expires_at else "never",
            _token_state(record, now)
            + (f" {record.revoked_at.strftime(_TIME)}" if record.revoked_at else ""),
        )
    print_table(table)


@token.command("revoke", epilog=EXIT_CODES)
@click.argument("name_or_id")
def token_revoke(name_or_id: str) -> None:
    """Revoke the live tokens with this name (or id, as `token list` shows it)."""
    with _tokens() as store:
        revoked = store.revoke_token(name_or_id)
        if not revoked:
            matches = [r for r in store.list_tokens() if r.lookup_id.startswith(name_or_id)]
            if len(name_or_id) >= 6 and len(matches) == 1 and matches[0].revoked_at is None:
                revoked = store.revoke_token(matches[0].lookup_id)
    if not revoked:
        _fail(f"no live token named or with id {name_or_id!r}")
    click.echo(f"revoked {revoked} token(s)")


# -- repos -------------------------------------------------------------------------------
# -- persons -----------------------------------------------------------------------------


@click.group(epilog=EXIT_CODES)
def person() -> None:
    """List persons (whose tokens reach personal spaces) and delete one's spaces."""


@person.command("list", epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"persons": [...]}.')
def person_list(as_json: bool) -> None:
    """Every person with a live token or a personal space: live tokens, spaces, entries."""
    from sync_server.personal import persons

    found = persons(_store(_settings()))
    if as_json:
        rows = [
            {"person": p.person, "tokens": p.tokens, "spaces": p.spaces, "entries": p.entries}
            for p in found
        ]
        click.echo(json.dumps({"persons": rows}, ensure_ascii=False))
        return
    for p in found:
        spaces = ", ".join(p.spaces) or "none"
        click.echo(f"{p.person}\t{p.tokens} live token(s)\tspaces: {spaces}\t{p.entries} entries")


@person.command("delete", epilog=EXIT_CODES)
@click.argument("name", metavar="NAME")
@click.option("--yes", is_flag=True, help="Really delete; without it, only say what would go.")
def person_delete(name: str, yes: bool) -> None:
    """Delete every personal space of NAME: its notes and their whole history, for good.

    Without --yes nothing is deleted: it says what would be (exit 2). The person's
    tokens stay (revoke them with `token revoke`); a later write starts a space again.
    """
    from sync_server.personal import delete_person, normalize_person, persons

    try:
        who = normalize_person(name)
    except ValueError as error:
        _fail(str(error), EXIT_USAGE)
    store = _store(_settings())
    found = next((p for p in persons(store) if p.person == who), None)
    if not yes:
        if found is None or not found.spaces:
            _fail(f"{who} has no personal space on this server")
        _fail(
            f"would delete {len(found.spaces)} personal space(s) of {who} "
            f"({found.entries} entries) and all their history; run again with --yes",
            EXIT_USAGE,
        )
    removed = delete_person(store, who)
    if not removed.spaces:
        _fail(f"{who} has no personal space on this server")
    click.echo(
        f"deleted {len(removed.spaces)} personal space(s) of {who}: "
        f"{removed.entries} entries, {removed.history} history rows and "
        f"{removed.proposals} proposals; no row of them is left"
    )
