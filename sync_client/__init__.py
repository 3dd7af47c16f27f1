"""memsync's client library and CLI (built in a later issue)."""
