"""The HTTP client of the team-memory API: the only module that imports httpx.

httpx is imported on first use, not with this module: a no-op push makes no request
and must not pay the import (the CLI's start-up time is most of a no-op's cost).

Every answer is turned into a result or a typed error in exactly one place
(`_raise_for_status`, `_transport_errors`). 304, 409 `stale_base`, 410 and 412 are flow
signals for push and pull (`NotModified` as a None result, `StaleBase`, `HistoryGone`,
`PreconditionFailed`), not failures.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import httpx

from sync_client.errors import (
    AuthError,
    EntryTooLarge,
    InvalidEntries,
    NetworkError,
    PathClash,
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
        raise TooManyEntries(int(details.get("max_entries", 0)), details.get("received_entries"))
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

    def health(self) -> httpx.Response:
        """GET /healthz (no token needed); for `memsync doctor`."""
        with _transport_errors(self.server):
            return self._client.get("/healthz")
