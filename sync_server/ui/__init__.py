"""The web page served by memsync-server itself at /ui/: read a team's memory, see who
changed what, restore and delete notes, review proposals in a reviewed repo (`review`),
read one's own personal spaces (`mine`), in any browser, without JavaScript.

`install(app, settings, store)` adds the routes (`routes`), the stylesheet, the error
pages and the headers every /ui/ answer carries: a Content-Security-Policy that allows
nothing but this server's stylesheet and forms, no framing, no referrer, no sniffing.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sync_server.auth import Authenticator
from sync_server.config import Settings
from sync_server.storage.base import Store
from sync_server.ui import mine, review
from sync_server.ui.routes import UiProblem, page, problem_context, router
from sync_server.ui.session import COOKIE_NAME, COOKIE_PATH, Sessions, ui_secret

PREFIX = "/ui"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


class UiHeaders:
    """Pure ASGI middleware: the security headers on every answer under /ui."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                headers = [h for h in message.get("headers", []) if h[0].lower() not in names]
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)


def _problem_page(request: Request, error: Exception) -> Response:
    assert isinstance(error, UiProblem)
    if error.status == 401:
        response = page("signin.html", 401, who=None, message=error.message)
        if request.cookies.get(COOKIE_NAME):
            response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    else:
        response = page(
            "problem.html", error.status, message=error.message, **problem_context(request)
        )
    response.headers.update(error.headers)
    return response


def root_page(version: str, links: dict[str, str]) -> Response:
    """The answer to a browser at the server's address: where the web page and the API
    docs are (served outside /ui, so it carries the page's headers itself)."""
    response = page("root.html", who=None, version=version, links=links)
    for name, value in SECURITY_HEADERS:
        response.headers[name.decode()] = value.decode()
    return response


def install(app: FastAPI, settings: Settings, store: Store) -> None:
    """Serve the web page from `app`: routes, stylesheet, error pages, headers.

    The session key is MEMSYNC_UI_SECRET or the database's own, read on first use
    (the schema may not exist before the app starts and migrates it).
    """

    app.state.ui_sessions = Sessions(lambda: ui_secret(settings.ui_secret, store))
    # Sign-in checks the pasted token afresh (no cache): a revoked one never signs in.
    app.state.ui_authenticator = Authenticator(store, 0)
    static = resources.files("sync_server.ui") / "static"
    app.mount(f"{PREFIX}/static", StaticFiles(directory=str(static)), name="ui-static")
    app.include_router(review.router)  # before `router`, whose last route takes the rest
    app.include_router(mine.router)
    app.include_router(router)
    app.add_exception_handler(UiProblem, _problem_page)
    app.add_middleware(UiHeaders)
