"""Request dependencies, named once as `Annotated` aliases for the routes.

They are `async def` because none of them blocks (a token lookup that misses the
cache goes to a worker thread): FastAPI would otherwise hop to the thread pool once
per dependency, which was half the cost of a 304.

`Reader` and `Writer` authenticate the bearer token, apply the rate limit, and check the
token's scope for the (validated, case-folded) `repo` of the request.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Header, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_server import personal
from sync_server.auth import Authenticator, Principal, scope_allows
from sync_server.config import Settings
from sync_server.errors import BadRequest, Forbidden, NotFound, RateLimited, Unauthorized
from sync_server.events import EventHub
from sync_server.metrics import Metrics
from sync_server.ratelimit import RateLimiter
from sync_server.service import TeamMemory
from sync_server.storage.base import Store

_bearer = HTTPBearer(auto_error=False, description="a memsync token (mst_...)")


async def get_settings(request: Request) -> Settings:
    """The application's settings."""
    settings: Settings = request.app.state.settings
    return settings


async def get_store(request: Request) -> Store:
    """The application's store."""
    store: Store = request.app.state.store
    return store


async def get_metrics(request: Request) -> Metrics:
    """The application's metrics."""
    metrics: Metrics = request.app.state.metrics
    return metrics


async def get_events(request: Request) -> EventHub:
    """The application's event hub (live updates)."""
    events: EventHub = request.app.state.events
    return events


async def get_team_memory(request: Request) -> TeamMemory:
    """The service every route reads and writes through (`sync_server.service`)."""
    service: TeamMemory = request.app.state.team_memory
    return service


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[Store, Depends(get_store)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
EventsDep = Annotated[EventHub, Depends(get_events)]
ServiceDep = Annotated[TeamMemory, Depends(get_team_memory)]


async def get_repo(
    request: Request,
    repo: Annotated[
        str,
        Query(
            min_length=1,
            max_length=201,
            description="owner/name (with space=personal, also ~: the global personal space)",
            examples=["acme/app"],
        ),
    ],
    space: Annotated[
        Literal["personal"] | None,
        Query(description="personal: the calling person's own space (docs/protocol.md 3.14)"),
    ] = None,
) -> str:
    """The `repo` query parameter, validated and case-folded; a bad name is a 400.

    With `space=personal`, the internal id of the caller's own personal space for it
    (`sync_server.personal`), which needs the token: the person is always the token's."""
    try:
        if space is None:
            return normalize_repo(repo)
        wire = personal.wire_repo(repo)
    except InvalidRepoError as error:
        raise BadRequest(str(error), details={"error_code": "invalid_repo"}) from error
    principal = await get_principal(request, None)
    if principal.person is None:
        # Worded, not the request echoed: "~" means nothing to the person reading it.
        raise NotFound(
            "this token belongs to no person, so it has no personal memory",
            error_code="no_team_memory",
        )
    if wire != personal.GLOBAL_REPO and not scope_allows(principal.repo_pattern, wire):
        raise Forbidden(f"this token may not access {wire}")
    return personal.space_id(principal.person, None if wire == personal.GLOBAL_REPO else wire)


RepoDep = Annotated[str, Depends(get_repo)]

MAX_AGENT_CHARS = 100


AgentHeader = Annotated[
    str | None,
    Header(
        max_length=MAX_AGENT_CHARS,
        description="the agent that wrote (e.g. claude-code), shown with a proposal",
    ),
]


async def get_agent(x_memsync_agent: AgentHeader = None) -> str | None:
    """The optional `X-Memsync-Agent` header: 1 to 100 printable characters, else a 400."""
    if x_memsync_agent is None:
        return None
    agent = x_memsync_agent.strip()
    if not agent or not agent.isprintable():
        raise BadRequest(
            "X-Memsync-Agent must be 1 to 100 printable characters",
            details={"error_code": "invalid_agent"},
        )
    return agent


AgentDep = Annotated[str | None, Depends(get_agent)]


async def get_principal(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Authenticate the caller and take one request from its rate-limit bucket.

    `_credentials` only declares the bearer scheme in the OpenAPI schema; the header is
    parsed by `Authenticator`, which also refuses non-bearer schemes with a 401.
    """
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is not None:  # already checked (and counted) for this request
        return cached
    authenticator: Authenticator = request.app.state.authenticator
    limiter: RateLimiter = request.app.state.rate_limiter
    try:
        principal = await authenticator.authenticate_async(request.headers.get("authorization"))
    except Unauthorized:
        # Failed attempts are limited per address, so guessing costs the guesser.
        client = request.client.host if request.client else "unknown"
        retry_after = limiter.check(f"ip:{client}")
        if retry_after:
            raise RateLimited(retry_after) from None
        raise
    # Named in the access log even when its own rate limit refuses it.
    request.state.principal_name = principal.name
    retry_after = limiter.check(f"token:{principal.lookup_id}")
    if retry_after:
        raise RateLimited(retry_after)
    request.state.principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def reader(repo: RepoDep, principal: PrincipalDep) -> Principal:
    """A caller allowed to read `repo`."""
    TeamMemory.require(principal, repo, write=False)
    return principal


async def writer(repo: RepoDep, principal: PrincipalDep) -> Principal:
    """A caller allowed to write `repo`."""
    TeamMemory.require(principal, repo, write=True)
    return principal


Reader = Annotated[Principal, Depends(reader)]
Writer = Annotated[Principal, Depends(writer)]
