"""Ranked search over notes: the one search of memsync.

Pure (no file system, no network), so the web page (`sync_server.ui`) and the MCP
tools (`sync_client.notes`) share it and answer the same query with the same notes in
the same order:

    Note.parse(key, text) -> Note                   a note's fields and their words
    SearchIndex.of(notes).search(query, limit)      ranked by the query's words (BM25-style)
    search(notes, query, limit) -> [SearchHit]      the same, indexed for one query
    note_texts(texts) -> {key: Note}                the notes among a repo's entries
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from memsync_protocol.memory_index import frontmatter, is_note_key

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Note",
    "SearchHit",
    "SearchIndex",
    "matched_fields",
    "notes_of",
    "search",
    "tokens",
]

# Field weights: a word in a note's name (or its file name) or description says more
# about what the note is than the same word in its body. Each field's term frequency
# saturates on its own (BM25), so no amount of body text outweighs one match of the
# same word in the name or description.
NAME_WEIGHT = 4.0
DESCRIPTION_WEIGHT = 3.0
BODY_WEIGHT = 1.0
K1 = 1.2
# Length normalization: strong for the body, weak for the short name and description.
BODY_B = 0.75
SHORT_B = 0.3
SNIPPET_CHARS = 160
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
_WORD = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    """The words of `text`, lowercased, a plural `s` dropped (`deploys` finds `deploy`)."""
    words = []
    for word in _WORD.findall(text.lower()):
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        words.append(word)
    return words


def _body(text: str) -> str:
    """The note's text after its frontmatter (all of it when there is none)."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return text
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() in ("---", "..."):
            return "".join(lines[number + 1 :])
    return text


@dataclass(frozen=True)
class Note:
    """One note: its key, frontmatter `name` and `description`, and text."""

    key: str
    name: str
    description: str
    text: str
    body: str = field(repr=False)
    # Term frequencies of each field (the name field includes the key's words).
    name_terms: Counter[str] = field(repr=False, compare=False)
    description_terms: Counter[str] = field(repr=False, compare=False)
    body_terms: Counter[str] = field(repr=False, compare=False)

    @classmethod
    def parse(cls, key: str, text: str) -> Note:
        """The note `key` holding `text`: its frontmatter read, its fields' words counted."""
        fields = frontmatter(text) or {}
        name = fields.get("name", "")
        description = fields.get("description", "")
        body = _body(text)
        stem = key.removesuffix(".md").replace("/", " ")
        return cls(
            key=key,
            name=name,
            description=description,
            text=text,
            body=body,
            name_terms=Counter(tokens(f"{name} {stem}")),
            description_terms=Counter(tokens(description)),
            body_terms=Counter(tokens(body)),
        )

    def lengths(self) -> tuple[int, int, int]:
        """Words in the name, the description and the body."""
        return (
            self.name_terms.total(),
            self.description_terms.total(),
            self.body_terms.total(),
        )


@dataclass(frozen=True)
class SearchHit:
    """One result: the note's key, name, description, a line of its text, and the score."""

    key: str
    name: str
    description: str
    snippet: str
    score: float


class SearchIndex:
    """An inverted index of notes: word -> {key: its frequency in name, description,
    body}, and the fields' total lengths, kept up to date one note at a time, so a
    query touches only the notes that hold its words."""

    def __init__(self) -> None:
        self.notes: dict[str, Note] = {}
        self._postings: dict[str, dict[str, tuple[int, int, int]]] = {}
        self._lengths: dict[str, tuple[int, int, int]] = {}
        self._totals = [0, 0, 0]

    @classmethod
    def of(cls, notes: Mapping[str, Note]) -> SearchIndex:
        index = cls()
        for note in notes.values():
            index.add(note)
        return index

    def add(self, note: Note) -> None:
        """Index `note` (replacing the note of that key, if any)."""
        self.remove(note.key)
        self.notes[note.key] = note
        lengths = note.lengths()
        self._lengths[note.key] = lengths
        for position, length in enumerate(lengths):
            self._totals[position] += length
        for term in {*note.name_terms, *note.description_terms, *note.body_terms}:
            self._postings.setdefault(term, {})[note.key] = (
                note.name_terms[term],
                note.description_terms[term],
                note.body_terms[term],
            )

    def remove(self, key: str) -> None:
        """Forget the note of `key` (nothing when it is not indexed)."""
        note = self.notes.pop(key, None)
        if note is None:
            return
        for position, length in enumerate(self._lengths.pop(key)):
            self._totals[position] -= length
        for term in {*note.name_terms, *note.description_terms, *note.body_terms}:
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(key, None)
                if not posting:
                    del self._postings[term]

    def search(
        self, query: str, limit: int = DEFAULT_LIMIT, *, demote: Collection[str] = ()
    ) -> list[SearchHit]:
        """The notes that match `query`'s words, best first, at most `limit`. Ties go to
        a note not in `demote` (the MCP tools pass the notes citing changed code, so an
        equally relevant fresh note comes first), then by key.

        Per word: BM25's inverse document frequency times the weighted sum of the
        word's saturated frequency in the name (with the key's words), the description
        and the body, each normalized by the field's length. A note holding none of the
        words is not a result.
        """
        terms = list(dict.fromkeys(tokens(query)))
        limit = max(1, min(limit, MAX_LIMIT))
        count = len(self.notes)
        if not terms or count == 0:
            return []
        averages = [max(total / count, 1.0) for total in self._totals]
        scores: dict[str, float] = {}
        for term in terms:
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (count - len(posting) + 0.5) / (len(posting) + 0.5))
            for key, (in_name, in_description, in_body) in posting.items():
                name_length, description_length, body_length = self._lengths[key]
                weighted = 0.0
                if in_name:
                    norm = 1 - SHORT_B + SHORT_B * name_length / averages[0]
                    weighted += NAME_WEIGHT * in_name / (K1 * norm + in_name)
                if in_description:
                    norm = 1 - SHORT_B + SHORT_B * description_length / averages[1]
                    weighted += DESCRIPTION_WEIGHT * in_description / (K1 * norm + in_description)
                if in_body:
                    norm = 1 - BODY_B + BODY_B * body_length / averages[2]
                    weighted += BODY_WEIGHT * in_body / (K1 * norm + in_body)
                scores[key] = scores.get(key, 0.0) + idf * weighted
        ranked = ((-round(score, 4), key in demote, key) for key, score in scores.items())
        best = heapq.nsmallest(limit, ranked)
        return [
            SearchHit(
                key=key,
                name=self.notes[key].name,
                description=self.notes[key].description,
                snippet=_snippet(self.notes[key], terms),
                score=-negative,
            )
            for negative, _, key in best
        ]


def search(notes: Mapping[str, Note], query: str, limit: int = DEFAULT_LIMIT) -> list[SearchHit]:
    """`SearchIndex.search` over `notes` (indexed for this one query; `NoteCache.search`
    keeps its index between queries)."""
    return SearchIndex.of(notes).search(query, limit)


def _snippet(note: Note, terms: list[str]) -> str:
    """The first body line holding one of `terms`, cut to `SNIPPET_CHARS` around the
    first such word; else the first non-empty body line."""
    wanted = set(terms)
    first = ""
    for line in note.body.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        first = first or stripped
        if wanted.isdisjoint(tokens(stripped)):
            continue
        for match in _WORD.finditer(stripped):
            if tokens(match.group(0))[0] in wanted:
                return _cut(stripped, max(0, match.start() - SNIPPET_CHARS // 3))
    return _cut(first, 0)


def _cut(line: str, start: int) -> str:
    """`SNIPPET_CHARS` of `line` from `start`, with `…` where it was cut."""
    piece = line[start : start + SNIPPET_CHARS]
    before = "…" if start > 0 else ""
    after = "…" if start + SNIPPET_CHARS < len(line) else ""
    return before + piece + after


def notes_of(texts: Mapping[str, str]) -> dict[str, Note]:
    """The notes among a repo's entries (`is_note_key`: Markdown, not an index), parsed."""
    return {key: Note.parse(key, text) for key, text in texts.items() if is_note_key(key)}


def matched_fields(note: Note, query: str) -> list[str]:
    """Where `note` holds a word of `query`: among `name` (its name or its key's words),
    `description` and `text` (its body), in that order."""
    terms = set(tokens(query))
    places = {
        "name": note.name_terms,
        "description": note.description_terms,
        "text": note.body_terms,
    }
    return [place for place, counted in places.items() if not terms.isdisjoint(counted)]
