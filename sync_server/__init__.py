"""memsync's self-hosted team server.

Importing this package is cheap: the web application and storage engines are loaded
only by the modules that need them, so the client can share `keys` and `checksums`.
"""

__version__ = "0.1.0"
