"""Three-way merge of one note: `memsync_protocol.merge`, which the server's accept of a
proposal shares, under the name the client has always used."""

from __future__ import annotations

from memsync_protocol.merge import NoteMerge, insertions_of_both, merge_notes, merge_texts

__all__ = ["NoteMerge", "insertions_of_both", "merge_notes", "merge_texts"]
