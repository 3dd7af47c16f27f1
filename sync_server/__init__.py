"""memsync's self-hosted team server.

Importing this package is cheap: the web application and storage engines are loaded
only by the modules that need them. The rules it shares with the client live in
`memsync_protocol`; the client never imports this package.
"""

__version__ = "0.1.0"
