"""`python -m sync_server` is `memsync-server`."""

from sync_server.cli import main

main()
