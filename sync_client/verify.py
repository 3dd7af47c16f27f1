"""`memsync verify KEY` and MCP `verify_note`: someone checked a note against the code.

The server records a verification (docs/protocol.md 3.13): a version of op `verify` by
this token's person, with the checkout's `HEAD` in its provenance, that changes no
text. Here the note's "written at" record (`freshness.record_written`) moves to that
`HEAD`, so `memsync stale` counts the note from the commit it was checked against.

Only the text the team has can be verified: a note edited here and not pushed, or one
the team changed since the last pull, is refused with what to do first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from memsync_protocol.checksums import entry_checksum
from memsync_protocol.keys import key_problem
from sync_client.errors import ConfigError
from sync_client.freshness import report as freshness
from sync_client.history import _ready
from sync_client.provenance import for_write
from sync_client.retries import with_retries
from sync_client.team_files import read_entry
from sync_client.workspace import Workspace

if TYPE_CHECKING:
    from sync_client.config import ClientConfig

FEATURE = "provenance"


class NotVerifiable(ConfigError):
    """The note cannot be verified as it is here (exit 2, with what to do)."""


def verify(
    workspace: Workspace,
    key: str,
    *,
    via: str = "cli",
    agent: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Record the verification of `key`: `{key, version, commit}` (`commit` None when
    the team dir is not in a git checkout: the verification then names no commit),
    and `not_recorded`, the provenance fields the server did not keep, when any.
    `agent` (`{agent, agentVersion}`, an MCP client's) goes in its provenance."""
    problem = key_problem(key)
    if problem is not None:
        raise NotVerifiable(f"{key!r} is not a note key: {problem}")
    base = workspace.state.bases.get(key)
    path = workspace.team_dir / key
    if base is None:
        raise NotVerifiable(
            f"{key}: not a synced note here (`memsync pull` first, or push it if it is new)"
        )
    try:
        text = read_entry(workspace.team_dir, key)
    except (OSError, UnicodeDecodeError, ValueError):
        text = None
    if text is None or entry_checksum(text) != base:
        raise NotVerifiable(
            f"{key} differs here from the team's text ({path}): push or discard your "
            "edit first, so what you verify is what the team reads"
        )
    if not _ready(workspace, FEATURE, f"memsync verify {key}"):
        raise NotVerifiable(f"{key}: the server holds no team memory for this repo yet")
    head = freshness.checkout_head(workspace)
    stamp = for_write(via, head, agent)
    result, dropped = with_retries(lambda: workspace.api.verify(key, stamp))
    freshness.record_written(workspace, [key], head=head)
    found: dict[str, Any] = {"key": key, "version": result.version, "commit": head}
    if dropped:
        found["not_recorded"] = dropped
    return found


def not_recorded_words(dropped: list[str]) -> str:
    """Why a verification's agent fields are not in history (a reviewed repo)."""
    return (
        f"the repo is reviewed and you are not a reviewer: its history keeps no "
        f"{', '.join(dropped)} of your verification (only who verified, and at which commit)"
    )


def verify_note(
    config: ClientConfig,
    key: str,
    *,
    timeout: float = 30.0,
    agent: str | None = None,
    agent_version: str | None = None,
) -> dict[str, Any]:
    """`verify` for MCP `verify_note`: its own connection, `via: mcp`, named for the MCP
    client (`agent`, `agent_version` from its `initialize`), as an MCP write is."""
    from sync_client.api import Api

    with Api(config.server, config.token, config.repo, timeout=timeout) as api:
        api.agent = agent
        workspace = Workspace.open(config.team_dir, config.state_dir, api)
        try:
            client = {"agent": agent, "agentVersion": agent_version}
            return verify(workspace, key, via="mcp", agent=client)
        finally:
            workspace.close()
