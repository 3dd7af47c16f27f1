"""Times as the API and `memsync-server` show them (no pydantic: the token commands use it)."""

from __future__ import annotations

from datetime import UTC, datetime


def wire_time(moment: datetime) -> str:
    """`2026-11-30T09:35:00Z`: UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
