"""What the web page shows of untrusted text: Markdown as safe HTML, diffs, search.

Every note, key and author is someone's input. Markdown is rendered by markdown-it-py
with raw HTML off, images become plain links, links to other notes become links to
their pages, and the HTML is then cleaned by nh3 against an allow-list: no tag or
attribute beyond plain prose, no URL scheme beyond http, https and mailto. Everything
else a template shows goes through Jinja2's autoescape.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markupsafe import Markup, escape

from memsync_protocol.memory_index import IndexProblem, frontmatter, link_target
from memsync_protocol.search import MAX_LIMIT, matched_fields, notes_of
from memsync_protocol.search import search as ranked_search

ALLOWED_TAGS = frozenset(
    {
        "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
        "hr", "li", "ol", "p", "pre", "s", "strong", "table", "tbody", "td", "th", "thead",
        "tr", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES: Mapping[str, frozenset[str]] = {
    "a": frozenset({"href", "title"}),
    "ol": frozenset({"start"}),
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def _image_as_link(
    renderer: Any, tokens: Sequence[Token], index: int, options: Any, env: Any
) -> str:
    """An image is never loaded: it becomes a link to its address, named by its alt."""
    token = tokens[index]
    source = str(token.attrGet("src") or "")
    alt = renderer.renderInlineAsText(token.children or [], options, env) or source
    return f'<a href="{escapeHtml(source)}">image: {escapeHtml(alt)}</a>'


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


_MD = _markdown()


def split_frontmatter(text: str) -> tuple[dict[str, str] | None, str]:
    """(the note's frontmatter fields or None, the text after it)."""
    fields = frontmatter(text)
    if fields is None:
        return None, text
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return fields, "".join(lines[number + 1 :])
    return fields, text


def sanitize(html: str) -> str:
    """HTML cut down to the allow-list (the last word on what reaches the browser)."""
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )


def render_markdown(text: str, key: str, note_url: Callable[[str], str]) -> str:
    """A note's Markdown (without its frontmatter) as sanitized HTML; a relative link
    that names a key of the team dir points to that note's page (`note_url(key)`)."""
    env: dict[str, Any] = {}
    tokens = _MD.parse(text, env)
    for token in tokens:
        for child in token.children or []:
            if child.type == "link_open":
                href = str(child.attrGet("href") or "")
                target = link_target(key, href)
                if target is not None:
                    child.attrSet("href", note_url(target))
    return sanitize(_MD.renderer.render(tokens, _MD.options, env))


@dataclass(frozen=True, slots=True)
class DiffLine:
    """One line of a unified diff: `kind` is `head`, `hunk`, `add`, `del` or `same`."""

    kind: str
    text: str


DIFF_CONTEXT = 3
_HUNK = re.compile(r"@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_diff(old: str, new: str, old_label: str, new_label: str) -> list[DiffLine]:
    """The unified diff of two texts (3 lines of context), line by line.

    The lines both texts start and end with, beyond the context, are left out before
    difflib matches the rest, and the hunks' line numbers shifted back: an edit of one
    paragraph in a long note costs what a diff of that paragraph costs (the Review
    inbox shows hundreds of diffs at once).
    """
    before, after = old.splitlines(), new.splitlines()
    same = min(len(before), len(after))
    head = 0
    while head < same and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < same - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    skip = max(0, head - DIFF_CONTEXT)
    keep = max(0, tail - DIFF_CONTEXT)
    lines: list[DiffLine] = []
    for line in difflib.unified_diff(
        before[skip : len(before) - keep],
        after[skip : len(after) - keep],
        old_label,
        new_label,
        lineterm="",
    ):
        if skip and line.startswith("@@"):
            line = _HUNK.sub(
                lambda m: f"@@ -{int(m[1]) + skip}{m[2] or ''} +{int(m[3]) + skip}{m[4] or ''} @@",
                line,
                count=1,
            )
        if line.startswith(("---", "+++")) and len(lines) < 2:
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        lines.append(DiffLine(kind, line))
    return lines


def diff_html(lines: Sequence[DiffLine]) -> Markup:
    """A diff's lines as the spans of a `<pre class="diff">`, each line's text escaped:
    one join instead of a template loop (the Review inbox shows thousands of lines)."""
    return Markup(  # noqa: S704 (each text is escaped; the kinds are our own words)
        "".join(f'<span class="{line.kind}">{escape(line.text)}</span>' for line in lines)
    )


@dataclass(frozen=True, slots=True)
class NoteSummary:
    """A note as lists show it: its key and its frontmatter's name and description."""

    key: str
    name: str
    description: str


def summarize(key: str, text: str) -> NoteSummary:
    """The list row of a note."""
    fields = frontmatter(text) or {}
    return NoteSummary(key, fields.get("name", ""), fields.get("description", ""))


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A note matching a search: where it matched and a line of its text."""

    note: NoteSummary
    fields: list[str]
    snippet: str


def search(texts: Mapping[str, str], query: str) -> list[SearchHit]:
    """The notes among `texts` that match `query`, best first: the ranked search of
    `memsync_protocol.search`, the one MCP's `search_notes` runs, so the page and an
    agent get the same notes in the same order (at most `MAX_LIMIT`)."""
    notes = notes_of(texts)
    return [
        SearchHit(
            NoteSummary(hit.key, hit.name, hit.description),
            matched_fields(notes[hit.key], query),
            hit.snippet,
        )
        for hit in ranked_search(notes, query, MAX_LIMIT)
    ]


_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def code_spans(text: str) -> Markup:
    """Our own hint text (a fix, a command) as HTML: escaped, its `backtick` spans as
    <code>. Only for text memsync writes; a note's text goes through `render_markdown`."""
    parts = _CODE_SPAN.split(text)  # plain, code, plain, code, ..., plain
    return Markup("").join(
        Markup("<code>{}</code>").format(part) if number % 2 else escape(part)
        for number, part in enumerate(parts)
    )


# The health section shows this many problems of each kind, then "and N more".
HEALTH_ROWS = 10


@dataclass(frozen=True, slots=True)
class ProblemGroup:
    """The index problems of one kind as the repo page lists them: the first `shown`
    and how many there are in all."""

    kind: str
    total: int
    shown: list[IndexProblem] = field(default_factory=list)

    @property
    def more(self) -> int:
        """How many are not listed."""
        return self.total - len(self.shown)


def problem_groups(problems: Sequence[IndexProblem], rows: int = HEALTH_ROWS) -> list[ProblemGroup]:
    """Problems grouped by kind, in the order each kind first appears, at most `rows`
    of each: a page stays small when a repo of thousands of notes has no index."""
    kinds: dict[str, list[IndexProblem]] = {}
    for problem in problems:
        kinds.setdefault(problem.kind, []).append(problem)
    return [ProblemGroup(kind, len(found), list(found[:rows])) for kind, found in kinds.items()]
