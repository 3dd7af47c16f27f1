"""POST /verify: someone checked a note against the code (docs/protocol.md 3.13).

Apart from the team-memory routes so that module keeps to reads and writes of texts;
mounted under both prefixes like them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from sync_server.deps import RepoDep, ServiceDep, SettingsDep, Writer
from sync_server.models import ErrorBody, VerifyBody, WriteResult
from sync_server.provenance import wire_provenance
from sync_server.routes.team_memory import json_response, write_fields
from sync_server.service import check_keys

router = APIRouter()

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 429, 503)
}


@router.post(
    "/verify",
    summary="Record that a live note was checked against the code (no text changes)",
    response_model=WriteResult,
    responses=_ERRORS,
)
def verify_entry(
    body: VerifyBody,
    repo: RepoDep,
    principal: Writer,
    settings: SettingsDep,
    service: ServiceDep,
) -> Response:
    """A new version with one `verify` row in history; texts and checksums unchanged."""
    check_keys([body.key], settings)
    result = service.verify(
        repo, body.key, author=principal, provenance=wire_provenance(body.provenance)
    )
    return json_response(write_fields(result, settings), etag=result.head.checksum)
