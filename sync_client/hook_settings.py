"""Whether an agent's JSON settings hold one of memsync's command hooks (pure, at the
bottom): the layout Claude Code, Codex's `hooks.json`, Gemini CLI and Qwen Code share,
`{"hooks": {EVENT: [{matcher?, hooks: [{type, command, timeout}]}]}}`.

Both `config.team_dir` (which folder a checkout syncs) and the agent integrations ask
it, so it sits below both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["file_has_hook", "has_hook"]


def has_hook(settings: dict[str, Any], event: str, suffix: str) -> bool:
    """Whether a hook of `event` runs a memsync command ending in `suffix` (any install of
    memsync: the command names `memsync` or `sync_client`)."""
    hooks = settings.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    for group in groups if isinstance(groups, list) else []:
        for hook in group.get("hooks") or [] if isinstance(group, dict) else []:
            command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
            if command.endswith(suffix) and ("memsync" in command or "sync_client" in command):
                return True
    return False


def file_has_hook(path: Path, event: str, suffix: str) -> bool:
    """`has_hook` of the JSON settings file at `path`; a missing, unreadable or
    unparsable file has none."""
    try:
        settings = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(settings, dict) and has_hook(settings, event, suffix)
