"""The `MEMORY.md` indexes: `memory` (an agent's), `team` (the team dir's), `facts`,
`deleted`.

Kept empty: importing one part must not load the others.
"""
