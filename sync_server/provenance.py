"""Provenance on the wire, for the routes (docs/protocol.md 3.13).

A PUT, restore or verify carries it in its body (`provenance`); a DELETE, which has no
body, in the `X-Memsync-Provenance` header as the same JSON object. Either way a bad
value is a 400 `invalid_provenance`, never cut: history shows what was sent or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import Depends, Header

from memsync_protocol.provenance import MAX_CHARS, ProvenanceError, checked
from sync_server.errors import BadRequest

# Five fields of at most MAX_CHARS characters, their names and JSON punctuation.
MAX_HEADER_CHARS = 8 * MAX_CHARS


def wire_provenance(value: Mapping[str, Any] | None) -> dict[str, str] | None:
    """A request's provenance, checked; a 400 naming the field when it is refused."""
    try:
        return checked(value)
    except ProvenanceError as error:
        raise BadRequest(str(error), details={"error_code": "invalid_provenance"}) from None


async def get_provenance(
    x_memsync_provenance: Annotated[
        str | None,
        Header(
            max_length=MAX_HEADER_CHARS,
            description="a DELETE's provenance, as a JSON object (docs/protocol.md 3.13)",
        ),
    ] = None,
) -> dict[str, str] | None:
    """The optional `X-Memsync-Provenance` header of a DELETE."""
    if x_memsync_provenance is None:
        return None
    try:
        value = json.loads(x_memsync_provenance)
    except ValueError:
        raise BadRequest(
            "X-Memsync-Provenance must be a JSON object",
            details={"error_code": "invalid_provenance"},
        ) from None
    return wire_provenance(value)


ProvenanceDep = Annotated[dict[str, str] | None, Depends(get_provenance)]
