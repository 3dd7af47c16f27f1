"""`memsync verify KEY`: record that you checked a note against the code at `HEAD`.

The library side is `sync_client.verify`; this module only words it.
"""

from __future__ import annotations

import click

from sync_client.cli._common import _emit, _say, _workspace, global_options, run_safely


@click.command()
@click.argument("key")
@global_options
@run_safely
def verify(key: str) -> None:
    """Record that you checked KEY against the code as it is at HEAD.

    The server keeps it in the note's history (a version of op `verify` by you, at
    this checkout's HEAD) without changing its text, and `memsync stale` counts the
    note from that commit: it is fresh again. Verify the team's text: push or
    discard a local edit first.

    \b
    Exit codes:
      0  recorded
      1  failed: network, server or auth, or a server too old for it
      2  usage or configuration error (an invalid KEY, a note not synced here, or
         edited here and not pushed)
    """
    from sync_client.verify import verify as verify_now

    with _workspace() as workspace:
        result = verify_now(workspace, key)

    def human() -> None:
        at = f" at {result['commit'][:12]}" if result["commit"] else ""
        _say(f"verified {result['key']}{at} (version {result['version']})")
        if result.get("not_recorded"):
            from sync_client.verify import not_recorded_words

            _say(not_recorded_words(result["not_recorded"]))

    _emit(result, human)


COMMANDS = (verify,)
