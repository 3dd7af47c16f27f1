"""The review inbox on the wire (docs/protocol.md section 3.12): list proposals, read
one, accept, reject.

Mounted with the team-memory routes, under both prefixes. Who may see and decide
what is `TeamMemory`'s to say (a reviewer sees every author's proposals and decides;
anyone else with read access sees only their own); these routes parse, call it, and
shape the answer with `sync_server.review.proposal_view`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from sync_server.deps import Reader, RepoDep, ServiceDep, SettingsDep, Writer
from sync_server.models import (
    MAX_VERSION,
    AcceptResult,
    ErrorBody,
    ProposalList,
    ProposalView,
    RejectBody,
    RejectedView,
)
from sync_server.personal import wire_name
from sync_server.review import proposal_view
from sync_server.routes.team_memory import (
    encode_json,
    encoded_response,
    json_response,
    write_fields,
)

router = APIRouter()

_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody} for status in (400, 401, 403, 404, 429, 503)
}
ProposalId = Annotated[int, Path(ge=1, le=MAX_VERSION, description="the proposal's id")]


@router.get(
    "/proposals",
    summary="Proposals waiting for review (a reviewer: everyone's; others: their own)",
    response_model=ProposalList,
    responses=_ERRORS,
)
def list_proposals(
    request: Request,
    repo: RepoDep,
    principal: Reader,
    settings: SettingsDep,
    service: ServiceDep,
    status: Annotated[
        Literal["pending", "decided", "all"], Query(description="which proposals")
    ] = "pending",
    texts: Annotated[
        bool, Query(description="1: each key's texts, the team's, and similar notes")
    ] = False,
) -> Response:
    """Newest first, at most 200."""
    found = service.proposals(principal, repo, status=status, texts=texts)
    similar = service.similar(repo, found) if texts else {}
    views = []
    for proposal in found:
        view = proposal_view(proposal, texts=texts)
        if texts:
            view["similar"] = similar.get(proposal.id, [])
        views.append(view)
    payload = {
        "repo": wire_name(repo),
        "review": {"on": service.review_policy(repo), "reviewer": service.is_reviewer(principal)},
        "proposals": views,
    }
    return encoded_response(request, settings, encode_json(payload), etag=None)


@router.get(
    "/proposals/{proposal_id}",
    summary="One proposal with its texts and the team's",
    response_model=ProposalView,
    responses=_ERRORS,
)
def show_proposal(
    request: Request,
    proposal_id: ProposalId,
    repo: RepoDep,
    principal: Reader,
    settings: SettingsDep,
    service: ServiceDep,
) -> Response:
    """Someone else's proposal (to a token that is not a reviewer) is a 404."""
    proposal = service.proposal(principal, repo, proposal_id)
    view = proposal_view(proposal, texts=True)
    view["similar"] = service.similar(repo, [proposal]).get(proposal.id, [])
    return encoded_response(request, settings, encode_json(view), etag=None)


@router.post(
    "/proposals/{proposal_id}/accept",
    summary="Accept a proposal: one commit by its author, merged like a pull (reviewers)",
    response_model=AcceptResult,
    responses={**_ERRORS, 409: {"model": ErrorBody}, 413: {"model": ErrorBody}},
)
def accept_proposal(
    proposal_id: ProposalId,
    repo: RepoDep,
    principal: Writer,
    settings: SettingsDep,
    service: ServiceDep,
) -> Response:
    """409 `proposal_conflict` when it does not merge (nothing changes; it stays
    pending), 409 `proposal_decided` when it is not pending."""
    accepted = service.accept(principal, repo, proposal_id)
    payload = {
        **write_fields(accepted, settings),
        "proposal": proposal_view(accepted.proposal, texts=False),
    }
    return json_response(payload, etag=accepted.head.checksum)


@router.post(
    "/proposals/{proposal_id}/reject",
    summary="Reject a proposal, with a reason its author sees (reviewers)",
    response_model=RejectedView,
    responses={**_ERRORS, 409: {"model": ErrorBody}},
)
def reject_proposal(
    body: RejectBody,
    proposal_id: ProposalId,
    repo: RepoDep,
    principal: Writer,
    service: ServiceDep,
) -> Response:
    """The reason: 1 to 500 characters after stripping, no control character but newline."""
    rejected = service.reject(principal, repo, proposal_id, body.reason)
    return json_response({"proposal": proposal_view(rejected, texts=False)})
