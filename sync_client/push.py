"""`memsync push`: upload local edits, never overwriting a teammate's edit unseen.

docs/protocol.md 4.3: the delta is every key whose local checksum differs from its base; it
goes up in deterministic byte-bounded batches, each conditional on per-key
`baseChecksums` (memsync servers) or on `If-Match` (servers with only the anchor
contract). A refused batch is sorted with the hashes view: settled keys are done,
keys changed on both sides are conflicts (left for the next pull to settle), the
rest are sent again, for at most two rounds.

One bad file never blocks the others (docs/protocol.md 4.5, "per entry"): before anything is
sent, every rule the server applies is checked (`precheck`) and a failing file is
skipped with its reason. An entry the server still refuses by name (too large for its
limit, an invalid key or text, a file/folder clash) is left out, remembered with its
checksum in the state so it is not offered again until it changes, and the rest of
its batch is sent again; at most `MAX_REFUSALS` such answers per push.

Ctrl-C during the upload keeps what the committed batches did (their bases are in the
saved state) and raises `Interrupted` with the count, so the next push sends only the
rest. The count is the server's: a batch in flight may already be committed, so the
first Ctrl-C lets its answer arrive and be recorded before stopping (`_CtrlC`); a second
one stops at once and says how many files were in flight.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from types import FrameType, TracebackType
from typing import Any, TypeVar

from memsync_protocol.checksums import entry_checksum
from scanner import scan_text
from sync_client import provenance
from sync_client.answers import PreconditionFailed, RemoteState, StaleBase
from sync_client.api import GZIP_REQUESTS
from sync_client.batching import Batch, make_batches
from sync_client.errors import (
    ConflictRoundsExhausted,
    EntriesRefused,
    EntryTooLarge,
    Interrupted,
    PermanentError,
    TooManyEntries,
    TooManyProposals,
)
from sync_client.freshness import report as freshness
from sync_client.personal import space_words
from sync_client.plan import allowed_keys, push_delta, sort_after_refusal
from sync_client.precheck import (
    effective_limit,
    entry_problem,
    path_clashes,
    refusal_row,
    too_large_row,
    too_many_row,
)
from sync_client.retries import with_retries
from sync_client.review import proposals as review
from sync_client.review.wire import Proposed
from sync_client.state import SyncState, now_stamp
from sync_client.team_files import read_entry
from sync_client.workspace import Workspace

CONFLICT_ROUNDS = 2
BASE_PRECONDITION = "base-precondition"
# Answers refusing named entries that one push accepts. An honest server names every
# bad key in one answer (or one too-large key, after which its limit is applied
# locally), so a few suffice; the bound keeps a misbehaving server from looping us.
MAX_REFUSALS = 8


@dataclass
class PushResult:
    """What a push did (the `--json` shape of the client issue).

    `would_push` lists, for a dry run, each entry that would be sent
    (`{key, change: new|modified, bytes}`); a dry run uploads nothing.
    `created_team_memory`: the server had no team memory for the repo, and this push
    created it.
    `index_kept`: `{index, line, targets}` for each line an edit of an index dropped that
    was the only link to a live note (`targets`): put back at the end, here and in what
    was sent (only deleting the note, `memsync rm`, drops its line).
    """

    uploaded: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    dry_run: bool = False
    would_push: list[dict[str, Any]] = field(default_factory=list)
    created_team_memory: bool = False
    index_kept: list[dict[str, Any]] = field(default_factory=list)
    # A reviewed repo: `{key, id}` of each key sent as a proposal now, and the keys
    # whose proposal (this very text) still waits for review, not sent again.
    proposed: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    # Proposals of this person decided, as a pull's `reviewed` rows (`{key, id,
    # status, by, reason, saved_to}`): accepted ones now in sync (said once), and
    # rejected ones whose text is held back until the next pull puts the team's back.
    reviewed: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The JSON object `memsync push --json` prints."""
        return asdict(self)


def _mode(workspace: Workspace, known: RemoteState | None) -> tuple[bool, RemoteState | None]:
    """(per-key bases offered?, the hashes view if it had to be fetched to know).

    Asked once, then remembered. A never-written repo answers 404 with no `supports`:
    nothing is learned, and that push uses If-Match on the empty checksum, which is
    safe with any server. `known` is a hashes view this push already fetched.
    """
    supports = workspace.state.supports
    if supports is not None:
        # What the server said last time also says whether it takes gzip bodies, so
        # even a one-file push is compressed; a server that stopped answers 415, and
        # the body goes again plain.
        workspace.api.gzip_requests = GZIP_REQUESTS in supports
        return BASE_PRECONDITION in supports, known
    remote = known if known is not None else with_retries(workspace.api.hashes)
    if remote.version > 0:
        workspace.state.supports = sorted(remote.supports)
    return BASE_PRECONDITION in remote.supports, remote


def _settle(
    workspace: Workspace,
    keys: list[str],
    local_now: dict[str, str],
    remote: RemoteState,
    result: PushResult,
) -> list[str]:
    """Sort keys against the server after a refusal; return those to send."""
    state = workspace.state
    sorted_keys = sort_after_refusal(keys, local_now, state.bases, remote.entry_checksums)
    for key in sorted_keys.done:
        state.bases[key] = local_now[key]
    result.conflicts.extend(sorted_keys.conflicts)
    return sorted_keys.retry


def describe_skip(workspace: Workspace, row: dict[str, Any]) -> dict[str, Any]:
    """A scan's skip row (`Skipped.as_row`: the scan's verdict, the one every surface
    shows) with the size and the limit in force added for a file too large."""
    key = row["key"]
    if row["reason"] == "too-large":
        try:
            size = os.lstat(workspace.team_dir / key).st_size
        except OSError:
            return row
        return too_large_row(key, size, effective_limit(workspace.state.max_entry_bytes))
    return row


def _remembered(state: SyncState, delta: list[str], local: dict[str, str]) -> list[dict[str, Any]]:
    """Skip rows of the entries the server refused before, unchanged since.

    A refusal whose file changed or vanished is forgotten: the new text is tried again.
    """
    if not isinstance(state.rejected, dict):
        state.rejected = {}
    for key, entry in list(state.rejected.items()):
        if not isinstance(entry, dict) or entry.get("checksum") != local.get(key):
            del state.rejected[key]
    rows = []
    for key in delta:
        refused = state.rejected.get(key)
        if refused is not None:
            rows.append({"key": key, **{k: v for k, v in refused.items() if k != "checksum"}})
    return rows


def _entry_checks(state: SyncState, texts: dict[str, str], result: PushResult) -> dict[str, str]:
    """The texts that pass every entry rule; the others are skipped with their reason."""
    limit = effective_limit(state.max_entry_bytes)
    passed: dict[str, str] = {}
    for key, text in texts.items():
        problem = entry_problem(key, text, max_entry_bytes=limit)
        if problem is None:
            passed[key] = text
        else:
            result.skipped.append(problem)
    return passed


def _skip_clashes(
    texts: dict[str, str], server_keys: set[str], local: dict[str, str], result: PushResult
) -> None:
    """Leave out (and report) the texts whose key clashes with a server or local key."""
    for key, row in path_clashes(texts, server_keys, local).items():
        result.skipped.append(row)
        del texts[key]


def push(
    workspace: Workspace,
    *,
    dry_run: bool = False,
    progress: Callable[[int, int], None] | None = None,
    only: Collection[str] | None = None,
    notice: Callable[[str], None] | None = None,
    via: str = "cli",
    outcomes: bool = False,
) -> PushResult:
    """Push once (`only`: just these keys); the state is saved when it returns (also
    after a failure). `via` is how the change was made, for its provenance (`cli`,
    `watcher`, `mcp`, `snapshot`; docs/protocol.md 3.13). A key deleted for the team
    while edited here (a modify/delete conflict) is not offered until `memsync
    resolve` settles it.

    `outcomes` (`memsync push`, which a person runs): with proposals of this person
    pending, first ask the server once what became of them, so "waiting for review"
    is never said of one a reviewer has decided. The watcher leaves it off: it hears
    decisions as events, and a push of its costs no extra request.

    `notice(line)` hears, once the first batch is answered, that the push created
    the team memory of a repo the server had none for (so a mistyped repo shows), or
    that it proposed the repo's first notes (a proposal creates nothing). Ctrl-C
    during the upload raises `Interrupted` with how many files went up.
    """
    state = workspace.state
    api = workspace.api
    result = PushResult(dry_run=dry_run)
    scanned = workspace.scan()
    local = scanned.checksums
    result.skipped = [describe_skip(workspace, item.as_row()) for item in scanned.skipped]
    if (outcomes and review.pending_keys(state)) or (
        not dry_run and review.edited_while_pending(state, local)
    ):
        # One request, only now: an edit of a proposal builds on the team's text if it
        # was accepted meanwhile, and a decided one is not said to wait.
        review.learn_outcomes(workspace)
    if outcomes:
        result.reviewed = review.accepted_rows(review.settle_accepted(workspace))
    delta = [
        key
        for key in push_delta(local, state.bases)
        if key not in state.deleted_on_server and (only is None or key in only)
    ]
    # A proposal waiting for review (or rejected, until the next pull puts the team's
    # text back) is never sent again: it costs no request.
    held = [key for key in delta if review.waiting(state, key, local.get(key))]
    pending = review.pending_keys(state)
    result.waiting = [key for key in held if key in pending]
    result.reviewed += [
        {**row, "status": review.REJECTED}
        for row in review.rejected_records(state)
        if row["key"] in held
    ]
    delta = [key for key in delta if key not in held]
    remembered = _remembered(state, delta, local)
    result.skipped.extend(remembered)
    left_out = {row["key"] for row in remembered}
    texts = _read_checked(workspace, [key for key in delta if key not in left_out], local, result)
    # Every local rule before any request: a file the server would refuse costs nothing.
    texts = _entry_checks(state, texts, result)
    # An agent's record goes with the very text it wrote (an index line kept below is
    # memsync's, not a hand edit).
    records, spent = provenance.records_for(workspace.state_dir, texts)
    _keep_index_lines(workspace, texts, local, result, write=not dry_run)
    # The server's keys as of the last sync (the bases, and the keys a pull could not
    # write): a clash with one of them costs no request. A clash with a key committed
    # since is refused by the server by name (409 path_clash) and skipped the same way.
    _skip_clashes(texts, set(state.bases) | set(state.refused), local, result)
    remote: RemoteState | None = None
    if texts and state.max_entries is not None:
        # Room is only known from the server's list.
        remote = with_retries(api.hashes)
        _skip_clashes(texts, set(remote.entry_checksums), local, result)
        fits = allowed_keys(local, remote.entry_checksums, state.max_entries)
        for key in sorted(texts):
            if key not in fits:
                result.skipped.append(too_many_row(key, state.max_entries))
                del texts[key]
    use_bases = True
    if texts and not dry_run:
        use_bases, remote = _mode(workspace, remote)
    creating = remote is not None and remote.no_team_memory
    if dry_run or not texts:
        if dry_run:
            bases = {key: state.bases.get(key) for key in texts}
            result.would_push = [
                {
                    "key": key,
                    "change": "new" if state.bases.get(key) is None else "modified",
                    "bytes": len(text.encode("utf-8")),
                }
                for key, text in sorted(texts.items())
            ]
            result.batches = len(make_batches(texts, base_checksums=bases))
        workspace.save()
        return result
    ctrl_c = _CtrlC(notice)
    head = freshness.checkout_head(workspace)  # one `git rev-parse` per push
    sent = _Sent(via, head, records)
    if creating and notice is not None:
        sent.first_answer.append(_creation_notice(workspace, notice))
    try:
        with ctrl_c:
            _upload(workspace, texts, use_bases, remote, result, progress, ctrl_c, sent)
    except KeyboardInterrupt:
        raise Interrupted(
            "uploaded",
            len(result.uploaded),
            len(texts),
            "memsync push",
            in_flight=ctrl_c.cut_short,
        ) from None
    finally:
        result.created_team_memory = creating and bool(result.uploaded)
        state.last_push = now_stamp()
        workspace.save()
    freshness.record_written(workspace, result.uploaded, head=head)
    proposed = [row["key"] for row in result.proposed]
    provenance.forget(workspace.state_dir, [*result.uploaded, *proposed, *spent])
    return result


def _keep_index_lines(
    workspace: Workspace,
    texts: dict[str, str],
    local: dict[str, str],
    result: PushResult,
    *,
    write: bool,
) -> None:
    """The index guard: an index about to be sent keeps every line of its base text that
    was the only link to a note the team or this team dir still has. The lines put back
    are written into the local file too (so the team dir holds what is sent) and listed
    in `result.index_kept`. The base text left the server once: it needs no new scan."""
    from sync_client.index import team as team_index
    from sync_client.index.memory import is_index_key
    from sync_client.objects import base_texts
    from sync_client.team_files import write_entry
    from sync_client.verdicts import cache_record

    state = workspace.state
    indexes = [key for key in texts if is_index_key(key) and key in state.bases]
    if not indexes:
        return
    old_texts = base_texts(workspace.objects, state.bases, indexes)
    live = team_index.live_notes(state, local)
    for key in sorted(indexes):
        kept_text, kept = team_index.keep_team_lines(key, old_texts.get(key), texts[key], live)
        if not kept:
            continue
        if write:
            size, mtime_ns, inode = write_entry(workspace.team_dir, key, kept_text)
            checksum = entry_checksum(kept_text)
            state.stat_cache[key] = cache_record(size, mtime_ns, inode, checksum)
            local[key] = checksum
        texts[key] = kept_text
        result.index_kept.extend(kept)


_T = TypeVar("_T")


class _CtrlC:
    """Ctrl-C during an upload, counted exactly.

    A PUT cut short leaves the client not knowing what the server did with it (it may
    commit the batch after the client has gone). So while a batch is in flight the
    first Ctrl-C only asks to stop: the answer is awaited and recorded, then the push
    stops with the server's count. A second Ctrl-C stops at once (`cut_short` is the
    number of files in flight). Outside a PUT (a retry's wait, sorting a refusal) Ctrl-C
    stops at once. Only the main thread's default handler is replaced (the CLI's): a
    watcher's push runs on its own thread and keeps the watcher's handlers.
    """

    def __init__(self, notice: Callable[[str], None] | None) -> None:
        self._notice = notice
        self._previous: Any = None
        self.requested = False
        self.in_flight = 0
        self.cut_short = 0

    def __enter__(self) -> _CtrlC:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        if kind is None and self.requested:
            raise KeyboardInterrupt  # asked during the last batch: stop, with the count

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.in_flight and not self.requested:
            self.requested = True
            if self._notice is not None:
                self._notice(
                    f"stopping once the server answers for the {self.in_flight:,} file(s)"
                    " in flight (Ctrl-C again to stop now)"
                )
            return
        self.cut_short = self.in_flight
        raise KeyboardInterrupt

    def attempt(self, action: Callable[[], _T], files: int) -> Callable[[], _T]:
        """`action` (one PUT of `files` files) as one attempt: none starts once Ctrl-C
        asked to stop, and until `recorded` the batch counts as in flight."""

        def run() -> _T:
            if self.requested:
                raise KeyboardInterrupt
            self.in_flight = files
            try:
                return action()
            except BaseException:
                self.in_flight = 0  # refused, or failed: nothing of it is committed
                raise

        return run

    def recorded(self) -> None:
        """The committed batch is in the result and the state: stop now if asked to."""
        self.in_flight = 0
        if self.requested:
            raise KeyboardInterrupt


def _read_checked(
    workspace: Workspace, keys: list[str], scanned: dict[str, str], result: PushResult
) -> dict[str, str]:
    """Texts to upload. A file edited since the scan is scanned again before it leaves;
    one that vanished is left for the next push."""
    texts: dict[str, str] = {}
    for key in keys:
        try:
            text = read_entry(workspace.team_dir, key)
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        if entry_checksum(text) != scanned.get(key):
            findings = scan_text(text)
            if findings:
                result.skipped.extend(
                    {
                        "key": key,
                        "reason": "secret",
                        "rule": item.rule,
                        "label": item.label,
                        "line": item.line,
                    }
                    for item in findings
                )
                continue
        texts[key] = text
    return texts


class _Refusals:
    """Entries the server refused by name during one push, and how often it did."""

    def __init__(self, workspace: Workspace, result: PushResult) -> None:
        self.state = workspace.state
        self.result = result
        self.answers = 0

    def take(self, error: EntriesRefused, batch_keys: list[str], texts: dict[str, str]) -> set[str]:
        """Skip and remember the keys of this batch that `error` names; return them.

        A refusal that names none of them (or one answer too many) is a failure.
        """
        named = {key: why for key, why in error.refusals.items() if key in batch_keys}
        self.answers += 1
        if not named:
            raise error
        if self.answers > MAX_REFUSALS:
            raise PermanentError(
                f"the server refused entries {self.answers} times in one push; "
                "the rest was not sent (try again to send it)"
            ) from error
        if isinstance(error, EntryTooLarge) and error.max_bytes > 0:
            self.state.max_entry_bytes = error.max_bytes
        for key, why in sorted(named.items()):
            row = refusal_row(key, why, texts[key])
            checksum = entry_checksum(texts[key])
            self.state.rejected[key] = {
                "checksum": checksum,
                **{name: value for name, value in row.items() if name != "key"},
            }
            self.result.skipped.append(row)
        return set(named)

    def remember(self, keys: list[str], texts: dict[str, str], row: dict[str, Any]) -> None:
        """Skip and remember `keys`, all refused for one reason (`row` without a key)."""
        for key in sorted(keys):
            self.state.rejected[key] = {"checksum": entry_checksum(texts[key]), **row}
            self.result.skipped.append({"key": key, **row})


def too_many_proposals_row(error: TooManyProposals) -> dict[str, Any]:
    """The skip row (without its key) of an entry refused by the proposal bound."""
    return {"reason": "too-many-proposals", "max": error.maximum}


@dataclass(frozen=True)
class _Sent:
    """What every PUT of a push says of itself: how (`via`), the checkout's `HEAD`, and
    the agent records of the keys (`sync_client.provenance`); and who hears the first
    batch's answer (`first_answer`, called once with whether it was a proposal)."""

    via: str
    head: str | None
    records: dict[str, dict[str, str]]
    first_answer: list[Callable[[bool], None]] = field(default_factory=list)

    def answered(self, proposal: bool) -> None:
        while self.first_answer:
            self.first_answer.pop()(proposal)


def _creation_notice(workspace: Workspace, notice: Callable[[str], None]) -> Callable[[bool], None]:
    """The words for the first write into a repo the server has no team memory for,
    told once its answer is in: a commit created it; a proposal created nothing, and
    is said once (a later push, knowing the repo is reviewed, says nothing of it)."""
    api = workspace.api
    known = review.is_reviewed(workspace.state) and not review.is_reviewer(workspace.state)

    def told(proposal: bool) -> None:
        if not proposal:
            what = space_words(api.repo, api.space) if api.space else f"team memory for {api.repo}"
            notice(f"creating {what} on {api.server}")
        elif not known:
            notice(
                f"no team memory for {api.repo} on {api.server} yet: the repo is reviewed, "
                "so your notes are proposed, waiting for review (a reviewer's accept "
                "creates it)"
            )

    return told


def _batches(
    state: SyncState, texts: dict[str, str], keys: list[str], use_bases: bool, sent: _Sent
) -> list[Batch]:
    """The PUT batches of `keys`, with their bases when the server takes them; keys an
    agent wrote in different sessions go in different batches, each with its own
    provenance (no agent records: the same batches as ever)."""
    batches: list[Batch] = []
    for record, group in provenance.group_keys(keys, sent.records):
        bases = {key: state.bases.get(key) for key in group} if use_bases else None
        stamp = provenance.for_write(sent.via, sent.head, record)
        for batch in make_batches({key: texts[key] for key in group}, base_checksums=bases):
            batches.append(Batch(batch.keys, provenance.with_provenance(batch.body, stamp)))
    return batches


def _upload(
    workspace: Workspace,
    texts: dict[str, str],
    use_bases: bool,
    remote: RemoteState | None,
    result: PushResult,
    progress: Callable[[int, int], None] | None,
    ctrl_c: _CtrlC,
    sent: _Sent,
) -> None:
    state = workspace.state
    api = workspace.api
    scanned = {key: entry_checksum(text) for key, text in texts.items()}
    pending = sorted(texts)
    anchor: str | None = None
    if not use_bases:
        # If-Match alone would let a fresh ETag overwrite a teammate's edit unseen:
        # sort the keys against the server first, exactly as after a refusal.
        remote = remote if remote is not None else with_retries(api.hashes)
        anchor = remote.checksum
        pending = _settle(workspace, pending, dict(scanned), remote, result)
    total = len(pending)
    learned_limit = False
    refusals = _Refusals(workspace, result)
    for round_number in range(CONFLICT_ROUNDS + 1):
        if not pending:
            return
        if round_number > 0:
            # A conflict round reads the files again: they may have changed meanwhile.
            texts = _entry_checks(state, _read_checked(workspace, pending, scanned, result), result)
        else:
            texts = {key: texts[key] for key in pending}
        pending = sorted(texts)
        local_now = {key: entry_checksum(text) for key, text in texts.items()}
        queue = _batches(state, texts, pending, use_bases, sent)
        refused: list[str] = []
        while queue:
            batch = queue.pop(0)
            result.batches += 1
            try:
                put = functools.partial(api.put_reviewed, batch.body, if_match=anchor)
                written = with_retries(ctrl_c.attempt(put, len(batch.keys)))
            except (StaleBase, PreconditionFailed):
                refused.extend(batch.keys)
                continue
            except TooManyEntries as error:
                state.max_entries = error.max_entries
                if learned_limit:
                    raise
                learned_limit = True
                server_keys = with_retries(api.hashes).entry_checksums
                fits = allowed_keys(set(state.bases) | set(texts), server_keys, error.max_entries)
                for key in batch.keys:
                    if key in fits:
                        refused.append(key)
                    else:
                        result.skipped.append(too_many_row(key, error.max_entries))
                continue
            except TooManyProposals as error:
                # The author's bound: every further batch would be refused alike. Each
                # key is remembered as refused, so nothing is offered again (no request)
                # until its file changes.
                unsent = [*batch.keys, *(key for queued in queue for key in queued.keys)]
                refusals.remember(unsent, texts, too_many_proposals_row(error))
                queue = []
                continue
            except EntriesRefused as error:
                left_out = refusals.take(error, batch.keys, texts)
                # Everything not yet sent goes again in fresh batches, under the limit
                # the server may just have taught us.
                unsent = [key for key in batch.keys if key not in left_out]
                unsent += [key for queued in queue for key in queued.keys]
                sendable = _entry_checks(state, {key: texts[key] for key in unsent}, result)
                queue = _batches(state, texts, sorted(sendable), use_bases, sent)
                continue
            if isinstance(written, Proposed):
                # Kept for review: the bases stay the team's; the keys wait, unsent.
                proposed: dict[str, str | None] = {key: local_now[key] for key in batch.keys}
                for key in batch.keys:
                    # Kept, so an accept can make it the base whatever the file holds by then.
                    workspace.remember_text(texts[key])
                review.record_proposal(state, written, proposed)
                result.proposed.extend({"key": key, "id": written.id} for key in batch.keys)
                for key in batch.keys:
                    state.rejected.pop(key, None)
                sent.answered(proposal=True)
                ctrl_c.recorded()
                continue
            for key in batch.keys:
                workspace.set_base(key, texts[key], local_now[key])
                state.rejected.pop(key, None)
            result.uploaded.extend(batch.keys)
            sent.answered(proposal=False)
            if written.supports is not None:
                state.supports = sorted(written.supports)
            # Our own commit right after the version we pulled: the pull ETag may move
            # with it. Otherwise a teammate committed in between, and moving it would
            # hide their change from the next pull.
            if state.version is not None and written.version == state.version + 1:
                state.version = written.version
                state.etag = written.checksum
            if not use_bases:
                anchor = written.checksum
            if progress is not None:
                progress(len(result.uploaded), total)
            ctrl_c.recorded()
        if not refused:
            return
        if round_number == CONFLICT_ROUNDS:
            break
        remote = with_retries(api.hashes)
        if not use_bases:
            anchor = remote.checksum
        pending = _settle(workspace, refused, local_now, remote, result)
        if not pending:
            return
    raise ConflictRoundsExhausted("the server kept changing during the push; try again in a moment")
