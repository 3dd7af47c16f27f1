"""Reviewed team memory, the client's side: `wire` (the answers), `proposals`, `block`.

Kept empty: `block` is on `memsync context`'s fast path.
"""
