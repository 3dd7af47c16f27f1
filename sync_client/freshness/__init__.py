"""Whether a note still holds: `report` (notes citing changed code, expired notes),
`citations`, `sources`, `stale_notes`.

Kept empty: importing one part must not load the others.
"""
