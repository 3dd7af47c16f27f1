"""A workspace: one team dir, its state, and the server API for its repo.

Push and pull both work on a `Workspace`; it owns loading and saving the state and
scanning the team dir through the stat cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scanner.engine import rules_fingerprint
from sync_client.api import Api
from sync_client.local import LocalScan, scan_team_dir
from sync_client.state import SyncState, load_state, save_state


@dataclass
class Workspace:
    """Everything a sync step needs."""

    team_dir: Path
    state_dir: Path
    api: Api
    state: SyncState

    @classmethod
    def open(cls, team_dir: Path, state_dir: Path, api: Api) -> Workspace:
        """Load the saved state (or start fresh)."""
        return cls(team_dir=team_dir, state_dir=state_dir, api=api, state=load_state(state_dir))

    def scan(self) -> LocalScan:
        """The team dir's syncable files and skips; refreshes the stat cache."""
        if not self.team_dir.exists():
            return LocalScan(checksums={}, skipped=[], cache={})
        fingerprint = rules_fingerprint()
        if self.state.scanner_rules != fingerprint:
            # New or changed rules: every file is scanned again, once.
            self.state.stat_cache = {}
            self.state.scanner_rules = fingerprint
        scanned = scan_team_dir(self.team_dir, self.state.stat_cache)
        self.state.stat_cache = scanned.cache
        return scanned

    def save(self) -> None:
        """Persist the state atomically."""
        save_state(self.state_dir, self.state)
