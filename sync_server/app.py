"""The application factory: `create_app(settings)` builds one server over one store.

Every error leaves as `{"error": {"type", "message", "details"}}` JSON with its status,
never a stack trace. Request bodies are capped before they are parsed. The access log
records method, path (no query string), status, duration, repo, client address and the
token's name (`sync_server.logs`): never entry text, keys of a body, or a token. A
refused token is named by its public lookup id; a client that left before its answer is
a 499, never a 5xx; an event stream is logged when it opens and when it ends.
"""

from __future__ import annotations

import gc
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sync_server import __version__
from sync_server.auth import Authenticator
from sync_server.compression import GZIP, CorruptBody, GzipBody, max_compressed_bytes
from sync_server.config import Settings
from sync_server.errors import (
    ApiError,
    BadRequest,
    BodyTooLarge,
    MethodNotAllowed,
    NotFound,
    UnsupportedMediaType,
)
from sync_server.events import STREAM_END_STATE, EventHub
from sync_server.fast_put import FastPut, InFlight, replaying
from sync_server.logs import (
    CLIENT_CLOSED_REQUEST,
    REFUSED_ID_PREFIX,
    AccessLog,
    client_address,
    request_repo,
    text_path,
)
from sync_server.metrics import Metrics
from sync_server.ratelimit import RateLimiter
from sync_server.routes import health, review, team_memory
from sync_server.routes import verify as verify_routes
from sync_server.routes.team_memory import (
    ResponseCache,
    error_response,
    json_response,
    unexpected_error_response,
)
from sync_server.service import TeamMemory
from sync_server.storage.base import Store
from sync_server.storage.factory import open_store
from sync_server.ui import install as install_ui
from sync_server.ui import root_page

access_log = logging.getLogger("memsync.access")
_access = AccessLog(access_log)
log = logging.getLogger("memsync.server")

API_PREFIXES = ("/v1/team_memory", "/api/claude_code/team_memory")
# Metrics are labelled by these paths only, so unknown paths cannot grow the label set.
_KNOWN_PATHS = frozenset(
    ["/", "/healthz", "/readyz", "/metrics", "/v1/token", "/openapi.json", "/docs", "/redoc"]
    + [
        prefix + suffix
        for prefix in API_PREFIXES
        for suffix in (
            "",
            "/history",
            "/restore",
            "/events",
            "/log",
            "/deleted",
            "/proposals",
            "/proposals/{id}",
            "/proposals/{id}/accept",
            "/proposals/{id}/reject",
        )
    ]
)
# A proposal's id in a path is labelled `{id}`, so ids cannot grow the label set either.
_PROPOSAL_ID = re.compile(r"(?<=/proposals/)\d{1,19}(?=/accept$|/reject$|$)")
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/event-stream")
        for name, value in headers
    )


def _who(scope: Scope, status: int) -> tuple[str, dict[str, Any]]:
    """`by=` and its JSON fields: the token's name; for a refused well-formed token
    (unknown, revoked or expired: a 401, or a 429 once such attempts are limited), its
    public lookup id, from the `Authorization` header or, for the web page's sign-in
    form, as the page noted it; else `-`."""
    state = scope.get("state") or {}
    name = state.get("principal_name")
    if name is not None:
        return str(name), {"token_name": name}
    lookup_id = state.get("refused_token_id")
    if lookup_id is None and status in (401, 429):
        for header, value in scope["headers"]:
            if header == b"authorization":
                lookup_id = Authenticator.lookup_id_of(value.decode("latin-1"))
                break
    if lookup_id is not None:
        return REFUSED_ID_PREFIX + lookup_id, {"token_name": "-", "token_id": lookup_id}
    return "-", {"token_name": "-"}


class RequestGuard:
    """Pure ASGI middleware: body cap, timing, metrics and the access log.

    The body of a write is read here, up to the limit, before any parsing: a client
    cannot make the server buffer more than `max_body_bytes`, and an oversized body
    gets the structured 413 whatever its Content-Length claims. A gzip body (when the
    server accepts them) is expanded here under the same limit; any other
    Content-Encoding is a 415.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        metrics: Metrics,
        accept_gzip: bool,
        in_flight: InFlight,
    ) -> None:
        self.app = app
        self.in_flight = in_flight
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics
        self.accept_gzip = accept_gzip

    async def _reply(self, send: Send, error: ApiError) -> None:
        response = error_response(error)
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": response.raw_headers,
            }
        )
        await send({"type": "http.response.body", "body": response.body})

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes | ApiError | None:
        """The whole body (expanded, if sent compressed), an error to answer with, or
        None when the client left.

        The limit is on the expanded bytes: a gzip body is expanded as it arrives and
        refused as soon as it would pass the limit, never held whole beyond it.
        """
        declared = None
        encoding = ""
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
            elif name == b"content-encoding":
                encoding = value.decode("latin-1").strip().lower()
        expander: GzipBody | None = None
        wire_limit = self.max_body_bytes
        if encoding not in ("", "identity"):
            if encoding != GZIP or not self.accept_gzip:
                accepted = " (send gzip or no Content-Encoding)" if self.accept_gzip else ""
                return UnsupportedMediaType(
                    f"this server does not accept Content-Encoding {encoding[:40]!r}{accepted}",
                    details={"error_code": "unsupported_encoding"},
                )
            expander = GzipBody(self.max_body_bytes)
            wire_limit = max_compressed_bytes(self.max_body_bytes)
        if declared is not None:
            if not declared.isdigit():
                return BadRequest("Content-Length must be a number")
            if int(declared) > wire_limit:
                return BodyTooLarge(self.max_body_bytes)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > wire_limit:
                return BodyTooLarge(self.max_body_bytes)
            if expander is None:
                chunks.append(chunk)
            else:
                try:
                    if not expander.feed(chunk):
                        return BodyTooLarge(self.max_body_bytes)
                except CorruptBody as error:
                    return BadRequest(str(error), details={"error_code": "invalid_encoding"})
            if not message.get("more_body", False):
                break
        if expander is None:
            return b"".join(chunks)
        try:
            body = expander.finish()
        except CorruptBody as error:
            return BadRequest(str(error), details={"error_code": "invalid_encoding"})
        # The app below sees a plain body: no Content-Encoding, its real length.
        scope["headers"] = [
            (name, value)
            for name, value in scope["headers"]
            if name not in (b"content-encoding", b"content-length")
        ] + [(b"content-length", str(len(body)).encode())]
        self.metrics.compressed_requests.labels(GZIP).inc()
        return body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        method = scope["method"]
        response_started = False
        stream_opened = False
        logged = False
        in_flight = self.in_flight
        in_flight.count += 1
        counted = True

        def log_once(stream_end: str | None = None) -> None:
            nonlocal logged
            if logged:
                return
            logged = True
            path = scope.get("path", "")
            template = _PROPOSAL_ID.sub("{id}", path, count=1)
            template = template if template in _KNOWN_PATHS else "unmatched"
            elapsed = time.perf_counter() - started
            self.metrics.observe(method, template, status, elapsed)
            if stream_opened:
                self._log_stream_end(scope, status, elapsed, stream_end or "client-gone")
            else:
                self._log_request(scope, status, elapsed)

        async def timed_send(message: Message) -> None:
            nonlocal status, response_started, stream_opened, counted
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                elapsed_ms = (time.perf_counter() - started) * 1000
                headers = list(message.get("headers", []))
                if status == 200 and _is_event_stream(headers):
                    stream_opened = True
                    in_flight.count -= 1  # from now on it waits for events
                    counted = False
                    self._log_stream_open(scope, status)
                    # The stream reports its end at once (`EventStreamResponse`): on a
                    # shutdown the loop may stop before this middleware's `finally`.
                    scope.setdefault("state", {})[STREAM_END_STATE] = log_once
                headers.append((b"server-timing", f"app;dur={elapsed_ms:.3f}".encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            if method in _BODY_METHODS:
                body = await self._read_body(scope, receive)
                if body is None:
                    status = CLIENT_CLOSED_REQUEST  # it left in the middle of its body
                    return
                if isinstance(body, ApiError):
                    await self._reply(timed_send, body)
                    return
                await self.app(scope, replaying(body, receive), timed_send)
            else:
                await self.app(scope, receive, timed_send)
        except ClientDisconnect:
            if response_started:
                raise
            status = CLIENT_CLOSED_REQUEST
        finally:
            if counted:
                in_flight.count -= 1
            log_once()

    @staticmethod
    def _fields(scope: Scope, status: int) -> tuple[str, str, str, str, dict[str, Any]]:
        """(path, repo, client, by, JSON fields) of a request's access-log line."""
        path = scope.get("path", "")
        repo = request_repo(scope.get("query_string", b""), path)
        client = client_address(scope)
        by, who = _who(scope, status)
        extra = {
            "method": scope["method"],
            "path": path,
            "status": status,
            "repo": repo,
            "client": client,
            **who,
        }
        return path, repo, client, by, extra

    def _log_request(self, scope: Scope, status: int, elapsed: float) -> None:
        path, repo, client, by, extra = self._fields(scope, status)
        ms = elapsed * 1000
        extra["duration_ms"] = round(ms, 1)
        _access.write(
            f"{scope['method']} {text_path(path)} {status:d} {ms:.1f}ms"
            f" repo={repo} client={client} by={by}",
            extra,
        )

    def _log_stream_open(self, scope: Scope, status: int) -> None:
        path, repo, client, by, extra = self._fields(scope, status)
        extra["stream"] = "open"
        _access.write(
            f"{scope['method']} {text_path(path)} {status:d} open"
            f" repo={repo} client={client} by={by}",
            extra,
        )

    def _log_stream_end(self, scope: Scope, status: int, elapsed: float, end_reason: str) -> None:
        path, repo, client, by, extra = self._fields(scope, status)
        ms = elapsed * 1000
        extra.update(duration_ms=round(ms, 1), stream="end", end_reason=end_reason)
        _access.write(
            f"{scope['method']} {text_path(path)} {status:d} end {ms:.1f}ms"
            f" reason={end_reason} repo={repo} client={client} by={by}",
            extra,
        )


class MemsyncApp(FastAPI):
    """FastAPI with `front` put around its middleware stack: memsync's guard and fast
    PUT run first, outside FastAPI's error, telemetry and body-limit layers, which
    every request the fast PUT hands on still crosses (a fast PUT answers its own
    errors, `FastPut`)."""

    front: Callable[[ASGIApp], ASGIApp] | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        return stack if self.front is None else self.front(stack)


def _validation_error(_request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    problems: list[dict[str, Any]] = []
    for problem in error.errors():
        described = {
            "loc": [str(part) for part in problem.get("loc", ())],
            "message": str(problem.get("msg", "invalid")),
            "type": str(problem.get("type", "invalid")),
        }
        # A parameter shared by several dependencies is reported once per use.
        if described not in problems:
            problems.append(described)
    json_broken = any(problem["type"] == "json_invalid" for problem in problems)
    message = "the body is not valid JSON" if json_broken else "the request is malformed"
    return error_response(BadRequest(message, details={"problems": problems}))


def _http_error(_request: Request, error: Exception) -> Response:
    assert isinstance(error, StarletteHTTPException)
    mapped: ApiError
    if error.status_code == 404:
        mapped = NotFound("no such path")
    elif error.status_code == 405:
        mapped = MethodNotAllowed("method not allowed on this path")
    elif error.status_code == 415:
        mapped = UnsupportedMediaType("send the body as application/json")
    elif 400 <= error.status_code < 500:
        mapped = BadRequest(str(error.detail))
        mapped.status = error.status_code
    else:
        mapped = ApiError("internal error")
    response = error_response(mapped)
    if error.headers:
        response.headers.update(error.headers)
    return response


def _api_error(_request: Request, error: Exception) -> Response:
    assert isinstance(error, ApiError)
    return error_response(error)


def _unexpected_error(_request: Request, error: Exception) -> Response:
    return unexpected_error_response(error)


DOCS_ASSETS = "/docs/assets"


def _mount_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc, their JS and CSS served from `fastapi_offline`."""
    assets = resources.files("fastapi_offline") / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(assets)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            oauth2_redirect_url=None,
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            with_google_fonts=False,
        )


# What `GET /` points to: the web page, the API's docs and schema, the health check.
ROOT_LINKS = {
    "ui": "/ui/",
    "docs": "/docs",
    "redoc": "/redoc",
    "openapi": "/openapi.json",
    "health": "/healthz",
}


def _mount_root(app: FastAPI) -> None:
    """`GET /`: a small page of links for a browser, the same links as JSON otherwise
    (someone who opens the server's address should learn where to go, not see a 404)."""

    @app.get("/", include_in_schema=False)
    def root(request: Request) -> Response:
        if "text/html" in request.headers.get("accept", ""):
            response = root_page(__version__, ROOT_LINKS)
        else:
            response = json_response(
                {"name": "memsync", "version": __version__, "links": ROOT_LINKS}
            )
        response.headers["Vary"] = "Accept"
        return response


def create_app(settings: Settings | None = None, *, store: Store | None = None) -> FastAPI:
    """Build the server: routes at both prefixes, over `store` (or one from settings)."""
    settings = settings or Settings()
    the_store: Store = (
        store
        if store is not None
        else open_store(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if settings.auto_migrate:
            the_store.migrate()
        if settings.history_days is not None:
            cutoff = datetime.now(UTC) - timedelta(days=settings.history_days)
            the_store.prune_history(cutoff)
        # Everything built so far lives as long as the app: keep it out of the cyclic
        # collector's full passes, which otherwise cost 30-45 ms every few dozen writes.
        gc.freeze()
        try:
            yield
        finally:
            await events.stop()
            the_store.close()

    app = MemsyncApp(
        title="memsync",
        version=__version__,
        summary="Self-hosted sync of a team's shared agent memory.",
        lifespan=lifespan,
        # FastAPI's own /docs and /redoc load their scripts from a CDN: ours below
        # serve them from the installed package, so they work without the internet.
        docs_url=None,
        redoc_url=None,
    )
    _mount_docs(app)
    _mount_root(app)
    metrics = Metrics()
    authenticator = Authenticator(the_store, settings.token_cache_seconds)
    events = EventHub(the_store, settings, metrics, find_tokens=authenticator.refresh)
    app.state.settings = settings
    app.state.store = the_store
    app.state.metrics = metrics
    app.state.events = events
    app.state.team_memory = TeamMemory(the_store, settings, metrics, events)
    app.state.authenticator = authenticator
    app.state.rate_limiter = RateLimiter(settings.rate_limit_burst, settings.rate_limit_per_second)
    app.state.response_cache = ResponseCache(settings.response_cache_bytes)

    handlers: dict[Any, Callable[[Request, Exception], Response | Awaitable[Response]]] = {
        ApiError: _api_error,
        RequestValidationError: _validation_error,
        StarletteHTTPException: _http_error,
        Exception: _unexpected_error,
    }
    for exception_class, handler in handlers.items():
        app.add_exception_handler(exception_class, handler)

    app.include_router(health.router)
    app.include_router(team_memory.router, prefix=API_PREFIXES[0], tags=["team memory"])
    app.include_router(team_memory.router, prefix=API_PREFIXES[1], include_in_schema=False)
    app.include_router(review.router, prefix=API_PREFIXES[0], tags=["review"])
    app.include_router(review.router, prefix=API_PREFIXES[1], include_in_schema=False)
    app.include_router(verify_routes.router, prefix=API_PREFIXES[0], tags=["team memory"])
    app.include_router(verify_routes.router, prefix=API_PREFIXES[1], include_in_schema=False)
    install_ui(app, settings, the_store)
    # The guard (body cap, log, metrics, the requests in flight), then the fast PUT,
    # then FastAPI's own stack (`MemsyncApp`).
    in_flight = InFlight()

    def front(stack: ASGIApp) -> ASGIApp:
        fast_put = FastPut(stack, in_flight=in_flight)
        return RequestGuard(
            fast_put,
            max_body_bytes=settings.max_body_bytes,
            metrics=metrics,
            accept_gzip=settings.compression,
            in_flight=in_flight,
        )

    app.front = front
    return app
