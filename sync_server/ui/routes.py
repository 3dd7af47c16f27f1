"""The web page's routes under /ui/: sign in, repos, a repo, a note, and its writes.

Pages are rendered on the server (Jinja2, autoescape on) and work without JavaScript.
Keys travel in the query string, never in the path, so the access log (which records
paths) never names a note. Every request re-reads its session's token (see
`session`), takes one request from the token's rate-limit bucket like the API, and
sees only the repos the token's scope covers: any other repo is "not found", exactly
like one that does not exist. Writes are POSTs that carry the session's CSRF token and
come from this origin; they go through the same service as the API routes
(`sync_server.service.TeamMemory`: the same checks, the token's name as the author,
the same count and event after each commit).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from memsync_protocol.memory_index import (
    INDEX_NAME,
    check,
    is_note_key,
)
from memsync_protocol.repos import InvalidRepoError, normalize_repo
from sync_server.auth import Authenticator, Principal
from sync_server.errors import ApiError, Unauthorized
from sync_server.models import wire_time
from sync_server.ratelimit import RateLimiter
from sync_server.review import agent_words, proposer
from sync_server.service import TeamMemory
from sync_server.storage.base import HistoryItem, ProposalResult, Store
from sync_server.ui import render
from sync_server.ui.session import (
    COOKIE_NAME,
    COOKIE_PATH,
    NOTICE_COOKIE,
    NOTICE_SECONDS,
    SESSION_SECONDS,
    Session,
    Sessions,
    csrf_ok,
    current_principal,
)

router = APIRouter(prefix="/ui", include_in_schema=False)

templates = Environment(
    loader=PackageLoader("sync_server.ui", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["when"] = lambda moment: wire_time(moment).replace("T", " ").replace("Z", " UTC")
templates.filters["code_spans"] = render.code_spans
templates.filters["number"] = lambda count: f"{count:,}"
templates.filters["proposer"] = proposer
templates.filters["agent_words"] = agent_words

LOG_PAGE = 50
RECENT_COMMITS = 10
# Every write the page makes says so in its provenance (docs/protocol.md 3.13).
WEB: Mapping[str, str] = MappingProxyType({"via": "web"})


class UiProblem(Exception):
    """An answer of the web page that is not the page asked for: an error page."""

    def __init__(self, status: int, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def problem_context(request: Request) -> dict[str, Any]:
    """What an error page shows around its message: who is signed in and, on a page of
    a repo the visitor may see, that repo's navigation (the header and links stay)."""
    try:
        who = _session_visitor(request)
    except Exception:  # an error page must render even when the store is down
        return {"who": None}
    if who is None:
        return {"who": None}
    owner, name = request.path_params.get("owner"), request.path_params.get("name")
    if not (isinstance(owner, str) and isinstance(name, str)):
        return {"who": who}
    try:
        repo = repo_of(owner, name, who)
        known = _service(request).head(repo) is not None
        inbox = review_inbox(_service(request), who.principal, repo) if known else None
    except Exception:  # not a repo the visitor may see, or the store is down
        return {"who": who}
    if not known:
        return {"who": who}
    return {"who": who, "repo": repo, "links": Links(repo), "query": "", "inbox": inbox}


@contextmanager
def store_errors() -> Iterator[None]:
    """The store's domain errors (not found, path clash, ...) as error pages."""
    try:
        yield
    except ApiError as error:
        raise UiProblem(error.status, str(error), headers=dict(error.headers)) from None


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A rendered template."""
    return HTMLResponse(templates.get_template(name).render(**context), status_code=status)


@dataclass(frozen=True, slots=True)
class Links:
    """The addresses of one repo's pages."""

    repo: str

    @property
    def home(self) -> str:
        return f"/ui/repo/{self.repo}"

    def to(self, view: str, **query: str | int | None) -> str:
        """`/ui/repo/R/VIEW?...` without the empty parameters."""
        present = {name: str(value) for name, value in query.items() if value not in (None, "")}
        suffix = f"?{urlencode(present, quote_via=quote)}" if present else ""
        return f"{self.home}/{view}{suffix}"

    def note(self, key: str) -> str:
        return self.to("note", key=key)


@dataclass(frozen=True, slots=True)
class Visitor:
    """A signed-in request: who, with which session, and whether it may write."""

    principal: Principal
    session: Session

    @property
    def can_write(self) -> bool:
        return not self.principal.read_only


def _app_state(request: Request) -> Any:
    return request.app.state


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = _app_state(request).ui_sessions
    return sessions


def _service(request: Request) -> TeamMemory:
    service: TeamMemory = _app_state(request).team_memory
    return service


def _store(request: Request) -> Store:
    store: Store = _app_state(request).store
    return store


def _limit(request: Request, bucket: str) -> None:
    limiter: RateLimiter = _app_state(request).rate_limiter
    retry_after = limiter.check(bucket)
    if retry_after:
        raise UiProblem(
            429,
            f"Too many requests: try again in {retry_after} s.",
            headers={"Retry-After": str(retry_after)},
        )


def _session_visitor(request: Request) -> Visitor | None:
    """The visitor behind the session cookie, or None, without taking a request from
    the rate limit (an error page for a request already counted)."""
    session = _sessions(request).read(request.cookies.get(COOKIE_NAME))
    if session is None:
        return None
    principal = current_principal(_store(request), session)
    if principal is None:
        return None
    request.state.principal_name = principal.name
    return Visitor(principal, session)


def signed_in(request: Request) -> Visitor | None:
    """The visitor behind the session cookie, or None (no session, or its token is gone)."""
    found = _session_visitor(request)
    if found is not None:
        _limit(request, f"token:{found.principal.lookup_id}")
    return found


def visitor(request: Request) -> Visitor:
    """A signed-in visitor; without one, the sign-in page (as an error page, 401)."""
    found = signed_in(request)
    if found is None:
        raise UiProblem(401, "Sign in with your memsync token to see this page.")
    return found


VisitorDep = Annotated[Visitor, Depends(visitor)]


def repo_of(owner: str, name: str, who: Visitor) -> str:
    """The repo of a path, if the visitor's token covers it; otherwise "not found"."""
    try:
        repo = normalize_repo(f"{owner}/{name}")
    except InvalidRepoError:
        raise UiProblem(404, "No such repo.") from None
    if not TeamMemory.may_see(who.principal, repo):
        raise UiProblem(404, "No such repo.")
    return repo


def _same_origin(request: Request) -> bool:
    """Whether a POST comes from a page of this server (Origin, Sec-Fetch-Site)."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin != "null" and urlsplit(origin).netloc == host


async def form_fields(request: Request) -> dict[str, str]:
    """An `application/x-www-form-urlencoded` body (the first value of each field)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {name: values[0] for name, values in parse_qs(body, max_num_fields=20).items()}


FormDep = Annotated[dict[str, str], Depends(form_fields)]


def writer(request: Request, who: VisitorDep, form: FormDep) -> Visitor:
    """A visitor allowed to write, whose form carries the CSRF token from this origin."""
    if not _same_origin(request) or not csrf_ok(who.session, form.get("csrf")):
        raise UiProblem(403, "This form is out of date or came from another site: reload it.")
    if who.principal.read_only:
        raise UiProblem(403, "Your token is read-only: it may not change notes.")
    return who


WriterDep = Annotated[Visitor, Depends(writer)]


def _texts(service: TeamMemory, repo: str) -> dict[str, str]:
    snapshot = service.snapshot(repo, with_texts=True)
    if snapshot is None:
        raise UiProblem(404, "No such repo.")
    return snapshot.texts


def _base(who: Visitor | None, **context: Any) -> dict[str, Any]:
    return {"who": who, **context}


def review_inbox(service: TeamMemory, principal: Principal, repo: str) -> int | None:
    """The pending proposals of `repo` the visitor may see (a reviewer: all; anyone else:
    their own), for the Review link; None (no link) when the repo is not reviewed and
    has none pending."""
    pending = service.pending_count(principal, repo)
    return pending if pending or service.review_policy(repo) else None


def shown(request: Request, who: Visitor, name: str, **context: Any) -> HTMLResponse:
    """A page for a signed-in visitor, with the notice its last write left (shown once)
    and, on a repo's pages, its Review link."""
    cookie = request.cookies.get(NOTICE_COOKIE)
    notice = _sessions(request).open_notice(who.session, cookie) if cookie else None
    repo = context.get("repo")
    if isinstance(repo, str):
        context["inbox"] = review_inbox(_service(request), who.principal, repo)
    response = page(name, **_base(who, notice=notice, **context))
    if cookie:
        response.delete_cookie(NOTICE_COOKIE, path=COOKIE_PATH)
    return response


def proposed(what: str, result: ProposalResult) -> str:
    """The notice of a write that became a proposal (a non-reviewer in a reviewed repo)."""
    return (
        f"Proposed {what}: a reviewer must accept it before teammates see it"
        f" (proposal {result.proposal.id})."
    )


def after_write(request: Request, who: Visitor, url: str, notice: str) -> Response:
    """The redirect that ends a write, leaving `notice` for the page it leads to.

    The notice travels in a signed cookie bound to the session, never in the URL: a
    link cannot make the page claim a write that did not happen.
    """
    response = RedirectResponse(url, status_code=303)
    _set_cookie(
        request,
        response,
        NOTICE_COOKIE,
        _sessions(request).seal_notice(who.session, notice),
        NOTICE_SECONDS,
    )
    return response


def _set_cookie(request: Request, response: Response, name: str, value: str, seconds: int) -> None:
    """One of the page's cookies: HttpOnly, SameSite=Strict, under /ui/, Secure over
    https."""
    response.set_cookie(
        name,
        value,
        max_age=seconds,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


# -- signing in and out ----------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> Response:
    """The sign-in form, or the repos the token may see."""
    who = signed_in(request)
    if who is None:
        response = page("signin.html", **_base(None, message=None))
        if request.cookies.get(COOKIE_NAME):
            response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
        return response
    from sync_server.personal import own_spaces

    service = _service(request)
    return shown(
        request,
        who,
        "repos.html",
        repos=service.visible_repos(who.principal),
        mine=own_spaces(service.store, who.principal.person),
    )


@router.post("/signin")
def sign_in(request: Request, form: FormDep) -> Response:
    """Check a pasted token; on success, a session cookie and the repo list."""
    if not _same_origin(request):
        raise UiProblem(403, "Sign in from this server's own page.")
    authenticator: Authenticator = _app_state(request).ui_authenticator
    token = form.get("token", "").strip()
    try:
        principal = authenticator.authenticate(f"Bearer {token}")
    except Unauthorized:
        # The access log names a refused token by its public lookup id, never the secret.
        request.state.refused_token_id = Authenticator.lookup_id_of(f"Bearer {token}")
        client = request.client.host if request.client else "unknown"
        _limit(request, f"ip:{client}")
        return page(
            "signin.html", 401, **_base(None, message="That token is unknown, revoked or expired.")
        )
    request.state.principal_name = principal.name
    _limit(request, f"token:{principal.lookup_id}")
    record = _store(request).find_token(principal.lookup_id)
    assert record is not None
    cookie, _ = _sessions(request).issue(record)
    response = RedirectResponse("/ui/", status_code=303)
    _set_cookie(request, response, COOKIE_NAME, cookie, SESSION_SECONDS)
    return response


@router.post("/signout")
def sign_out(request: Request, form: FormDep) -> Response:
    """Forget the session (a form from this origin with the CSRF token)."""
    who = signed_in(request)
    if who is not None and not (_same_origin(request) and csrf_ok(who.session, form.get("csrf"))):
        raise UiProblem(403, "This form is out of date or came from another site: reload it.")
    response = RedirectResponse("/ui/", status_code=303)
    response.delete_cookie(COOKIE_NAME, path=COOKIE_PATH)
    return response


# -- reading ----------------------------------------------------------------------------


@router.get("/repo/{owner}/{name}", response_class=HTMLResponse)
def repo_page(request: Request, owner: str, name: str, who: VisitorDep) -> Response:
    """The index rendered with its health, the notes, recent activity, deleted notes."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    links = Links(repo)
    texts = _texts(service, repo)
    markdown = {key: text for key, text in texts.items() if key.endswith(".md")}
    report = check(markdown, present=[key for key in texts if key not in markdown])
    index_html = None
    if INDEX_NAME in texts:
        _, body = render.split_frontmatter(texts[INDEX_NAME])
        index_html = render.render_markdown(body, INDEX_NAME, links.note)
    notes = [render.summarize(key, texts[key]) for key in sorted(texts) if is_note_key(key)]
    others = sorted(key for key in texts if not is_note_key(key) and key != INDEX_NAME)
    with store_errors():
        recent = service.log(repo, limit=RECENT_COMMITS).commits
        deleted = service.deleted_keys(repo)
    return shown(
        request,
        who,
        "repo.html",
        repo=repo,
        links=links,
        index_html=index_html,
        report=report,
        groups=render.problem_groups(report.problems),
        index_deleted=next((d for d in deleted if d.key == INDEX_NAME), None),
        notes=notes,
        others=others,
        recent=recent,
        deleted=deleted,
        query="",
    )


@router.get("/repo/{owner}/{name}/search", response_class=HTMLResponse)
def search_page(request: Request, owner: str, name: str, who: VisitorDep, q: str = "") -> Response:
    """The notes that match `q`, ranked as MCP's `search_notes` ranks them."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    hits = render.search(_texts(service, repo), q[:200])
    return shown(
        request, who, "search.html", repo=repo, links=Links(repo), query=q[:200], hits=hits
    )


@router.get("/repo/{owner}/{name}/activity", response_class=HTMLResponse)
def activity_page(
    request: Request,
    owner: str,
    name: str,
    who: VisitorDep,
    before: int | None = None,
    author: str = "",
) -> Response:
    """The repo's commits, newest first, a page at a time, by one author if asked."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    with store_errors():
        log = service.log(repo, before=before, limit=LOG_PAGE, author=author or None)
    return shown(
        request,
        who,
        "activity.html",
        repo=repo,
        links=Links(repo),
        log=log,
        author=author,
        query="",
    )


@router.get("/repo/{owner}/{name}/deleted", response_class=HTMLResponse)
def deleted_page(request: Request, owner: str, name: str, who: VisitorDep) -> Response:
    """Notes deleted for the team, newest delete first, each with its undo."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    with store_errors():
        deleted = service.deleted_keys(repo)
    return shown(
        request, who, "deleted.html", repo=repo, links=Links(repo), deleted=deleted, query=""
    )


def _version_text(service: TeamMemory, repo: str, key: str, version: int) -> str:
    with store_errors():
        item = service.key_version(repo, key, version)
    return item.text or ""


@router.get("/repo/{owner}/{name}/note", response_class=HTMLResponse)
def note_page(
    request: Request,
    owner: str,
    name: str,
    who: VisitorDep,
    key: str,
    old: int | None = None,
    new: int | None = None,
) -> Response:
    """A note rendered and raw, its versions, a diff of two of them, its actions."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    links = Links(repo)
    with store_errors():
        versions: list[HistoryItem] = service.key_history(repo, key)
    snapshot = service.snapshot(repo, with_texts=True, key=key)
    text = snapshot.texts.get(key) if snapshot is not None else None
    fields, html = None, None
    if text is not None:
        fields, body = render.split_frontmatter(text)
        html = render.render_markdown(body, key, links.note) if key.endswith(".md") else None
    diff = None
    numbers = [item.version for item in versions]
    if old is not None or new is not None:
        old = old if old is not None else (numbers[-2] if len(numbers) > 1 else numbers[-1])
        new = new if new is not None else numbers[-1]
        diff = render.unified_diff(
            _version_text(service, repo, key, old),
            _version_text(service, repo, key, new),
            f"{key} (version {old})",
            f"{key} (version {new})",
        )
    return shown(
        request,
        who,
        "note.html",
        repo=repo,
        links=links,
        key=key,
        folder=posixpath.dirname(key),
        text=text,
        fields=fields,
        html=html,
        versions=list(reversed(versions)),
        last=versions[-1],
        diff=diff,
        old=old,
        new=new,
        query="",
    )


@router.get("/repo/{owner}/{name}/delete", response_class=HTMLResponse)
def confirm_delete(request: Request, owner: str, name: str, who: VisitorDep, key: str) -> Response:
    """The confirmation step before a delete: a form to press, or a way back."""
    service = _service(request)
    repo = repo_of(owner, name, who)
    if who.principal.read_only:
        raise UiProblem(403, "Your token is read-only: it may not change notes.")
    snapshot = service.snapshot(repo, with_texts=False, key=key)
    if snapshot is None or key not in snapshot.checksums:
        raise UiProblem(404, "That note is not live: there is nothing to delete.")
    proposes = service.review_policy(repo) and not service.is_reviewer(who.principal)
    return shown(
        request,
        who,
        "delete.html",
        repo=repo,
        links=Links(repo),
        key=key,
        proposes=proposes,
        query="",
    )


# -- writing ----------------------------------------------------------------------------


def _lines_word(numbers: list[int]) -> str:
    return ("lines " if len(numbers) > 1 else "line ") + ", ".join(map(str, numbers))


@router.post("/repo/{owner}/{name}/delete")
def delete_note(request: Request, owner: str, name: str, who: WriterDep, form: FormDep) -> Response:
    """Delete a note for the team (kept in history), after the confirmation page.

    The index lines that link only to the note go in the same commit, as `memsync rm`
    does (`TeamMemory.delete_with_index`): no teammate is left with a line leading nowhere.
    """
    service = _service(request)
    repo = repo_of(owner, name, who)
    key = form.get("key", "")
    if form.get("confirm") != "yes":
        return RedirectResponse(Links(repo).to("delete", key=key), status_code=303)
    with store_errors():
        deleted = service.delete_with_index(repo, key, author=who.principal, provenance=WEB)
    result, changes = deleted.result, deleted.lines
    if isinstance(result, ProposalResult):
        notice = proposed(f"deleting {key}", result)
        if changes:
            notice += f" Its lines in {' and '.join(sorted(changes))} go with it."
        return after_write(request, who, Links(repo).to("review"), notice)
    notice = f"Deleted {key} for the team (version {result.head.version})."
    for index_key, removed in sorted(changes.items()):
        notice += f" Its {index_key} {_lines_word(removed)} went in the same commit."
    notice += " Restore it below to undo."
    return after_write(request, who, Links(repo).to("deleted"), notice)


@router.post("/repo/{owner}/{name}/restore")
def restore_note(
    request: Request, owner: str, name: str, who: WriterDep, form: FormDep
) -> Response:
    """Make an old version of a note current again, as a new version.

    A deleted note comes back listed: the lines that linked it in the newest index
    version that had them are appended to the index (`TeamMemory.restore_with_index`,
    the rule `memsync restore` follows; a second commit right after the restore).
    """
    service = _service(request)
    repo = repo_of(owner, name, who)
    key = form.get("key", "")
    try:
        version = int(form.get("version", ""))
    except ValueError:
        raise UiProblem(400, "Pick a version to restore.") from None
    with store_errors():
        restored = service.restore_with_index(
            repo, key, version, author=who.principal, provenance=WEB
        )
    result = restored.result
    deleted_note = restored.was_deleted and is_note_key(key)
    if isinstance(result, ProposalResult):
        notice = proposed(f"restoring {key} to its text of version {version}", result)
        if deleted_note:
            notice += " Its index line is not part of it (memsync index --fix adds one)."
        return after_write(request, who, Links(repo).to("review"), notice)
    if not result.changed_keys:
        notice = f"{key} already has the text of version {version}: nothing changed."
        return after_write(request, who, Links(repo).note(key), notice)
    notice = f"Restored {key} to its text of version {version}, as version {result.head.version}."
    relisted = restored.relisted
    if restored.relist_problem is not None:
        notice += f" Its index line could not be put back: {restored.relist_problem}"
    elif relisted is not None:
        if relisted.proposal is not None:
            notice += f" Its index line is proposed (proposal {relisted.proposal})."
        elif relisted.commit is not None and relisted.commit.changed_keys:
            notice += (
                f" Its line in {' and '.join(relisted.written)} is back too, in the next"
                f" commit (version {relisted.commit.head.version})."
            )
        elif not relisted.listed:
            notice += (
                f" No version of {INDEX_NAME} in the history listed it, so no index line"
                " links it now (memsync index --fix adds one)."
            )
    return after_write(request, who, Links(repo).note(key), notice)


@router.get("/{anything:path}", response_class=HTMLResponse)
def no_such_page(anything: str) -> Response:
    """Any other address under /ui/: the error page, with the navigation, not API JSON.
    (Registered last, so every page above matches first.)"""
    raise UiProblem(404, "No such page.")
