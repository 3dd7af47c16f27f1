"""memsync's rules as detect-secrets plugins, for a team's own detect-secrets setup.

    detect-secrets scan --plugin path/to/scanner/detect_secrets_plugins.py

detect-secrets imports a plugin file by path and picks up every plugin class among its
attributes; the classes themselves are built in `scanner.engine` (one per rule).
"""

from scanner.engine import plugins

globals().update({plugin.__name__: plugin for plugin in plugins().values()})
