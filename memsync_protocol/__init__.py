"""The pure rules of memsync's wire protocol, shared by the server and the client.

`keys` (key and text rules, the limits on keys, path clashes), `checksums` (entry and
repo checksums, entity tags), `repos` (`owner/name` repo names and token scopes) and
`tokens` (the token format a scanner can recognise). Standard library only; this package
imports neither `sync_server` nor `sync_client`, so a client-only install has all of it.
"""
