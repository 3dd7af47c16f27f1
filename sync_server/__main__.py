"""`python -m sync_server` is `memsync-server`."""

from sync_server.launch import main

main()
