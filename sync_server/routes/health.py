"""Liveness, readiness and metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response

from sync_server.deps import MetricsDep, PrincipalDep, StoreDep
from sync_server.models import ErrorBody
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
