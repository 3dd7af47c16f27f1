"""Liveness, readiness, metrics, and what the calling token may do."""

from __future__ import annotations

from fastapi import APIRouter, Response

from sync_server.deps import MetricsDep, PrincipalDep, StoreDep
from sync_server.models import ErrorBody, TokenInfo, wire_time
from sync_server.routes.team_memory import json_response

router = APIRouter()


@router.get("/healthz", summary="Liveness: the process answers")
def healthz() -> Response:
    """Always 200 while the process serves requests; no token needed."""
    return json_response({"status": "ok"})


@router.get("/readyz", summary="Readiness: the database answers")
def readyz(store: StoreDep) -> Response:
    """200 when the database answers a query, else 503 with Retry-After; no token needed."""
    store.ping()
    return json_response({"status": "ready"})


@router.get(
    "/metrics",
    summary="Prometheus metrics (any valid token)",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        401: {"model": ErrorBody},
        429: {"model": ErrorBody},
    },
)
def metrics(_principal: PrincipalDep, registry: MetricsDep) -> Response:
    """Request counts and latencies by route template; never repos, keys or texts."""
    return Response(registry.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get(
    "/v1/token",
    summary="What the calling token may do (any valid token)",
    response_model=TokenInfo,
    responses={401: {"model": ErrorBody}, 429: {"model": ErrorBody}},
)
def token_info(principal: PrincipalDep) -> Response:
    """The token's name, repo pattern and access, so a client can check a token it saves."""
    return json_response(
        {
            "name": principal.name,
            "id": principal.lookup_id[:6],
            "repos": principal.repo_pattern,
            "access": "read-only" if principal.read_only else "read-write",
            "expiresAt": None if principal.expires_at is None else wire_time(principal.expires_at),
            "reviewer": principal.reviewer,
            "person": principal.person,
        }
    )
