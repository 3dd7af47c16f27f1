"""POST /verify: someone checked a note against the code; GET /provenance: each live
note's newest write or verification with its commit (docs/protocol.md 3.13).

Apart from the team-memory routes so that module keeps to reads and writes of texts;
mounted under both prefixes like them.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from sync_server.deps import Reader, RepoDep, ServiceDep, SettingsDep, Writer
from sync_server.models import ErrorBody, Sources, VerifyBody, VerifyResult, wire_time
from sync_server.personal import wire_name
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
    response_model=VerifyResult,
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
    result, dropped = service.verify(
        repo, body.key, author=principal, provenance=wire_provenance(body.provenance)
    )
    fields = write_fields(result, settings)
    if dropped:
        # A reviewed repo, a token that is not a reviewer: its free text is not kept.
        fields["provenanceDropped"] = dropped
    return json_response(fields, etag=result.head.checksum)


@router.get(
    "/provenance",
    summary="Each live key's newest write or verification: version, time, author, commit",
    response_model=Sources,
    responses=_ERRORS,
)
def key_sources(repo: RepoDep, _reader: Reader, service: ServiceDep) -> Response:
    """What a reader's freshness check compares a teammate's note from: the commit the
    writer's checkout had (null when not said), else the time. One query."""
    keys = {
        key: {
            "version": source.version,
            "checksum": source.checksum,
            "at": wire_time(source.at),
            "author": source.author,
            "commit": source.commit,
        }
        for key, source in sorted(service.sources(repo).items())
    }
    return json_response({"repo": wire_name(repo), "keys": keys})
