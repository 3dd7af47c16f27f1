"""The HTTP client of the team-memory API: the only module that imports httpx.

httpx is imported on first use, not with this module: a no-op push makes no request
and must not pay the import (the CLI's start-up time is most of a no-op's cost).

Every answer is turned into a result or a typed error in exactly one place
(`_raise_for_status`, `_transport_errors`). 304, 409 `stale_base`, 410 and 412 are flow
signals for push and pull (`NotModified` as a None result, `StaleBase`, `HistoryGone`,
`PreconditionFailed`), not failures; so is a server without the events stream
(`EventsUnsupported`).

Transport failures become `NetworkError`s in words (`_network_words`): "connection
refused", "timed out after 30 s", "name not resolved", "TLS handshake failed", never
an exception's class name. `with_retries` tells a `retry_notices` listener (the CLI, on
a terminal) before each wait.

Every answer is also checked to come from a memsync server: a 404 is "no team memory
yet" only when its body is the server's JSON error `no_team_memory`, and a 200 must be
a team-memory object. Anything else (an HTML page, another JSON shape, a redirect) is
`NotAMemsyncServer`, so a mistyped URL is never read as an empty repo and never gets
"created" by a push.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard, TypeVar

if TYPE_CHECKING:
    import httpx

from memsync_protocol.checksums import (
    EMPTY_REPO_CHECKSUM,
    REPO_CHECKSUM_VERSIONS,
    is_checksum,
    repo_checksum,
)
from sync_client.errors import (
    AuthError,
    EntryTooLarge,
    InvalidEntries,
    NetworkError,
    NotAMemsyncServer,
    PathClash,
    RateLimited,
    RequestRejected,
    ServerError,
    TooManyEntries,
    TransientError,
)
from sync_client.review_wire import ProposalEvent, Proposed, proposal_event, review_field

API_PATH = "/v1/team_memory"
HEALTH_PATH = "/healthz"
TOKEN_PATH = "/v1/token"  # noqa: S105 (a path, not a secret)
NO_TEAM_MEMORY = "no_team_memory"
# In a server's `supports`: it takes `Content-Encoding: gzip` request bodies.
GZIP_REQUESTS = "gzip"
# Smaller bodies go plain: gzip's frame would eat most of the gain.
GZIP_MIN_BYTES = 1024
# A redirect target is shown in the error, cut to this length.
_SHOWN_LOCATION = 200
T = TypeVar("T")
# `progress(bytes so far, Content-Length or None)` while an answer downloads.
DownloadProgress = Callable[[int, int | None], None]
# `notice(error, seconds to wait, the attempt about to be made, attempts in all)`.
RetryNotice = Callable[[TransientError, float, int, int], None]
_retry_notice: ContextVar[RetryNotice | None] = ContextVar("memsync_retry_notice", default=None)
# (attempts, first wait) of `with_retries` within a `retry_in_place` block.
_in_place: ContextVar[tuple[int, float] | None] = ContextVar("memsync_in_place", default=None)


class PreconditionFailed(Exception):
    """412: the repo changed since the ETag the request named."""

    def __init__(self, current_checksum: str | None) -> None:
        super().__init__("the repo changed on the server")
        self.current_checksum = current_checksum


class StaleBase(Exception):
    """409 stale_base: these keys changed on the server since the bases we sent."""

    def __init__(self, conflicts: dict[str, str | None]) -> None:
        super().__init__(f"{len(conflicts)} key(s) changed on the server")
        self.conflicts = conflicts


class HistoryGone(Exception):
    """410: `since` is outside the server's history; do a full GET."""


class EventsUnsupported(Exception):
    """The server has no events stream (404, 405, or not `text/event-stream`): poll."""


@dataclass(frozen=True)
class CommitEvent:
    """One event of the stream: the repo's head after a commit."""

    version: int
    checksum: str


def parse_events(lines: Iterator[str]) -> Iterator[CommitEvent | ProposalEvent]:
    """The `commit` (and `proposal`) events of a server-sent events stream, line by line.

    Follows the SSE framing: `field: value` lines (one optional space after the
    colon), `:` comments (keep-alives), a blank line ends an event, several `data`
    lines join with newlines. An event whose data is not `{"version": int,
    "checksum": str}` is skipped: events are hints, and a pull finds the truth.
    """
    event_type = "message"
    data: list[str] = []
    for raw_line in lines:
        line = raw_line.rstrip("\r\n")
        if not line:
            if data and event_type in ("commit", "message"):
                event = _commit_event("\n".join(data))
                if event is not None:
                    yield event
            elif data and event_type == "proposal":
                proposal = proposal_event("\n".join(data))
                if proposal is not None:
                    yield proposal
            event_type, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event_type = value
        elif name == "data":
            data.append(value)


def _commit_event(data: str) -> CommitEvent | None:
    try:
        body = json.loads(data)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    version, checksum = body.get("version"), body.get("checksum")
    if not isinstance(version, int) or isinstance(version, bool) or not isinstance(checksum, str):
        return None
    return CommitEvent(version=version, checksum=checksum)


class EventStream:
    """An open events stream: iterate for `CommitEvent`s; `close()` from any thread.

    Iterating raises `NetworkError` when the connection drops or stays silent past the
    read timeout (keep-alives arrive every 15 s); it simply ends when the server ends
    the stream or `close()` was called.
    """

    def __init__(self, response: httpx.Response, server: str) -> None:
        self._response = response
        self._server = server
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[CommitEvent | ProposalEvent]:
        try:
            with _transport_errors(self._server):
                yield from parse_events(self._response.iter_lines())
        except NetworkError:
            if not self._closed.is_set():
                raise
        except Exception:
            # Reading a response another thread closed fails in httpx's own ways.
            if not self._closed.is_set():
                raise

    def close(self) -> None:
        """End the stream; a thread blocked reading it returns at once.

        Closing a socket does not wake a thread blocked in `recv` on it; shutting it
        down does, so the socket is shut down first.
        """
        self._closed.set()
        stream = self._response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        """Give the connection back (call from the thread that iterated)."""
        self._response.close()


@dataclass(frozen=True)
class RemoteState:
    """What a GET answered: the head, checksums, texts (full or delta), deletions."""

    version: int
    checksum: str
    entry_checksums: dict[str, str]
    texts: dict[str, str] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    supports: frozenset[str] = frozenset()
    is_delta: bool = False
    # The head's `lastModified` (UTC, whole seconds), when the answer carried one.
    last_modified: str | None = None
    # The server said 404 `no_team_memory`: nothing was ever written for this repo.
    no_team_memory: bool = False


@dataclass(frozen=True)
class WriteResult:
    """A committed (or no-op) write."""

    checksum: str
    version: int
    updated_keys: list[str]
    supports: frozenset[str] | None = None


@dataclass(frozen=True)
class Health:
    """A memsync server's liveness answer: its clock (the `Date` header), if it sent one."""

    date: str | None


@dataclass(frozen=True)
class TokenInfo:
    """What the server says the calling token may do (`GET /v1/token`); never its secret."""

    name: str
    id: str
    repos: str
    read_only: bool
    expires_at: str | None

    def as_json(self) -> dict[str, Any]:
        """`{name, id, repos, access, expiresAt}`, as the server answers it."""
        return {
            "name": self.name,
            "id": self.id,
            "repos": self.repos,
            "access": "read-only" if self.read_only else "read-write",
            "expiresAt": self.expires_at,
        }


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _error_body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _named_keys(details: dict[str, Any], reason: str) -> dict[str, dict[str, Any]]:
    """The keys a 400 names, `details.keys: [{key, reason}]` or `details.key`, with why."""
    named: dict[str, dict[str, Any]] = {}
    listed = details.get("keys")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            problem = item.get("reason")
            named[item["key"]] = {"reason": reason, "problem": str(problem) if problem else None}
    if isinstance(details.get("key"), str):
        named.setdefault(details["key"], {"reason": reason, "problem": None})
    return named


def _clashes(details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The keys a 409 `path_clash` names, each with the key it clashes with."""
    named: dict[str, dict[str, Any]] = {}
    listed = details.get("clashes")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            other = item.get("clashesWith")
            named[item["key"]] = {
                "reason": "path-clash",
                "clashes_with": other if isinstance(other, str) else None,
            }
    listed_keys = details.get("keys")
    for key in listed_keys if isinstance(listed_keys, list) else []:
        if isinstance(key, str):
            named.setdefault(key, {"reason": "path-clash", "clashes_with": None})
    return named


def _raise_for_status(response: httpx.Response) -> None:
    """Map a failed answer to the failure tree (the one place that does)."""
    status = response.status_code
    if status < 400:
        return
    body = _error_body(response)
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    assert isinstance(error, dict)
    message = str(error.get("message") or response.reason_phrase or f"HTTP {status}")
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    assert isinstance(details, dict)
    code = details.get("error_code")
    key = details.get("key")
    if status == 412:
        checksum = body.get("checksum")
        raise PreconditionFailed(checksum if isinstance(checksum, str) else None)
    if status == 409 and code == "stale_base":
        conflicts = {
            str(item.get("key")): item.get("serverChecksum")
            for item in details.get("conflicts", [])
            if isinstance(item, dict)
        }
        raise StaleBase(conflicts)
    if status == 410:
        raise HistoryGone(message)
    if status in (401, 403):
        raise AuthError(f"the server refused the token: {message}", status)
    if status == 413 and code == "team_memory_too_many_entries":
        received = details.get("received_entries")
        raise TooManyEntries(_int(details.get("max_entries")), _int(received) or None)
    if status == 413 and code == "team_memory_entry_too_large" and isinstance(key, str):
        raise EntryTooLarge(key, _int(details.get("max_bytes")))
    if status == 400 and code in ("invalid_key", "invalid_text"):
        reason = "invalid-key" if code == "invalid_key" else "invalid-text"
        named = _named_keys(details, reason)
        if named:
            raise InvalidEntries(f"the server refused {len(named)} entry(ies): {message}", named)
    if status == 409 and code == "path_clash":
        named = _clashes(details)
        if named:
            raise PathClash(f"the server refused {len(named)} entry(ies): {message}", named)
        # A clash that names no key: retrying the same write cannot help.
        raise RequestRejected(f"the server refused the request ({status}): {message}", status)
    if status == 429:
        raise RateLimited(f"rate limited by the server: {message}", _retry_after(response))
    if status == 409 or status >= 500:
        raise ServerError(
            f"server error {status}: {message}", _retry_after(response), status=status
        )
    raise RequestRejected(f"the server refused the request ({status}): {message}", status)


def _is_no_team_memory(response: httpx.Response) -> bool:
    """Whether a 404 is the server's own "this repo has no team memory yet"."""
    error = _error_body(response).get("error")
    details = error.get("details") if isinstance(error, dict) else None
    return isinstance(details, dict) and details.get("error_code") == NO_TEAM_MEMORY


def _describe_answer(response: httpx.Response, path: str, problem: str = "") -> str:
    """`GET /v1/team_memory answered 404 text/html`, for a `NotAMemsyncServer`."""
    content_type = response.headers.get("Content-Type", "").split(";")[0].strip()
    answer = f"{response.request.method} {path} answered {response.status_code}"
    if response.is_redirect:
        location = response.headers.get("Location", "")[:_SHOWN_LOCATION]
        return f"{answer}, a redirect to {location or 'nowhere'}"
    answer += f" {content_type or 'without a content type'}"
    return f"{answer}, {problem}" if problem else answer


def _exact_int(value: object) -> TypeGuard[int]:
    """An int that is not a bool (JSON `true` is not a version)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _string_map(value: object) -> bool:
    return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())


def _string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _remote_problem(body: object, view: str) -> str | None:
    """What makes `body` not a team-memory object of `view` (full, hashes, delta), or None.

    Only the containers are checked here: a single entry whose text is missing or not
    storable is refused by the pull, key by key, and fails nothing else.
    """
    if not isinstance(body, dict):
        return "not a JSON object"
    version = body.get("version")
    if not _exact_int(version) or version < 0:
        return "no integer version"
    if not is_checksum(body.get("checksum")):
        return "no repo checksum"
    definition = body.get("checksumVersion")
    if definition is not None and not (_exact_int(definition) and definition >= 1):
        return "no integer checksumVersion"
    content = body.get("content") if view == "full" else body
    if not isinstance(content, dict):
        return "no content object"
    if not _string_map(content.get("entryChecksums")):
        return "no entryChecksums object"
    if view != "hashes" and not isinstance(content.get("entries"), dict):
        return "no entries object"
    if view == "delta" and not _string_list(body.get("deleted")):
        return "no deleted list"
    if "supports" in body and not _string_list(body["supports"]):
        return "a supports value that is not a list of names"
    return None


def _version_problem(body: object) -> str | None:
    """What makes `body` not one version of a key (`/history?version=N`), or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if not _exact_int(body.get("version")):
        return "no integer version"
    if not all(isinstance(body.get(name), str) for name in ("op", "author", "at")):
        return "no op, author or time"
    if not (body.get("content") is None or isinstance(body.get("content"), str)):
        return "a content that is not text"
    return None


def _log_problem(body: object) -> str | None:
    """What makes `body` not a page of the repo's log, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("commits"), list):
        return "no commits list"
    next_before = body.get("next_before")
    if not (next_before is None or _exact_int(next_before)):
        return "a next_before that is not a version"
    for commit in body["commits"]:
        if not (
            isinstance(commit, dict)
            and _exact_int(commit.get("version"))
            and isinstance(commit.get("at"), str)
            and isinstance(commit.get("author"), str)
            and isinstance(commit.get("ops"), dict)
            and all(_exact_int(count) for count in commit["ops"].values())
            and _string_list(commit.get("keys"))
            and _exact_int(commit.get("key_count"))
        ):
            return "a commit without version, at, author, ops, keys or key_count"
    return None


def _deleted_row(row: object) -> bool:
    """Whether `row` is one deleted key: `{key, version, author, at, last_version}`."""
    return (
        isinstance(row, dict)
        and isinstance(row.get("key"), str)
        and _exact_int(row.get("version"))
        and isinstance(row.get("author"), str)
        and isinstance(row.get("at"), str)
        and (row.get("last_version") is None or _exact_int(row.get("last_version")))
    )


def _root_causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it was raised from, innermost last (httpx wraps httpcore, which
    wraps the socket's own error)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _host(server: str) -> str:
    """The host part of a server URL, for "name not resolved"."""
    from urllib.parse import urlsplit

    return urlsplit(server).hostname or server


def reachable(server: str, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to `server`'s host and port can be made now.

    Nothing is sent: the connection is closed at once. A watcher uses this while
    nothing answers at the address, to notice the server's return without a request.
    """
    from urllib.parse import urlsplit

    parts = urlsplit(server)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not parts.hostname:
        return False
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def _network_words(error: BaseException, server: str, timeout: float | None) -> str:
    """A transport failure in words, never an exception's class name.

    The cause is found in the chain httpx raises from (httpcore, then the socket's or
    the TLS layer's own error), so each case reads as what happened on the wire.
    """
    import errno
    import ssl

    import httpx

    after = f" after {timeout:g} s" if timeout else ""
    if isinstance(error, httpx.ConnectTimeout):
        return f"cannot reach {server}: the connection timed out{after}"
    if isinstance(error, httpx.TimeoutException):
        return f"{server} did not answer: timed out{after}"
    if isinstance(error, httpx.UnsupportedProtocol):
        return f"cannot reach {server}: the URL must start with http:// or https://"
    if isinstance(error, httpx.ProxyError):
        return f"cannot reach {server}: the proxy refused the connection"
    causes = list(_root_causes(error))
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or "it could not be verified"
            return f"TLS handshake with {server} failed: the server's certificate: {reason}"
    if any(isinstance(cause, ssl.SSLError) for cause in causes):
        hint = " is this an http:// server?" if server.startswith("https://") else ""
        return f"TLS handshake with {server} failed:{hint}".rstrip(":")
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return f"cannot reach {server}: connection refused (is the server running?)"
    if any(isinstance(cause, socket.gaierror) for cause in causes):
        return f"cannot reach {server}: name not resolved ({_host(server)})"
    if any(isinstance(cause, ConnectionResetError) for cause in causes):
        return f"the connection to {server} was reset"
    unreachable = {errno.ENETUNREACH: "network unreachable", errno.EHOSTUNREACH: "no route to host"}
    for cause in causes:
        if isinstance(cause, OSError) and cause.errno in unreachable:
            return f"cannot reach {server}: {unreachable[cause.errno]}"
    if isinstance(error, httpx.RemoteProtocolError):
        return f"{server} closed the connection or does not speak HTTP as expected"
    if isinstance(error, httpx.ReadError | httpx.WriteError):
        return f"the connection to {server} was lost"
    return f"cannot reach {server}: the connection failed"


def _accepted(error: BaseException) -> bool:
    """Whether something accepted the connection before it failed: a reset, a closed
    or aborted connection, a TLS handshake. httpx calls a reset that arrives while it
    sets up the socket a connect error; but a published port or a load balancer in front
    of a dead server does exactly that, and a TCP connect there always succeeds, so the
    address is not unreachable: only a request's answer can tell the server's return."""
    import ssl

    accepted = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, ssl.SSLError)
    return any(isinstance(cause, accepted) for cause in _root_causes(error))


@contextmanager
def _transport_errors(server: str, timeout: float | None = None) -> Iterator[None]:
    """Turn httpx's failures below HTTP into the failure tree (the one place that does)."""
    import httpx

    try:
        yield
    except httpx.TransportError as error:
        connect_failed = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
        raise NetworkError(
            _network_words(error, server, timeout),
            unreachable=connect_failed and not _accepted(error),
        ) from None
    except httpx.DecodingError:
        # Content-Encoding that does not decode: whatever answered is not our server.
        raise NotAMemsyncServer(server, "an answer whose encoding does not decode") from None


@contextmanager
def retry_notices(notice: RetryNotice) -> Iterator[None]:
    """Within this block (this thread or task only), `with_retries` calls
    `notice(error, delay, attempt, attempts)` before it waits to retry."""
    token = _retry_notice.set(notice)
    try:
        yield
    finally:
        _retry_notice.reset(token)


@contextmanager
def retry_in_place(attempts: int, base_delay: float) -> Iterator[None]:
    """Within this block (this thread or task only), `with_retries` makes at most
    `attempts` attempts, the first wait `base_delay`.

    The watcher paces its own retries (`RetryPace`): once an outage started, each of its
    attempts is one request, or a push or pull retried in place would be four
    connections each time the backoff lets one through."""
    token = _in_place.set((max(1, attempts), base_delay))
    try:
        yield
    finally:
        _in_place.reset(token)


def with_retries(
    action: Callable[[], T],
    *,
    attempts: int = 4,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `action`, retrying transient failures with exponential backoff and jitter.

    The server's `Retry-After` is a floor for the wait. Permanent failures and flow
    signals are raised at once. A `retry_notices` listener hears of each wait first;
    a `retry_in_place` block bounds the attempts.
    """
    bound = _in_place.get()
    if bound is not None:
        attempts, base_delay = min(attempts, bound[0]), bound[1]
    for attempt in range(attempts):
        try:
            return action()
        except TransientError as error:
            if attempt == attempts - 1:
                raise
            backoff = base_delay * (2**attempt) * random.uniform(0.5, 1.5)
            delay = min(max_delay, max(backoff, error.retry_after or 0.0))
            notice = _retry_notice.get()
            if notice is not None:
                notice(error, delay, attempt + 2, attempts)
            sleep(delay)
    raise AssertionError("unreachable")


def _read_counted(response: httpx.Response, progress: DownloadProgress) -> None:
    """Read a streamed answer's body, telling `progress` of the bytes so far (as sent,
    so they compare with `Content-Length`)."""
    import httpx

    length = response.headers.get("Content-Length", "")
    total = int(length) if length.isdigit() else None
    assert isinstance(response.stream, httpx.SyncByteStream)  # a sync client's
    inner: httpx.SyncByteStream = response.stream

    class Counted(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            done = 0
            for chunk in inner:
                done += len(chunk)
                progress(done, total)
                yield chunk

        def close(self) -> None:
            inner.close()

    response.stream = Counted()
    response.read()


class Api:
    """One repo on one server, over one keep-alive connection."""

    def __init__(
        self,
        server: str,
        token: str,
        repo: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.server = server
        self.repo = repo
        # Bytes on the wire (bodies as sent, compressed or not, and headers).
        self.bytes_sent = 0
        self.bytes_received = 0
        # Learned from a `supports` list this server sent in this run; until then, and
        # from a server without it, bodies go plain.
        self.gzip_requests = False
        self._token = token
        self._timeout = timeout
        self._transport = transport
        self._client_instance: httpx.Client | None = None

    @property
    def _client(self) -> httpx.Client:
        """The connection, opened on the first request."""
        if self._client_instance is None:
            import httpx

            self._client_instance = httpx.Client(
                base_url=self.server,
                headers={"Authorization": f"Bearer {self._token}", "User-Agent": "memsync"},
                timeout=self._timeout,
                transport=self._transport,
                # Plain http has no certificates to check; loading the CA bundle for it
                # costs 20-40 ms of every CLI run.
                verify=not self.server.startswith("http://"),
            )
        return self._client_instance

    def close(self) -> None:
        """Close the connection, if one was opened."""
        if self._client_instance is not None:
            self._client_instance.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str = API_PATH,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        progress: DownloadProgress | None = None,
    ) -> httpx.Response:
        response = self._send(method, path, params, headers, content, progress)
        if response.status_code == 415 and "Content-Encoding" in response.request.headers:
            # A server that stopped taking gzip (a downgrade, a changed setting): plain.
            self.gzip_requests = False
            response = self._send(method, path, params, headers, content, progress)
        return response

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        headers: dict[str, str] | None,
        content: bytes | None,
        progress: DownloadProgress | None,
    ) -> httpx.Response:
        all_params = {"repo": self.repo, **(params or {})}
        request_headers = dict(headers or {})
        if content is not None:
            request_headers["Content-Type"] = "application/json"
            if self.gzip_requests and len(content) >= GZIP_MIN_BYTES:
                import gzip

                # Level 6: a 200 KB batch in ~2 ms, a third of its size for Markdown.
                content = gzip.compress(content, compresslevel=6, mtime=0)
                request_headers["Content-Encoding"] = "gzip"
        with _transport_errors(self.server, self._timeout):
            if progress is None:
                response = self._client.request(
                    method, path, params=all_params, headers=request_headers, content=content
                )
            else:
                request = self._client.build_request(
                    method, path, params=all_params, headers=request_headers, content=content
                )
                response = self._client.send(request, stream=True)
                try:
                    _read_counted(response, progress)
                finally:
                    response.close()
        request = response.request
        self.bytes_sent += len(request.content) + sum(
            len(name) + len(value) + 4 for name, value in request.headers.raw
        )
        self.bytes_received += response.num_bytes_downloaded + sum(
            len(name) + len(value) + 4 for name, value in response.headers.raw
        )
        return response

    def _not_memsync(self, response: httpx.Response, path: str, problem: str = "") -> NoReturn:
        raise NotAMemsyncServer(self.server, _describe_answer(response, path, problem))

    def _learn(self, supports: list[str] | None) -> None:
        """Remember whether the server takes gzip bodies, from a checked `supports`."""
        if supports is not None:
            self.gzip_requests = GZIP_REQUESTS in supports

    def _json_answer(self, response: httpx.Response, path: str) -> Any:
        """The decoded body of a successful answer; `NotAMemsyncServer` unless it is JSON.

        Call it after `_raise_for_status`: a redirect is not followed, and is not ours.
        """
        if response.is_redirect or response.status_code >= 300:
            self._not_memsync(response, path)
        try:
            return response.json()
        except ValueError:
            self._not_memsync(response, path, "not JSON")

    def _remote(self, response: httpx.Response, view: str) -> RemoteState:
        """The `RemoteState` of a 200, checked to be a team-memory object of `view`."""
        body = self._json_answer(response, API_PATH)
        problem = _remote_problem(body, view)
        if problem is not None:
            self._not_memsync(response, API_PATH, problem)
        content = body["content"] if view == "full" else body
        self._check_repo_checksum(body, content["entryChecksums"], view)
        self._learn(body.get("supports"))
        self.last_review = review_field(body)  # issue 28: the repo's review, if any
        return RemoteState(
            version=body["version"],
            checksum=body["checksum"],
            entry_checksums=dict(content["entryChecksums"]),
            texts=dict(content.get("entries") or {}),
            deleted=list(body.get("deleted") or []),
            supports=frozenset(body.get("supports") or []),
            is_delta=view == "delta",
            last_modified=body["lastModified"]
            if isinstance(body.get("lastModified"), str)
            else None,
        )

    def _check_repo_checksum(
        self, body: dict[str, Any], entry_checksums: dict[str, str], view: str
    ) -> None:
        """Raise `ServerError` when a full or hashes answer's checksum is not the repo
        checksum of the entries it lists, by the definition it names (`checksumVersion`).

        An answer that names no definition (a server from before it was versioned, or
        another implementation of the endpoint), or one this client does not know, is
        not checked: its checksum is then only ever compared with the server's own.
        """
        definition = body.get("checksumVersion")
        if view == "delta" or definition not in REPO_CHECKSUM_VERSIONS:
            return
        if repo_checksum(entry_checksums, definition) != body["checksum"]:
            raise ServerError(
                f"{self.server} answered a repo checksum that is not the checksum of the "
                f"entries it listed (definition {definition}); nothing was written"
            )

    def _read(
        self,
        params: dict[str, Any],
        view: str,
        *,
        if_none_match: str | None = None,
        progress: DownloadProgress | None = None,
    ) -> RemoteState | None:
        """GET one view; None for a 304 to `if_none_match`.

        A repo that never held data is an empty state at version 0, and a 404 is read
        that way only when the server itself says `no_team_memory`: any other 404 (a
        wrong path, another server) is `NotAMemsyncServer`, as is a 304 nobody asked for.
        """
        headers = {"If-None-Match": f'"{if_none_match}"'} if if_none_match else {}
        response = self._request("GET", params=params, headers=headers, progress=progress)
        if response.status_code == 304:
            if if_none_match is None:
                self._not_memsync(response, API_PATH)
            return None
        if response.status_code == 404:
            if not _is_no_team_memory(response):
                self._not_memsync(response, API_PATH)
            # Still never written (for a delta: a pull after one that found it empty).
            return RemoteState(
                version=0,
                checksum=EMPTY_REPO_CHECKSUM,
                entry_checksums={},
                is_delta=view == "delta",
                no_team_memory=True,
            )
        _raise_for_status(response)
        return self._remote(response, view)

    def get(
        self,
        *,
        if_none_match: str | None = None,
        since: int | None = None,
        progress: DownloadProgress | None = None,
    ) -> RemoteState | None:
        """Full content (or the delta since a version); None when not modified (304).

        A repo that never held data is an empty state at version 0. Raises
        `NotAMemsyncServer` for an answer that is not a memsync server's. `progress`
        hears of the body's bytes as they arrive.
        """
        if since is None:
            return self._read({}, "full", if_none_match=if_none_match, progress=progress)
        return self._read({"since": since}, "delta", if_none_match=if_none_match, progress=progress)

    def hashes(self) -> RemoteState:
        """The hashes view: every key's checksum, no texts."""
        remote = self._read({"view": "hashes"}, "hashes")
        assert remote is not None  # a 304 is only possible with If-None-Match
        return remote

    def entry(self, key: str) -> tuple[str, str] | None:
        """One live entry, `(checksum, text)`, or None when the key is not live
        (`GET ?key=K`: ask only a server whose `supports` lists `key`)."""
        response = self._request("GET", params={"key": key})
        if response.status_code == 404:
            error = _error_body(response).get("error")
            if not (isinstance(error, dict) and error.get("type") == "not_found"):
                self._not_memsync(response, API_PATH)
            return None
        _raise_for_status(response)
        body = self._json_answer(response, API_PATH)
        if not (
            isinstance(body, dict)
            and body.get("key") == key
            and isinstance(body.get("content"), str)
            and is_checksum(body.get("checksum"))
        ):
            self._not_memsync(response, API_PATH, "not one entry")
        return body["checksum"], body["content"]

    def put(self, body: bytes, *, if_match: str | None = None) -> WriteResult:
        """PUT an exact, already serialized body (see `batching`)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        response = self._request("PUT", headers=headers, content=body)
        if response.status_code == 404:
            # A memsync server creates the repo on a PUT; it has no 404 to give.
            self._not_memsync(response, API_PATH)
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def _write_result(self, response: httpx.Response, path: str) -> WriteResult:
        body = self._json_answer(response, path)
        if not (
            isinstance(body, dict)
            and _exact_int(body.get("version"))
            and is_checksum(body.get("checksum"))
            and _string_list(body.get("updatedKeys", []))
            and _string_list(body.get("supports", []))
        ):
            self._not_memsync(response, path, "not a write result")
        self._learn(body.get("supports"))
        return WriteResult(
            checksum=body["checksum"],
            version=body["version"],
            updated_keys=list(body.get("updatedKeys") or []),
            supports=frozenset(body["supports"]) if "supports" in body else None,
        )

    def put_and_delete(
        self, entries: dict[str, str], base_checksums: dict[str, str | None], deletes: list[str]
    ) -> WriteResult:
        """One commit that writes `entries` and deletes `deletes` (`supports` lists
        `put-deletes`); a key of `deletes` the server does not hold is a 404."""
        body = json.dumps(
            {"entries": entries, "baseChecksums": base_checksums, "deletes": deletes},
            ensure_ascii=False,
        ).encode("utf-8")
        response = self._request("PUT", content=body)
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def delete(self, key: str) -> WriteResult:
        """Delete one key for the whole team (kept in the server's history)."""
        response = self._request("DELETE", params={"key": key})
        _raise_for_status(response)
        return self._write_result(response, API_PATH)

    def history(self, key: str) -> list[dict[str, Any]]:
        """The versions of one key, oldest first."""
        path = f"{API_PATH}/history"
        response = self._request("GET", path, params={"key": key})
        _raise_for_status(response)
        versions = self._json_answer(response, path)
        return versions if isinstance(versions, list) else []

    def version(self, key: str, version: int, *, compare: int | None = None) -> dict[str, Any]:
        """One version of one key, with its text; with `compare` (a server listing
        `history-compare`), that version too, under `compare`."""
        path = f"{API_PATH}/history"
        params: dict[str, Any] = {"key": key, "version": version}
        if compare is not None:
            params["compare"] = compare
        response = self._request("GET", path, params=params)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        if compare is not None and not (
            isinstance(body, dict) and _version_problem(body.get("compare")) is None
        ):
            self._not_memsync(response, path, "no compare object")
        if not (isinstance(body, dict) and _version_problem(body) is None):
            self._not_memsync(response, path, "not a version of a key")
        return body

    def log(
        self,
        *,
        before: int | None = None,
        limit: int | None = None,
        author: str | None = None,
        since: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """One page of the repo's commits, newest first (a server listing `log`):
        `{repo, commits: [{version, at, author, ops, keys, key_count}], next_before}`.
        `since` is a wire time (`2026-12-01T10:00:00Z`)."""
        path = f"{API_PATH}/log"
        given = {"before": before, "limit": limit, "author": author, "since": since, "key": key}
        params = {name: value for name, value in given.items() if value is not None}
        response = self._request("GET", path, params=params)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        problem = _log_problem(body)
        if problem is not None:
            self._not_memsync(response, path, problem)
        return dict(body)

    def deleted(self) -> list[dict[str, Any]]:
        """Keys deleted for the team and not live now, newest delete first (a server
        listing `deleted`): `[{key, version, author, at, last_version}]`."""
        path = f"{API_PATH}/deleted"
        response = self._request("GET", path)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        rows = body.get("deleted") if isinstance(body, dict) else None
        if not (isinstance(rows, list) and all(_deleted_row(row) for row in rows)):
            self._not_memsync(response, path, "no deleted list")
        return list(rows)

    def restore(self, key: str, version: int) -> WriteResult:
        """Make an old version current again."""
        path = f"{API_PATH}/restore"
        content = json.dumps({"key": key, "version": version}).encode()
        response = self._request("POST", path, content=content)
        _raise_for_status(response)
        return self._write_result(response, path)

    def events(
        self, *, last_event_id: int | None = None, read_timeout: float = 45.0
    ) -> EventStream:
        """Open the repo's events stream (`GET /v1/team_memory/events`).

        With `last_event_id`, the server skips the head event when it equals the
        current version. `read_timeout` bounds the silence between two lines: the
        server sends a keep-alive every 15 s. Raises `EventsUnsupported` when the server
        has no stream, and the usual failures (401/403 `AuthError`, 429 `RateLimited`).
        """
        import httpx

        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        request = self._client.build_request(
            "GET",
            f"{API_PATH}/events",
            params={"repo": self.repo},
            headers=headers,
            timeout=httpx.Timeout(self._timeout, read=read_timeout),
        )
        with _transport_errors(self.server, self._timeout):
            response = self._client.send(request, stream=True)
        content_type = response.headers.get("Content-Type", "")
        if response.status_code == 200 and content_type.startswith("text/event-stream"):
            return EventStream(response, self.server)
        try:
            with _transport_errors(self.server, self._timeout):
                response.read()
        finally:
            response.close()
        if response.status_code in (404, 405) or response.status_code < 400:
            raise EventsUnsupported(f"{self.server} has no events stream")
        _raise_for_status(response)
        raise EventsUnsupported(f"{self.server} has no events stream")

    def health(self) -> Health:
        """GET /healthz (no token needed), for `memsync doctor`.

        Raises `NotAMemsyncServer` unless the answer is a memsync server's liveness
        object (`{"status": "ok"}`); a 5xx is a `ServerError`. Many HTTP servers answer
        `/healthz` too, so `doctor` also asks the API itself (`hashes`).
        """
        with _transport_errors(self.server, self._timeout):
            response = self._client.get(HEALTH_PATH)
        if response.status_code >= 500:
            _raise_for_status(response)
        if response.status_code != 200:
            self._not_memsync(response, HEALTH_PATH)
        body = self._json_answer(response, HEALTH_PATH)
        if not (isinstance(body, dict) and body.get("status") == "ok"):
            self._not_memsync(response, HEALTH_PATH, "not a memsync liveness answer")
        return Health(date=response.headers.get("Date"))

    def token_info(self) -> TokenInfo:
        """GET /v1/token: the calling token's name, repo pattern, access and expiry.

        Raises `AuthError` when the server refuses the token (its message says why, an
        expiry included) and `NotAMemsyncServer` unless the answer is a token object.
        """
        with _transport_errors(self.server, self._timeout):
            response = self._client.get(TOKEN_PATH)
        if response.status_code == 404:
            self._not_memsync(response, TOKEN_PATH)
        _raise_for_status(response)
        body = self._json_answer(response, TOKEN_PATH)
        fields = ("name", "id", "repos")
        if not (
            isinstance(body, dict)
            and all(isinstance(body.get(name), str) for name in fields)
            and body.get("access") in ("read-only", "read-write")
            and (body.get("expiresAt") is None or isinstance(body.get("expiresAt"), str))
        ):
            self._not_memsync(response, TOKEN_PATH, "not a token answer")
        return TokenInfo(
            name=body["name"],
            id=body["id"],
            repos=body["repos"],
            read_only=body["access"] == "read-only",
            expires_at=body.get("expiresAt"),
        )

    # Review (docs/protocol.md 3.12) ---------------------------------------------------

    # The `review` field of the last full, hashes or delta answer: `{on, reviewer,
    # pending}` for a reviewed repo, None for one that is not (a 304 leaves it alone).
    last_review: dict[str, Any] | None = None
    # The agent that wrote what this API sends (an MCP client's name), when known: a
    # write names it (`X-Memsync-Agent`), so a reviewer sees which agent proposed.
    agent: str | None = None

    def _agent_header(self) -> dict[str, str]:
        agent = " ".join((self.agent or "").split())[:100]
        return {"X-Memsync-Agent": agent} if agent.isprintable() and agent else {}

    def _review_refusal(self, response: httpx.Response, proposal_id: int | None) -> None:
        """Raise the review failures a 404 or 409 names (before `_raise_for_status`,
        which would take any 409 for a server error worth retrying)."""
        from sync_client.errors import (
            ProposalConflict,
            ProposalDecided,
            TooManyProposals,
            UnknownProposal,
        )

        if response.status_code not in (404, 409):
            return
        error = _error_body(response).get("error")
        error = error if isinstance(error, dict) else {}
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
        assert isinstance(details, dict)
        code = details.get("error_code")
        if response.status_code == 409 and code == "too_many_proposals":
            raise TooManyProposals(_int(details.get("max")))
        if proposal_id is None:
            return
        if response.status_code == 404 and error.get("type") == "not_found":
            raise UnknownProposal(proposal_id)
        if code == "proposal_decided":
            raise ProposalDecided(proposal_id, str(details.get("status") or "decided"))
        if code == "proposal_conflict":
            rows = details.get("conflicts")
            keys = sorted(
                {str(row["key"]) for row in rows if isinstance(row, dict) and "key" in row}
                if isinstance(rows, list)
                else set()
            )
            raise ProposalConflict(proposal_id, keys)

    def put_reviewed(self, body: bytes, *, if_match: str | None = None) -> WriteResult | Proposed:
        """`put`, for a repo that may be reviewed: a 202 is a `review_wire.Proposed` (kept
        for review, nothing committed); 409 `too_many_proposals` is `TooManyProposals`."""
        from sync_client.review_wire import proposed

        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        response = self._request("PUT", headers={**headers, **self._agent_header()}, content=body)
        if response.status_code == 404:
            self._not_memsync(response, API_PATH)
        self._review_refusal(response, None)
        _raise_for_status(response)
        if response.status_code == 202:
            answer = proposed(self._json_answer(response, API_PATH))
            if answer is None:
                self._not_memsync(response, API_PATH, "not a proposal")
            return answer
        return self._write_result(response, API_PATH)

    def delete_reviewed(self, key: str) -> WriteResult | Proposed:
        """`delete`, for a repo that may be reviewed: a 202 is a `Proposed` delete."""
        from sync_client.review_wire import proposed

        response = self._request("DELETE", params={"key": key})
        self._review_refusal(response, None)
        _raise_for_status(response)
        if response.status_code == 202:
            answer = proposed(self._json_answer(response, API_PATH))
            if answer is None:
                self._not_memsync(response, API_PATH, "not a proposal")
            return answer
        return self._write_result(response, API_PATH)

    def restore_reviewed(self, key: str, version: int) -> WriteResult | Proposed:
        """`restore`, for a repo that may be reviewed: a 202 is a `Proposed` restore."""
        from sync_client.review_wire import proposed

        path = f"{API_PATH}/restore"
        content = json.dumps({"key": key, "version": version}).encode()
        response = self._request("POST", path, content=content)
        self._review_refusal(response, None)
        _raise_for_status(response)
        if response.status_code == 202:
            answer = proposed(self._json_answer(response, path))
            if answer is None:
                self._not_memsync(response, path, "not a proposal")
            return answer
        return self._write_result(response, path)

    def proposals(self, *, status: str = "pending", texts: bool = False) -> dict[str, Any]:
        """`GET /proposals`: `{repo, review: {on, reviewer}, proposals: [P...]}`, newest
        first (a reviewer sees everyone's, anyone else only their own)."""
        from sync_client.errors import ServerTooOld
        from sync_client.review_wire import proposal_list

        path = f"{API_PATH}/proposals"
        params: dict[str, Any] = {"status": status}
        if texts:
            params["texts"] = 1
        response = self._request("GET", path, params=params)
        if response.status_code in (404, 405):
            raise ServerTooOld(self.server, "review", "memsync review")
        _raise_for_status(response)
        parsed = proposal_list(self._json_answer(response, path))
        if parsed is None:
            self._not_memsync(response, path, "not a proposal list")
        review, items = parsed
        return {"repo": self.repo, "review": review, "proposals": items}

    def proposal(self, proposal_id: int) -> dict[str, Any]:
        """`GET /proposals/{id}`: one proposal with its texts, the team's and `similar`."""
        from sync_client.review_wire import proposal_ok

        path = f"{API_PATH}/proposals/{proposal_id}"
        response = self._request("GET", path)
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        item = body.get("proposal", body) if isinstance(body, dict) else None
        if not proposal_ok(item):
            self._not_memsync(response, path, "not a proposal")
        assert isinstance(item, dict)
        return dict(item)

    def accept(self, proposal_id: int) -> dict[str, Any]:
        """`POST /proposals/{id}/accept` (a reviewer): one commit; `{version, checksum,
        proposal}`. Raises `ProposalConflict`, `ProposalDecided`, `UnknownProposal`."""
        path = f"{API_PATH}/proposals/{proposal_id}/accept"
        response = self._request("POST", path, content=b"{}")
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        written = self._write_result(response, path)
        body = self._json_answer(response, path)
        return {
            "id": proposal_id,
            "version": written.version,
            "checksum": written.checksum,
            "updatedKeys": written.updated_keys,
            "proposal": body.get("proposal") if isinstance(body, dict) else None,
        }

    def reject(self, proposal_id: int, reason: str) -> dict[str, Any]:
        """`POST /proposals/{id}/reject` with the reason (a reviewer): the proposal."""
        from sync_client.review_wire import proposal_ok

        path = f"{API_PATH}/proposals/{proposal_id}/reject"
        content = json.dumps({"reason": reason}, ensure_ascii=False).encode("utf-8")
        response = self._request("POST", path, content=content)
        self._review_refusal(response, proposal_id)
        _raise_for_status(response)
        body = self._json_answer(response, path)
        item = body.get("proposal") if isinstance(body, dict) else None
        if not proposal_ok(item):
            self._not_memsync(response, path, "not a proposal")
        assert isinstance(item, dict)
        return dict(item)
