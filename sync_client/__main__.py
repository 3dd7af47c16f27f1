"""`python -m sync_client`: the `memsync` command (used by the service files when the
console script is not installed next to the interpreter)."""

from sync_client.launch import main

main()
