"""The HTTP client of the team-memory API: the only module that imports httpx.

httpx is imported on first use, not with this module: a no-op push makes no request
and must not pay the import (the CLI's start-up time is most of a no-op's cost).

Every answer is turned into a result or a typed error in exactly one place
(`_raise_for_status`, `_transport_errors`). 304, 409 `stale_base`, 410 and 412 are flow
signals for push and pull (`NotModified` as a None result, `StaleBase`, `HistoryGone`,
`PreconditionFailed`), not failures; so is a server without the events stream
(`EventsUnsupported`).
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import httpx

from sync_client.errors import (
    AuthError,
    EntryTooLarge,
    NetworkError,
    RateLimited,
    RequestRejected,
    ServerError,
    TooManyEntries,
    TransientError,
)
from sync_server.checksums import EMPTY_REPO_CHECKSUM

API_PATH = "/v1/team_memory"
T = TypeVar("T")


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


def parse_events(lines: Iterator[str]) -> Iterator[CommitEvent]:
    """The `commit` events of a server-sent events stream, line by line.

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

    def __iter__(self) -> Iterator[CommitEvent]:
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


@dataclass(frozen=True)
class WriteResult:
    """A committed (or no-op) write."""

    checksum: str
    version: int
    updated_keys: list[str]
    supports: frozenset[str] | None = None


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


def _error_code(response: httpx.Response) -> object:
    """`error.details.error_code` of an error answer, if it has one."""
    error = _error_body(response).get("error")
    details = error.get("details") if isinstance(error, dict) else None
    return details.get("error_code") if isinstance(details, dict) else None


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
        raise TooManyEntries(int(details.get("max_entries", 0)), details.get("received_entries"))
    if status == 413 and code == "team_memory_entry_too_large":
        raise EntryTooLarge(str(details.get("key")), int(details.get("max_bytes", 0)))
    if status == 429:
        raise RateLimited(f"rate limited by the server: {message}", _retry_after(response))
    if status == 409 or status >= 500:
        raise ServerError(f"server error {status}: {message}", _retry_after(response))
    raise RequestRejected(f"the server refused the request ({status}): {message}", status)


@contextmanager
def _transport_errors(server: str) -> Iterator[None]:
    import httpx

    try:
        yield
    except httpx.TimeoutException:
        raise NetworkError(f"{server} did not answer in time") from None
    except httpx.TransportError as error:
        raise NetworkError(f"cannot reach {server}: {type(error).__name__}") from None


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
    signals are raised at once.
    """
    for attempt in range(attempts):
        try:
            return action()
        except TransientError as error:
            if attempt == attempts - 1:
                raise
            backoff = base_delay * (2**attempt) * random.uniform(0.5, 1.5)
            sleep(min(max_delay, max(backoff, error.retry_after or 0.0)))
    raise AssertionError("unreachable")


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
        self.bytes_sent = 0
        self.bytes_received = 0
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
    ) -> httpx.Response:
        all_params = {"repo": self.repo, **(params or {})}
        request_headers = dict(headers or {})
        if content is not None:
            request_headers["Content-Type"] = "application/json"
        with _transport_errors(self.server):
            response = self._client.request(
                method, path, params=all_params, headers=request_headers, content=content
            )
        request = response.request
        self.bytes_sent += len(request.content) + sum(
            len(name) + len(value) + 4 for name, value in request.headers.raw
        )
        self.bytes_received += len(response.content) + sum(
            len(name) + len(value) + 4 for name, value in response.headers.raw
        )
        return response

    @staticmethod
    def _remote(body: dict[str, Any], *, delta: bool) -> RemoteState:
        content = body.get("content") if isinstance(body.get("content"), dict) else body
        assert isinstance(content, dict)
        return RemoteState(
            version=int(body["version"]),
            checksum=str(body["checksum"]),
            entry_checksums=dict(content.get("entryChecksums") or {}),
            texts=dict(content.get("entries") or {}),
            deleted=list(body.get("deleted") or []),
            supports=frozenset(body.get("supports") or []),
            is_delta=delta,
        )

    def get(
        self, *, if_none_match: str | None = None, since: int | None = None
    ) -> RemoteState | None:
        """Full content (or the delta since a version); None when not modified (304).

        A repo that never held data is an empty state at version 0.
        """
        headers = {"If-None-Match": f'"{if_none_match}"'} if if_none_match else {}
        params = {"since": since} if since is not None else {}
        response = self._request("GET", params=params, headers=headers)
        if response.status_code == 304:
            return None
        if response.status_code == 404 and since is None:
            return RemoteState(version=0, checksum=EMPTY_REPO_CHECKSUM, entry_checksums={})
        if response.status_code == 404 and _error_code(response) == "no_team_memory":
            # Still never written (a pull after one that found it empty): nothing new.
            return RemoteState(
                version=0, checksum=EMPTY_REPO_CHECKSUM, entry_checksums={}, is_delta=True
            )
        _raise_for_status(response)
        return self._remote(response.json(), delta=since is not None)

    def hashes(self) -> RemoteState:
        """The hashes view: every key's checksum, no texts."""
        response = self._request("GET", params={"view": "hashes"})
        if response.status_code == 404:
            return RemoteState(version=0, checksum=EMPTY_REPO_CHECKSUM, entry_checksums={})
        _raise_for_status(response)
        return self._remote(response.json(), delta=False)

    def put(self, body: bytes, *, if_match: str | None = None) -> WriteResult:
        """PUT an exact, already serialized body (see `batching`)."""
        headers = {"If-Match": f'"{if_match}"'} if if_match else {}
        response = self._request("PUT", headers=headers, content=body)
        _raise_for_status(response)
        return self._write_result(response)

    @staticmethod
    def _write_result(response: httpx.Response) -> WriteResult:
        body = response.json()
        return WriteResult(
            checksum=str(body["checksum"]),
            version=int(body["version"]),
            updated_keys=list(body.get("updatedKeys") or []),
            supports=frozenset(body["supports"]) if "supports" in body else None,
        )

    def delete(self, key: str) -> WriteResult:
        """Delete one key for the whole team (kept in the server's history)."""
        response = self._request("DELETE", params={"key": key})
        _raise_for_status(response)
        return self._write_result(response)

    def history(self, key: str) -> list[dict[str, Any]]:
        """The versions of one key, oldest first."""
        response = self._request("GET", f"{API_PATH}/history", params={"key": key})
        _raise_for_status(response)
        versions = response.json()
        return versions if isinstance(versions, list) else []

    def version(self, key: str, version: int) -> dict[str, Any]:
        """One version of one key, with its text."""
        response = self._request(
            "GET", f"{API_PATH}/history", params={"key": key, "version": version}
        )
        _raise_for_status(response)
        body = response.json()
        return body if isinstance(body, dict) else {}

    def restore(self, key: str, version: int) -> WriteResult:
        """Make an old version current again."""
        content = json.dumps({"key": key, "version": version}).encode()
        response = self._request("POST", f"{API_PATH}/restore", content=content)
        _raise_for_status(response)
        return self._write_result(response)

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
        with _transport_errors(self.server):
            response = self._client.send(request, stream=True)
        content_type = response.headers.get("Content-Type", "")
        if response.status_code == 200 and content_type.startswith("text/event-stream"):
            return EventStream(response, self.server)
        try:
            with _transport_errors(self.server):
                response.read()
        finally:
            response.close()
        if response.status_code in (404, 405) or response.status_code < 400:
            raise EventsUnsupported(f"{self.server} has no events stream")
        _raise_for_status(response)
        raise EventsUnsupported(f"{self.server} has no events stream")

    def health(self) -> httpx.Response:
        """GET /healthz (no token needed); for `memsync doctor`."""
        with _transport_errors(self.server):
            return self._client.get("/healthz")
