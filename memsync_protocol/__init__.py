"""The pure rules of memsync's wire protocol, shared by the server and the client.

`keys` (key and text rules, the limits on keys, path clashes), `checksums` (entry and
repo checksums, entity tags), `repos` (`owner/name` repo names and token scopes),
`tokens` (the token format a scanner can recognise) and `visible` (text with its control
and bidi characters shown as escapes). Standard library only; this package imports
neither `sync_server` nor `sync_client`, so a client-only install has all of it.
"""
