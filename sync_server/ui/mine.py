"""The web page's "My memory": the signed-in person's own spaces, their notes listed and
each note shown (docs/protocol.md 3.14).

A space is named in the query string as a request to the API names it (`space=acme/app`
for the person's space of that repo, `space=~` for the agent memory), never by its
internal id: the person is always the session token's own. Another person's space is
therefore not refused but unreachable: the same address, opened with bob's token, is
bob's own space (usually "not found"), exactly as the API answers. A token without a
person, or a repo outside the token's scope, is "not found" too.

A note is shown as the team's note page shows one (frontmatter, sanitized Markdown,
the text escaped), read-only: the person's machines write these spaces through
`memsync`. These routes have their own router, included before `routes.router`, whose
last route answers every other address under /ui/ with "No such page".
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from memsync_protocol.memory_index import INDEX_NAME, is_note_key
from memsync_protocol.repos import InvalidRepoError
from sync_server import personal
from sync_server.auth import scope_allows
from sync_server.ui import render
from sync_server.ui.routes import UiProblem, Visitor, VisitorDep, _service, shown, store_errors

router = APIRouter(prefix="/ui", include_in_schema=False)

NOT_FOUND = "No such space in your memory."


def mine_url(space: str, key: str | None = None) -> str:
    """The address of a space of mine (`acme/app` or `~`), or of one of its notes."""
    query = {"space": space} if key is None else {"space": space, "key": key}
    return f"/ui/mine{'' if key is None else '/note'}?{urlencode(query, quote_via=quote)}"


def _space_of(who: Visitor, space: str) -> tuple[str, str]:
    """(the space as the address names it, its internal id) for the visitor's own person;
    "not found" for a token with no person, a bad name, or a repo outside its scope."""
    person = who.principal.person
    try:
        wire = personal.wire_repo(space)
    except InvalidRepoError:
        raise UiProblem(404, NOT_FOUND) from None
    if person is None:
        raise UiProblem(404, "Your token belongs to no person, so it has no memory of its own.")
    if wire != personal.GLOBAL_REPO and not scope_allows(who.principal.repo_pattern, wire):
        raise UiProblem(404, NOT_FOUND)
    return wire, personal.space_id(person, None if wire == personal.GLOBAL_REPO else wire)


def _label(wire: str) -> str:
    return "Your agent memory" if wire == personal.GLOBAL_REPO else f"Your memory for {wire}"


@router.get("/mine", response_class=HTMLResponse)
def space_page(request: Request, who: VisitorDep, space: str = "") -> Response:
    """One of the visitor's own spaces: its index rendered and its notes listed."""
    wire, space_id = _space_of(who, space)
    snapshot = _service(request).snapshot(space_id, with_texts=True)
    if snapshot is None:
        raise UiProblem(404, f"{_label(wire)} holds nothing yet.")
    texts = snapshot.texts

    def note_url(key: str) -> str:
        return mine_url(wire, key)

    index_html = None
    if INDEX_NAME in texts:
        body = render.split_frontmatter(texts[INDEX_NAME])[1]
        index_html = render.render_markdown(body, INDEX_NAME, note_url)
    return shown(
        request,
        who,
        "mine.html",
        label=_label(wire),
        space=wire,
        note_url=note_url,
        index_html=index_html,
        notes=[render.summarize(key, texts[key]) for key in sorted(texts) if is_note_key(key)],
        others=sorted(key for key in texts if not is_note_key(key) and key != INDEX_NAME),
        version=snapshot.head.version,
    )


@router.get("/mine/note", response_class=HTMLResponse)
def note_page(request: Request, who: VisitorDep, key: str, space: str = "") -> Response:
    """One note of the visitor's own space, rendered and as text."""
    wire, space_id = _space_of(who, space)
    service = _service(request)
    snapshot = service.snapshot(space_id, with_texts=True, key=key)
    text = snapshot.texts.get(key) if snapshot is not None else None
    if text is None:
        raise UiProblem(404, f"No note {key} in {_label(wire).lower()}.")
    with store_errors():
        versions = service.key_history(space_id, key)
    fields, body = render.split_frontmatter(text)
    html = None
    if key.endswith(".md"):
        html = render.render_markdown(body, key, lambda target: mine_url(wire, target))
    return shown(
        request,
        who,
        "mine_note.html",
        label=_label(wire),
        space_url=mine_url(wire),
        key=key,
        text=text,
        fields=fields,
        html=html,
        last=versions[-1] if versions else None,
    )
