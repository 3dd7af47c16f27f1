"""Live updates: a server-sent event with a repo's new head after every commit.

    GET {prefix}/events?repo=R        Authorization: Bearer (read access)

    id: <version>
    event: commit
    data: {"version": <int>, "checksum": "sha256:<hex>"}

In a reviewed repo (docs/protocol.md section 3.12) a new, accepted, rejected or replaced
proposal is also announced, without an `id:` line (the id stays the head version);
`mine` only on the streams of the person whose proposal it is (any of their tokens):

    event: proposal
    data: {"id": <int>, "status": "pending"|"accepted"|"rejected"|"replaced"[, "mine": true]}

The process that stored one announces it to its own streams at once; on PostgreSQL the
store also announces it on the same channel as commits, so every process's streams hear
it, and a stream that hears one twice (its own process and the NOTIFY) sends it once.

Whether the repo is reviewed, and whether the stream's token reviews, follows the head
event when the stream opens and again whenever the setting changes (`memsync-server
repo set`, another process): heard by the SQLite poll below (the policies read with the
heads) or, on PostgreSQL, by the policy's NOTIFY. A new proposal proves the repo
reviewed, so its event is preceded by `review` on when a stream was last told off:

    event: review
    data: {"on": <bool>, "reviewer": <bool>}

The first event is the repo's head when the stream opens (version 0 and the empty-repo
checksum for a repo that never held data), so a client that reconnects never misses a
commit; it is left out when `Last-Event-ID` equals that version. Then one event after
every commit, several commits possibly coalesced into one for the newest version: the
client pulls `?since=` its last version, so the newest is all it needs. An idle stream
gets a `: keep-alive` comment every `events_heartbeat_seconds`, which keeps proxies from
closing it and frees the slot of a client that vanished without closing.

How one process hears of commits:

    EventHub                 one per application
    ├── publish(head)        a commit of this process (from any thread): wakes its streams now
    └── one watcher task     started with the first stream, for other processes' commits
        ├── PostgreSQL       one LISTEN connection on `memsync_commits` (every commit
        │                    NOTIFYs inside its transaction); after each (re)connect the
        │                    heads of the watched repos are read once, so a commit made
        │                    while it was not listening is not missed
        └── SQLite           one `Store.heads` query (and one of the review policies)
                             every `events_poll_seconds` while a stream is open, shared
                             by every stream of the process

The hub keeps the newest head it has heard of per watched repo; each stream sends it
when it is newer than the last version that stream sent, so a commit heard twice (from
`publish` and from NOTIFY) is sent once.

A token revoked (by `memsync-server token revoke` in any process) or expired while its
streams are open ends them within `token_cache_seconds`: one more task per process
reads, every cache window, the stored record of each token holding a stream here (one
indexed row per distinct token, all in one trip to a worker thread) and ends the streams
of a token that is revoked, gone or expired, as finished responses; their slots are
freed as for any stream that ends. Each stream ends for one reason, which the access
log names (`StreamEnd`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import anyio
from sqlalchemy.engine import make_url
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from memsync_protocol.checksums import EMPTY_REPO_CHECKSUM, is_checksum
from sync_server.config import Settings
from sync_server.errors import TooManyStreams
from sync_server.metrics import Metrics
from sync_server.storage.base import PROPOSAL_STATUSES, RepoHead, Store, TokenRecord
from sync_server.storage.sql import COMMIT_CHANNEL
from sync_server.storage.sql_review import policy_patterns

log = logging.getLogger("memsync.events")

# uvicorn waits for every open request before it stops, and an event stream never ends
# by itself: servers give requests this long after SIGTERM or Ctrl-C, then cancel what
# is left (the streams; a write in a worker thread still finishes its transaction).
SHUTDOWN_GRACE_SECONDS = 3
KEEP_ALIVE = b": keep-alive\n\n"
# Proposal events a stream keeps for a client that has not read them yet.
MAX_QUEUED_PROPOSALS = 256
# The listener's `application_name`, so an operator can tell it apart in pg_stat_activity.
LISTENER_NAME = "memsync-events"
_RECONNECT_MAX_SECONDS = 30.0
# The token check's period when the token cache is off (`token_cache_seconds` 0).
_MIN_TOKEN_CHECK_SECONDS = 0.5
# Why a stream ended, as the access log's `reason=` names it.
StreamEnd = Literal["client-gone", "token-revoked", "token-expired", "shutdown"]
# Where the access log leaves, in `scope["state"]`, what a stream's response calls with
# its end reason as soon as it ends (`sync_server.app.RequestGuard`).
STREAM_END_STATE = "stream_end"


@dataclass(frozen=True, slots=True)
class CommitNotice:
    """A repo's head as an event carries it."""

    repo: str
    version: int
    checksum: str

    def frame(self) -> bytes:
        """The event as it goes on the wire."""
        data = json.dumps({"version": self.version, "checksum": self.checksum})
        return f"id: {self.version}\nevent: commit\ndata: {data}\n\n".encode()


@dataclass(frozen=True, slots=True)
class ProposalNotice:
    """A proposal's new status as an event carries it (no `id:`: the head's stays), and
    whose it is (`person`: only that person's streams are told it is theirs)."""

    proposal_id: int
    status: str
    person: str | None = field(default=None, compare=False)

    def frame(self, stream: _Stream) -> bytes:
        """The event as it goes on `stream`."""
        body: dict[str, object] = {"id": self.proposal_id, "status": self.status}
        if self.person is not None and self.person == stream.person:
            body["mine"] = True
        return f"event: proposal\ndata: {json.dumps(body)}\n\n".encode()


@dataclass(frozen=True, slots=True)
class ReviewNotice:
    """Whether the repo is reviewed (sent on opening and when it changes)."""

    on: bool

    def frame(self, stream: _Stream) -> bytes:
        """The event as it goes on `stream`: with whether its token reviews."""
        data = json.dumps({"on": self.on, "reviewer": stream.reviewer})
        return f"event: review\ndata: {data}\n\n".encode()


@dataclass(eq=False, slots=True)
class _Stream:
    """One open stream: its repo, the token holding its slot, and its wake-up."""

    repo: str
    token_id: str
    # Whose proposals are this token's (`TeamMemory.owner`), and whether it reviews.
    person: str | None = None
    reviewer: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    # Set (with `wake`) when the token check finds the stream's token revoked or expired.
    token_end: StreamEnd | None = None
    # Proposal and review events not sent yet, oldest first (bounded: a stalled client
    # drops old ones).
    proposals: list[ProposalNotice | ReviewNotice] = field(default_factory=list)

    def queue(self, notice: ProposalNotice | ReviewNotice) -> None:
        del self.proposals[: max(0, len(self.proposals) - MAX_QUEUED_PROPOSALS + 1)]
        self.proposals.append(notice)
        self.wake.set()


@dataclass(slots=True)
class _Topic:
    """The open streams of one repo and the newest head heard of for it."""

    streams: set[_Stream] = field(default_factory=set)
    latest: CommitNotice | None = None
    # Proposal notices delivered lately (a proposal has each status once), so the NOTIFY
    # echo of one this process already delivered is dropped.
    delivered: dict[ProposalNotice, None] = field(default_factory=dict)
    # Whether the repo is reviewed, as its streams were last told (None: not read yet).
    review: bool | None = None


def listen_url(database_url: str) -> str | None:
    """The libpq conninfo for the LISTEN connection, or None when the database is not PostgreSQL.

    Built by psycopg from the parsed URL's parts, so a user or password with any
    character (a space, a quote, a backslash) reaches libpq as it is.
    """
    from psycopg.conninfo import make_conninfo

    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return None
    options = {
        key: ",".join(value) if isinstance(value, tuple) else value
        for key, value in url.query.items()
    }
    return make_conninfo(
        "",
        host=url.host,
        port=url.port,
        dbname=url.database,
        user=url.username,
        password=url.password,
        **options,
    )


def parse_last_event_id(value: str | None) -> int | None:
    """The version a reconnecting client last saw, or None when absent or not a version."""
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 19:
        return None
    return int(value)


class EventHub:
    """This process's open event streams, their per-token slots, and the commit watcher.

    Everything but `publish` runs on the server's event loop, so no lock is needed.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        metrics: Metrics,
        *,
        find_tokens: Callable[[Sequence[str]], Mapping[str, TokenRecord | None]] | None = None,
    ) -> None:
        """`find_tokens`: how the token check reads the streaming tokens from the store,
        all in one query (by default `store.find_tokens`; the app passes
        `Authenticator.refresh`, which also updates the token cache, so a reconnect with
        a revoked token is refused at once)."""
        self._store = store
        self._find_tokens = find_tokens or store.find_tokens
        self._settings = settings
        self._metrics = metrics
        self._listen_url = listen_url(settings.database_url)
        self._topics: dict[str, _Topic] = {}
        self._slots: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._token_checker: asyncio.Task[None] | None = None
        self._heads_failing = False
        self._tokens_failing = False
        # Reads started by a policy's NOTIFY (kept so they are not collected mid-run).
        self._background: set[asyncio.Task[None]] = set()

    # -- what the routes call --------------------------------------------------------

    def publish(self, head: RepoHead) -> None:
        """Announce a commit this process made; safe to call from any thread."""
        loop = self._loop
        if loop is None or not self._topics:
            return
        notice = CommitNotice(head.repo, head.version, head.checksum)
        # A closed loop means the server is stopping and no stream is left to wake.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._deliver, notice)

    def publish_proposal(
        self, repo: str, proposal_id: int, status: str, person: str | None = None
    ) -> None:
        """Announce a proposal's new status (of `person`'s proposal) to the repo's
        streams; safe from any thread.

        Sent from here even on PostgreSQL, whose NOTIFY also brings it back: the LISTEN
        connection may not be up yet when the first stream opens, and the echo is
        dropped by `_deliver_proposal`."""
        loop = self._loop
        if loop is None or repo not in self._topics:
            return
        notice = ProposalNotice(proposal_id, status, person)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._deliver_proposal, repo, notice)

    def _deliver_proposal(self, repo: str, notice: ProposalNotice) -> None:
        topic = self._topics.get(repo)
        if topic is None or notice in topic.delivered:
            return
        topic.delivered[notice] = None
        if len(topic.delivered) > MAX_QUEUED_PROPOSALS:
            del topic.delivered[next(iter(topic.delivered))]
        if notice.status == "pending":
            # A new proposal: the repo is reviewed now, whatever the poll heard last, so
            # a reviewer's client knows it before it hears of the proposal.
            self._deliver_review(repo, True)
        for stream in topic.streams:
            stream.queue(notice)

    def _deliver_review(self, repo: str, on: bool, *, unless: _Stream | None = None) -> None:
        """Tell the repo's streams (but `unless`) its review setting, when it changed."""
        topic = self._topics.get(repo)
        if topic is None or topic.review == on:
            return
        first = topic.review is None
        topic.review = on
        if first:
            return  # the first read: each stream said it when it opened
        notice = ReviewNotice(on)
        for stream in topic.streams:
            if stream is not unless:
                stream.queue(notice)

    def _read_opening(self, repo: str) -> tuple[RepoHead | None, bool]:
        """(worker thread) A new stream's repo head and review setting."""
        return self._store.head(repo), self._store.is_reviewed(repo)

    async def open_stream(
        self,
        repo: str,
        token_id: str,
        *,
        last_event_id: str | None,
        person: str | None = None,
        reviewer: bool = False,
    ) -> Response:
        """Take a slot, read the head and the review setting, and answer with the stream.

        `person` owns the token's proposals (`mine` on their events) and `reviewer`
        says whether it reviews (on `review` events). Raises `TooManyStreams`, or a
        storage error, before anything is sent, so the client gets the usual JSON error.
        """
        stream = self._subscribe(repo, token_id)
        stream.person, stream.reviewer = person, reviewer
        try:
            # Read after subscribing: a commit in between is then heard, not lost.
            head, reviewed = await run_in_threadpool(self._read_opening, repo)
        except BaseException:
            self._unsubscribe(stream)
            raise
        # The other streams learn a change this read found; this one says it first.
        self._deliver_review(repo, reviewed, unless=stream)
        stream.proposals.insert(0, ReviewNotice(reviewed))
        stream.wake.set()
        first = (
            CommitNotice(repo, 0, EMPTY_REPO_CHECKSUM)
            if head is None
            else CommitNotice(repo, head.version, head.checksum)
        )
        heard = self._topics[repo].latest
        if heard is not None and heard.version > first.version:
            first = heard
        skip_first = parse_last_event_id(last_event_id) == first.version
        return EventStreamResponse(self, stream, first, skip_first=skip_first)

    async def stop(self) -> None:
        """Stop the watcher and the token check; called when the application shuts down."""
        tasks = {task for task in (self._watcher, self._token_checker) if task is not None}
        tasks |= self._background
        self._watcher = self._token_checker = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # -- streams ---------------------------------------------------------------------

    def _subscribe(self, repo: str, token_id: str) -> _Stream:
        limit = self._settings.max_streams_per_token
        if self._slots[token_id] >= limit:
            # A vanished client's slot is freed by the next keep-alive at the latest.
            retry_after = math.ceil(self._settings.events_heartbeat_seconds)
            raise TooManyStreams(limit, retry_after)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # the first stream (or an app served again on a new loop)
            self._loop, self._watcher, self._token_checker = loop, None, None
        stream = _Stream(repo, token_id)
        self._topics.setdefault(repo, _Topic()).streams.add(stream)
        self._slots[token_id] += 1
        self._metrics.event_streams.inc()
        self._ensure_watcher()
        return stream

    def _unsubscribe(self, stream: _Stream) -> None:
        if stream.closed:
            return
        stream.closed = True
        topic = self._topics.get(stream.repo)
        if topic is not None:
            topic.streams.discard(stream)
            if not topic.streams:
                del self._topics[stream.repo]
        self._slots[stream.token_id] -= 1
        if self._slots[stream.token_id] <= 0:
            del self._slots[stream.token_id]
        self._metrics.event_streams.dec()

    def _latest(self, repo: str) -> CommitNotice | None:
        topic = self._topics.get(repo)
        return None if topic is None else topic.latest

    def _deliver(self, notice: CommitNotice) -> None:
        """Remember a head if it is newer than any heard of, and wake that repo's streams."""
        topic = self._topics.get(notice.repo)
        if topic is None:
            return
        if topic.latest is None or notice.version > topic.latest.version:
            topic.latest = notice
            for stream in topic.streams:
                stream.wake.set()

    def _sent(self) -> None:
        self._metrics.events_sent.inc()

    # -- the watcher -----------------------------------------------------------------

    def _ensure_watcher(self) -> None:
        loop = asyncio.get_running_loop()
        if self._watcher is None or self._watcher.done():
            run = self._listen() if self._listen_url else self._poll()
            self._watcher = loop.create_task(run, name="memsync-events-watcher")
        if self._token_checker is None or self._token_checker.done():
            self._token_checker = loop.create_task(
                self._check_tokens(), name="memsync-events-token-check"
            )

    # -- the token check -------------------------------------------------------------

    def _ended_tokens(self, token_ids: Sequence[str]) -> dict[str, StreamEnd]:
        """(worker thread) The tokens among `token_ids` whose streams must end, and why."""
        now = datetime.now(UTC)
        ended: dict[str, StreamEnd] = {}
        records = self._find_tokens(token_ids)
        for token_id in token_ids:
            record = records.get(token_id)
            if record is None or record.revoked_at is not None:
                ended[token_id] = "token-revoked"
            elif record.expired(now):
                ended[token_id] = "token-expired"
        return ended

    async def _check_tokens(self) -> None:
        """Every token cache window, end the streams of revoked or expired tokens."""
        period = max(self._settings.token_cache_seconds, _MIN_TOKEN_CHECK_SECONDS)
        while True:
            await asyncio.sleep(period)
            token_ids = list(self._slots)
            if not token_ids:
                continue
            try:
                ended = await run_in_threadpool(self._ended_tokens, token_ids)
            except Exception as error:  # the next round tries again; streams stay open
                if not self._tokens_failing:
                    log.warning("events: checking tokens failed (%s)", type(error).__name__)
                self._tokens_failing = True
                continue
            if self._tokens_failing:
                log.info("events: checking tokens works again")
            self._tokens_failing = False
            if ended:
                self._end_streams(ended)

    def _end_streams(self, ended: dict[str, StreamEnd]) -> None:
        for topic in self._topics.values():
            for stream in topic.streams:
                reason = ended.get(stream.token_id)
                if reason is not None and stream.token_end is None:
                    stream.token_end = reason
                    stream.wake.set()

    def _read_heads_and_reviews(
        self, repos: Sequence[str], *, heads: bool
    ) -> tuple[Mapping[str, RepoHead], dict[str, bool]]:
        """(worker thread) The heads of `repos` (when `heads`) and whether each is
        reviewed: one query each."""
        found = self._store.heads(repos) if heads else {}
        policies = self._store.review_policies()
        reviewed = {
            repo: next(
                (policies[pattern] for pattern in policy_patterns(repo) if pattern in policies),
                False,
            )
            for repo in repos
        }
        return found, reviewed

    async def _read_watched_heads(self, *, heads: bool = True) -> None:
        """One query for the heads of every repo with an open stream here, and one for
        the review policies (a change is told to the repo's streams)."""
        repos = list(self._topics)
        if not repos:
            return
        try:
            found, reviewed = await run_in_threadpool(
                lambda: self._read_heads_and_reviews(repos, heads=heads)
            )
        except Exception as error:  # the next round tries again; streams keep beating
            if not self._heads_failing:
                log.warning("events: reading repo heads failed (%s)", type(error).__name__)
            self._heads_failing = True
            return
        if self._heads_failing:
            log.info("events: reading repo heads works again")
        self._heads_failing = False
        for head in found.values():
            self._deliver(CommitNotice(head.repo, head.version, head.checksum))
        for repo, on in reviewed.items():
            self._deliver_review(repo, on)

    async def _poll(self) -> None:
        """SQLite: other processes' commits, by reading the watched heads now and then."""
        while True:
            await asyncio.sleep(self._settings.events_poll_seconds)
            await self._read_watched_heads()

    async def _listen(self) -> None:
        """PostgreSQL: other processes' commits, from one LISTEN connection (reconnecting)."""
        import psycopg
        from psycopg import sql

        assert self._listen_url is not None
        delay = 1.0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._listen_url,
                    autocommit=True,
                    connect_timeout=10,
                    application_name=LISTENER_NAME,
                    # TCP keep-alives: a listener cut off without a reset still notices.
                    keepalives=1,
                    keepalives_idle=30,
                    keepalives_interval=10,
                    keepalives_count=3,
                ) as connection:
                    await connection.execute(
                        sql.SQL("LISTEN {}").format(sql.Identifier(COMMIT_CHANNEL))
                    )
                    delay = 1.0
                    await self._read_watched_heads()
                    while True:
                        async for notify in connection.notifies(
                            timeout=self._settings.events_heartbeat_seconds
                        ):
                            self._on_notify(notify.payload)
                        # Quiet for a while: a dead connection raises here.
                        await connection.execute("SELECT 1")
            except Exception as error:  # psycopg.Error, OSError: never end the watcher
                log.warning(
                    "events: the listener lost the database (%s); reconnecting in %.0f s",
                    type(error).__name__,
                    delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RECONNECT_MAX_SECONDS)

    def _on_notify(self, payload: str) -> None:
        try:
            data = json.loads(payload)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if isinstance(data.get("review"), str):
            # A policy changed: read whether each watched repo is reviewed now.
            if self._loop is not None:
                task = self._loop.create_task(self._read_watched_heads(heads=False))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            return
        repo, proposal, status = data.get("repo"), data.get("proposal"), data.get("status")
        if isinstance(repo, str) and isinstance(proposal, int) and status in PROPOSAL_STATUSES:
            person = data.get("person")
            owner = person if isinstance(person, str) else None
            self._deliver_proposal(repo, ProposalNotice(proposal, str(status), owner))
            return
        version, checksum = data.get("version"), data.get("checksum")
        if (
            isinstance(repo, str)
            and isinstance(version, int)
            and isinstance(checksum, str)
            and is_checksum(checksum)
        ):
            self._deliver(CommitNotice(repo, version, checksum))


class EventStreamResponse(Response):
    """`text/event-stream` for one repo until the client leaves, the token is revoked or
    expires, or the server stops.

    A task watches for the client's disconnect, so a closed stream frees its slot at
    once rather than at the next write. Why the stream ended goes to the access log
    through `scope["state"][STREAM_END_STATE]` when there is one.
    """

    def __init__(
        self, hub: EventHub, stream: _Stream, first: CommitNotice, *, skip_first: bool
    ) -> None:
        # Not Response.__init__: it would add a Content-Length to a body that never ends.
        self.status_code = 200
        self.background = None
        self.body = b""
        self.raw_headers = [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self._hub = hub
        self._stream = stream
        self._first = first
        self._skip_first = skip_first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason: StreamEnd = "client-gone"
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            token_end: StreamEnd | None = None
            async with anyio.create_task_group() as group:

                async def until_disconnected() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(until_disconnected)
                token_end = await self._send_events(send)
                group.cancel_scope.cancel()
            if token_end is not None:
                # The token was revoked or expired: the client sees the stream end, and
                # its reconnect gets the 401 that tells it why.
                reason = token_end
                await _finish(send)
        except OSError:
            pass  # the client went away in the middle of a write
        except asyncio.CancelledError:
            # uvicorn cancels what is still open SHUTDOWN_GRACE_SECONDS after a shutdown
            # began. End the stream as a finished response, so the client sees the end
            # of the stream (and reconnects) and nothing is logged as a crash.
            reason = "shutdown"
            # Released and logged first: the loop may stop before the last write is done.
            self._ended(scope, reason)
            await _finish(send)
        finally:
            self._ended(scope, reason)

    def _ended(self, scope: Scope, reason: StreamEnd) -> None:
        """Free the slot and tell the access log why (once: later calls do nothing)."""
        if self._stream.closed:
            return
        self._hub._unsubscribe(self._stream)
        report = (scope.get("state") or {}).get(STREAM_END_STATE)
        if callable(report):
            report(reason)

    async def _send_events(self, send: Send) -> StreamEnd:
        """Events and keep-alives until the token check ends the stream (returning why);
        the client's leaving or a shutdown cancels it instead."""

        async def write(chunk: bytes) -> None:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})

        heartbeat = self._hub._settings.events_heartbeat_seconds
        stream = self._stream
        last_sent = self._first.version
        if not self._skip_first:
            await write(self._first.frame())
            self._hub._sent()
        next_beat = time.monotonic() + heartbeat
        while True:
            with anyio.move_on_after(max(0.0, next_beat - time.monotonic())):
                await stream.wake.wait()
            stream.wake.clear()
            if stream.token_end is not None:
                return stream.token_end
            while stream.proposals:
                await write(stream.proposals.pop(0).frame(stream))
                self._hub._sent()
                next_beat = time.monotonic() + heartbeat
            notice = self._hub._latest(stream.repo)
            if notice is not None and notice.version > last_sent:
                await write(notice.frame())
                self._hub._sent()
                last_sent = notice.version
            elif time.monotonic() >= next_beat:
                await write(KEEP_ALIVE)
            else:
                continue
            next_beat = time.monotonic() + heartbeat


async def _finish(send: Send) -> None:
    """End the response (bounded: a client that stopped reading does not hold it)."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(
            send({"type": "http.response.body", "body": b"", "more_body": False}), timeout=1
        )
