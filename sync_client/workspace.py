"""A workspace: one team dir, its state, and the server API for its repo.

Push and pull both work on a `Workspace`; it owns loading and saving the state and
scanning the team dir through the stat cache.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import scanner
from memsync_protocol.checksums import entry_checksum
from sync_client.api import Api
from sync_client.ignore_rules import read_ignore_rules
from sync_client.local import LocalScan, scan_team_dir
from sync_client.objects import ObjectStore
from sync_client.state import SyncState, load_state, save_state
from sync_client.team_files import UnsafeKey, read_entry
from sync_client.verdicts import VERDICT_RULES


@dataclass
class Workspace:
    """Everything a sync step needs."""

    team_dir: Path
    state_dir: Path
    api: Api
    state: SyncState
    objects: ObjectStore = field(init=False)
    # Base texts recorded since the last save, written to the object store first.
    _new_texts: dict[str, str] = field(init=False, default_factory=dict)
    # The bases as last saved: a base that moved without its text (a push commits the
    # local file's checksum) takes its text from the file when the state is saved.
    _saved_bases: dict[str, str] = field(init=False, default_factory=dict)
    # The last `scan()`: a command that reports on the team dir after a push reads it
    # instead of walking the dir again (the push keeps it current when it writes).
    last_scan: LocalScan | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.objects = ObjectStore(self.state_dir)
        self._saved_bases = dict(self.state.bases)

    @classmethod
    def open(cls, team_dir: Path, state_dir: Path, api: Api) -> Workspace:
        """Load the saved state (or start fresh)."""
        return cls(team_dir=team_dir, state_dir=state_dir, api=api, state=load_state(state_dir))

    def scan(self) -> LocalScan:
        """The team dir's syncable files and skips; refreshes the stat cache.

        `.memsyncignore` applies to what the team does not have yet: a key with a base,
        or one in a modify/delete conflict, is scanned whatever it says (as git does
        with tracked files). A bad ignore file raises `IgnoreFileError` (exit 2).
        """
        if not self.team_dir.exists():
            self.last_scan = LocalScan(checksums={}, skipped=[], cache={})
            return self.last_scan
        ignore = read_ignore_rules(self.team_dir).keeping(
            [*self.state.bases, *self.state.deleted_on_server]
        )
        fingerprint = self._rules_fingerprint()
        if self.state.scanner_rules != fingerprint:
            # New or changed rules: every file is scanned again, once.
            self.state.stat_cache = {}
            self.state.scanner_rules = fingerprint
        scanned = scan_team_dir(self.team_dir, self.state.stat_cache, ignore=ignore)
        hidden = self.api.hidden_prefix
        if hidden is not None:
            # A personal space of a repo: the private memory folder minus the team dir.
            scanned = LocalScan(
                checksums={k: v for k, v in scanned.checksums.items() if not k.startswith(hidden)},
                skipped=[s for s in scanned.skipped if not f"{s.key}/".startswith(hidden)],
                # Kept whole: the team dir's files are not read again on every scan.
                cache=scanned.cache,
            )
        self.state.stat_cache = scanned.cache
        self.last_scan = scanned
        return scanned

    def _rules_fingerprint(self) -> str:
        """`scanner.engine.rules_fingerprint()`, taken from the state while the rules
        file is byte for byte the one it was computed from (the fingerprint depends on
        nothing else), so a scan that finds nothing new never compiles the rules."""
        source = _rules_source_digest()
        cached = self.state.scanner_rules
        if source is not None and source == self.state.scanner_rules_source and cached:
            return cached
        from scanner.engine import rules_fingerprint

        # The scan's own rules (`verdicts.VERDICT_RULES`) are part of it: new ones drop the
        # stat cache like new scanner rules do.
        fingerprint = f"{rules_fingerprint()}+{VERDICT_RULES}"
        self.state.scanner_rules_source = source
        return fingerprint

    def set_base(self, key: str, text: str, checksum: str | None = None) -> None:
        """Record `text` as `key`'s base: its checksum in the state, its text in the store."""
        checksum = checksum or entry_checksum(text)
        self.state.bases[key] = checksum
        self._new_texts[checksum] = text

    def remember_text(self, text: str) -> str:
        """Keep `text` in the store (without making it a base); return its checksum."""
        checksum = entry_checksum(text)
        self._new_texts[checksum] = text
        return checksum

    def _capture_moved_bases(self) -> None:
        """Keep the text of every base that moved to what the local file holds now."""
        for key, checksum in self.state.bases.items():
            if self._saved_bases.get(key) == checksum or checksum in self._new_texts:
                continue
            try:
                text = read_entry(self.team_dir, key)
            except (OSError, UnsafeKey, UnicodeDecodeError):
                continue  # gone or unreadable: a later pull can fetch it if needed
            if entry_checksum(text) == checksum:
                self._new_texts[checksum] = text

    def save(self) -> None:
        """Persist the base texts, then the state (so every base's text is kept first)."""
        self._capture_moved_bases()
        self._saved_bases = dict(self.state.bases)
        if self._new_texts:
            self.objects.put_many(self._new_texts)
            self._new_texts.clear()
            kept = {*self.state.bases.values(), *self.state.refused.values()}
            # A proposal's text: once accepted, it becomes its key's base (`review`).
            kept |= {
                record["checksum"]
                for record in self.state.proposals.values()
                if isinstance(record, dict) and isinstance(record.get("checksum"), str)
            }
            self.objects.keep_only(kept)
        save_state(self.state_dir, self.state)

    def close(self) -> None:
        """Release the object store."""
        self.objects.close()


# The files the scanner's rules are defined in (`rules.py` imports `context_rules.py`).
_RULES_FILES = ("rules.py", "context_rules.py")


def _rules_source_digest() -> str | None:
    """A digest of the scanner's rules files (`_RULES_FILES`) and the scan's own
    `VERDICT_RULES`; None when a file is unreadable."""
    digest = hashlib.sha256(VERDICT_RULES.encode())
    try:
        for name in _RULES_FILES:
            digest.update(Path(scanner.__file__).with_name(name).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()[:16]
