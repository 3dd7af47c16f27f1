"""`memsync review`: a reviewed repo's proposals, and a reviewer's accept and reject
(`sync_client/review/proposals.py`; docs/users.md "Reviewed team memory")."""

from __future__ import annotations

import sys
from typing import Any

import click

from sync_client.cli._common import (
    EXIT_NEEDS_USER,
    EXIT_OK,
    _diff_painter,
    _emit,
    _HelpGroup,
    _say,
    _workspace,
    global_options,
    run_safely,
)


@click.group(cls=_HelpGroup, order=("show", "accept", "reject"), invoke_without_command=True)
@global_options
@click.pass_context
@run_safely
def review(ctx: click.Context) -> None:
    """List the proposals waiting for review, with their diffs.

    In a reviewed repo a teammate's edit is a proposal until a reviewer accepts it.
    Without a subcommand: every pending proposal you may see (a reviewer: everyone's;
    anyone else: their own), each with its author, agent, time, keys, a diff against
    the team's current text and existing notes on the same topic.

    \b
    Exit codes:
      0  listed, accepted or rejected
      1  failed: network, server or auth (a reviewer's command by a non-reviewer:
         the server refuses the token's access)
      2  usage or configuration error, an unknown proposal ID, or one already decided
      3  accept: the team's text moved and overlaps the proposal (nothing changed, it
         stays pending)
    """
    if ctx.invoked_subcommand is not None:
        return
    from sync_client.review.proposals import review_list

    with _workspace() as workspace:
        result = review_list(workspace)

    def human() -> None:
        items = result["proposals"]
        if not result["review"]["on"] and not items:
            _say(f"{result['repo']} is not reviewed: every write reaches the team")
            return
        if not items:
            _say("no proposals wait for review")
            return
        for item in items:
            _proposal_lines(item)

    _emit(result, human)


def _paint() -> Any:
    return _diff_painter()


def _agent_words(item: dict[str, Any]) -> str:
    """The agent part of a proposal's line, `, agent claude-code 2.1.197, session 5e55`
    (the header's name, else what its provenance says; nothing when neither names one)."""
    given = item.get("provenance")
    said: dict[str, Any] = given if isinstance(given, dict) else {}
    agent = item.get("agent") or said.get("agent")
    version = said.get("agentVersion") if agent and agent == said.get("agent") else None
    words = " ".join(str(part) for part in (agent, version) if part)
    if said.get("session"):
        words = f"{words}, session {said['session']}" if words else f"session {said['session']}"
    return f", agent {words}" if agent else f", {words}" if words else ""


def _proposal_lines(item: dict[str, Any]) -> None:
    """One proposal as a person reads it; the diff as `memsync diff` prints one."""
    paint = _paint()
    agent = _agent_words(item)
    author = str(item["author"])
    person = item.get("person")
    if isinstance(person, str) and person and person != author:
        # One person's machines each have a token: say whose it is and which machine.
        author = f"{person} ({author})"
    _say(f"proposal {item['id']}: {item['status']}, by {author}{agent}, at {item.get('at')}")
    if item.get("decidedBy"):
        reason = f": {item['reason']!r}" if item.get("reason") else ""
        _say(f"  {item['status']} by {item['decidedBy']}{reason}")
    for row in item.get("keys") or []:
        change = (
            "delete"
            if row.get("op") == "delete"
            else "new"
            if row.get("teamText") is None
            else "edit"
        )
        click.echo(
            paint(f"== {row['key']} ({change}): team's text against the proposal\n"), nl=False
        )
        click.echo(paint(row.get("diff") or "(no change)\n"), nl=False)
    similar = item.get("similar") or []
    if similar:
        shown = ", ".join(
            f"{row.get('key')} ({row.get('title')})" if row.get("title") else str(row.get("key"))
            for row in similar
            if isinstance(row, dict)
        )
        _say(f"  similar notes: {shown}")


@review.command()
@click.argument("proposal_id", metavar="ID", type=click.IntRange(min=1))
@global_options
@run_safely
def show(proposal_id: int) -> None:
    """Show one proposal: its texts' diff against the team's, who, when, its status.

    \b
    Exit codes:
      0  shown
      1  failed: network, server or auth
      2  usage or configuration error, or no proposal ID you may see
    """
    from sync_client.review.proposals import review_one

    with _workspace() as workspace:
        result = review_one(workspace, proposal_id)
    _emit(result, lambda: _proposal_lines(result))


@review.command()
@click.argument("proposal_ids", metavar="ID...", nargs=-1, type=click.IntRange(min=1))
@click.option(
    "--all",
    "accept_all",
    is_flag=True,
    help="Accept the proposals `memsync review` last listed, as listed.",
)
@global_options
@run_safely
def accept(proposal_ids: tuple[int, ...], accept_all: bool) -> None:
    """Accept proposals (a reviewer): each becomes one commit, merged with the team's
    text when that moved since (as a pull merges); the log names you as the one who
    accepted it.

    A proposal whose edits overlap the team's newer text is refused with the conflict
    shown; nothing changes and it stays pending (`memsync review show ID`).

    --all accepts what you were shown: the proposals `memsync review` last listed
    here, once. One its author replaced since (an edit makes a new proposal) is not
    accepted, nor one that arrived since: each is named, to look at first.

    \b
    Exit codes:
      0  accepted
      1  failed: network, server or auth (not a reviewer: the server refuses)
      2  usage or configuration error, an unknown ID, or one already decided;
         --all with no listing on record (run `memsync review` first)
      3  a proposal was refused for a conflict, or changed or arrived since the
         listing (the others were accepted)
    """
    from sync_client.review.proposals import accept_many

    if bool(proposal_ids) == accept_all:
        raise click.UsageError("give proposal IDs or --all (not both)")
    with _workspace() as workspace:
        result = accept_many(workspace, list(proposal_ids) if proposal_ids else None)

    def human() -> None:
        for row in result["accepted"]:
            _say(f"accepted proposal {row['id']}: version {row['version']}")
        for row in result["conflicts"]:
            _say(f"conflict: {row['message']}")
        for row in result["changed"]:
            _say(row["message"])
        for row in result["decided"]:
            by = f" by {row['by']}" if row.get("by") else ""
            _say(f"proposal {row['id']} was {row['status']}{by} meanwhile")
        if not any(result[name] for name in ("accepted", "conflicts", "changed", "decided")):
            _say("no proposals wait for review")

    _emit(result, human)
    sys.exit(EXIT_NEEDS_USER if result["conflicts"] or result["changed"] else EXIT_OK)


@review.command()
@click.argument("proposal_id", metavar="ID", type=click.IntRange(min=1))
@click.option("--reason", required=True, metavar="TEXT", help="Why (the author sees it).")
@global_options
@run_safely
def reject(proposal_id: int, reason: str) -> None:
    """Reject a proposal (a reviewer), saying why: its author's next pull puts the
    team's text back, saves theirs as a copy and says who rejected it and why.

    \b
    Exit codes:
      0  rejected
      1  failed: network, server or auth (not a reviewer: the server refuses)
      2  usage or configuration error (no or a bad reason), an unknown ID, or one
         already decided
    """
    from sync_client.review.proposals import reject_one

    with _workspace() as workspace:
        result = reject_one(workspace, proposal_id, reason)
    _emit(
        result,
        lambda: _say(f"rejected proposal {proposal_id} ({result['author']}): {reason.strip()!r}"),
    )


COMMANDS = (review,)
