"""Bearer tokens: minting, checking, and scoping to repos.

A token looks like `mst_` + 36 base62 characters + a 6-character base62 CRC32 of those
36, e.g. `mst_` `aB3...` `0x9Kq2`. The prefix and checksum let scanners (ours included)
recognise a leaked token without a database. The first 12 body characters are a public
lookup id; the server stores only that id and a SHA-256 of the whole token, and
compares the hash in constant time. The token has about 214 bits of entropy, so a fast
hash is the right one: nothing can be brute-forced from it. The format itself (prefix,
alphabet, checksum) is `memsync_protocol.tokens`, which the scanner shares.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from memsync_protocol.repos import normalize_scope
from memsync_protocol.tokens import (
    ALPHABET,
    BODY_LENGTH,
    LOOKUP_LENGTH,
    TOKEN_PATTERN,
    TOKEN_PREFIX,
    token_checksum,
)
from sync_server.errors import Unauthorized
from sync_server.personal import is_personal, normalize_person
from sync_server.storage.base import Store, TokenRecord, TokenStore
from sync_server.times import wire_time


def hash_token(token: str) -> str:
    """Hex SHA-256 of the whole token: the only form kept at rest."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class MintedToken:
    """A new token: `secret` is shown once and never stored."""

    secret: str
    lookup_id: str
    secret_hash: str


def mint_token() -> MintedToken:
    """A fresh random token with its lookup id and hash."""
    body = "".join(secrets.choice(ALPHABET) for _ in range(BODY_LENGTH))
    secret = f"{TOKEN_PREFIX}{body}{token_checksum(body)}"
    return MintedToken(
        secret=secret, lookup_id=body[:LOOKUP_LENGTH], secret_hash=hash_token(secret)
    )


def issue_token(
    store: TokenStore,
    *,
    repo_pattern: str,
    read_only: bool = False,
    name: str | None = None,
    expires_at: datetime | None = None,
    reviewer: bool = False,
    person: str | None = None,
) -> tuple[TokenRecord, str]:
    """Mint a token, store its hash, and return the record with the secret (shown once).

    `person` (checked by `normalize_person`) is whose personal spaces it reaches; None:
    none, whatever the token's name (only an explicit person gives a token one).

    Raises `ValueError` for a bad repo pattern, name or person, and `DuplicateTokenName` (a
    `ValueError`) when a live token already has that name.
    """
    pattern = normalize_scope(repo_pattern)
    if name is not None and not (1 <= len(name) <= 100 and name.isprintable()):
        raise ValueError("a token name must be 1 to 100 printable characters")
    checked_person = None if person is None else normalize_person(person)
    minted = mint_token()
    record = store.create_token(
        lookup_id=minted.lookup_id,
        secret_hash=minted.secret_hash,
        name=name or f"token-{minted.lookup_id[:6]}",
        repo_pattern=pattern,
        read_only=read_only,
        expires_at=expires_at,
        reviewer=reviewer,
        person=checked_person,
    )
    return record, minted.secret


def scope_allows(pattern: str, repo: str) -> bool:
    """Whether a token scoped to `pattern` may reach `repo` (both already normalized).

    Never a personal space's internal id, whatever the pattern (`*` included): only
    the space's own person reaches it (`TeamMemory.may_see`)."""
    if is_personal(repo):
        return False
    if pattern in ("*", repo):
        return True
    owner, _, name = pattern.partition("/")
    return name == "*" and repo.split("/", 1)[0] == owner


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's name (the author of writes), its scope and expiry."""

    name: str
    lookup_id: str
    repo_pattern: str
    read_only: bool
    expires_at: datetime | None = None
    # May accept or reject proposals; its own writes to a reviewed repo commit directly.
    reviewer: bool = False
    # Whose personal spaces the token reaches; None: none (only `--person` gives one).
    person: str | None = None

    @classmethod
    def of(cls, record: TokenRecord) -> Principal:
        """The principal a token record stands for (the API's and the web page's)."""
        return cls(
            name=record.name,
            lookup_id=record.lookup_id,
            repo_pattern=record.repo_pattern,
            read_only=record.read_only,
            expires_at=record.expires_at,
            reviewer=record.reviewer,
            person=record.person,
        )


class Authenticator:
    """Checks bearer tokens against the store, with a short per-process cache.

    The cache keeps a token lookup for `cache_seconds` so a hot path (a 304 poll) does
    not pay a database round trip; a revocation reaches every process within that time.
    """

    def __init__(self, store: Store, cache_seconds: float) -> None:
        self._store = store
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, TokenRecord | None]] = {}
        # A token's hash -> the record it was last accepted with and its principal: the
        # hot path (`_known`) is this lookup plus the checks a cached record still needs.
        self._accepted: dict[str, tuple[TokenRecord, Principal]] = {}
        self._lock = threading.Lock()

    def _known(self, authorization: str | None) -> Principal | None:
        """The principal of a token accepted before whose record is still the cached one
        (fresh, not revoked) and not expired now; None sends it the long way.

        The long way's answer for such a token is the same principal: the record it was
        built from is the one `_cached` would give, so this only skips the parse, the
        checksum and building the principal again. A revocation reaches it as it
        reaches the cache (`refresh`, or the entry's age), and expiry is checked here
        on every request, as there."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.isascii():
            return None
        digest = hash_token(token.strip())
        accepted = self._accepted.get(digest)
        if accepted is None:
            return None
        record, principal = accepted
        cached = self._cache.get(principal.lookup_id)
        if (
            cached is None
            or cached[1] is not record
            or time.monotonic() - cached[0] >= self._cache_seconds
        ):
            return None
        if record.expires_at is not None and record.expires_at <= datetime.now(UTC):
            return None
        return principal

    def _accept(self, token: str, record: TokenRecord | None) -> Principal:
        """`_verify`, remembering an accepted token for `_known`."""
        principal = self._verify(token, record)
        assert record is not None
        with self._lock:
            if len(self._accepted) >= 10_000:
                self._accepted.clear()
            self._accepted[record.secret_hash] = (record, principal)
        return principal

    def _cached(self, lookup_id: str) -> tuple[bool, TokenRecord | None]:
        """(hit, record) from the cache; a miss or an expired entry is not a hit."""
        with self._lock:
            cached = self._cache.get(lookup_id)
        if cached is not None and time.monotonic() - cached[0] < self._cache_seconds:
            return True, cached[1]
        return False, None

    def refresh(self, lookup_ids: Sequence[str]) -> dict[str, TokenRecord | None]:
        """Read these tokens from the store in one query and remember them (the event
        streams' token check calls this, so a revocation it sees is also what the next
        request sees); None for a lookup id no token has."""
        found = self._store.find_tokens(lookup_ids)
        records = {lookup_id: found.get(lookup_id) for lookup_id in lookup_ids}
        self._remember(records)
        return records

    def _fetch(self, lookup_id: str) -> TokenRecord | None:
        """Read the token from the store and remember it."""
        record = self._store.find_token(lookup_id)
        self._remember({lookup_id: record})
        return record

    def _remember(self, records: Mapping[str, TokenRecord | None]) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._cache) + len(records) > 10_000:
                self._cache.clear()
            for lookup_id, record in records.items():
                self._cache[lookup_id] = (now, record)

    @staticmethod
    def _parse(authorization: str | None) -> tuple[str, str]:
        """(token, lookup id) from the header, or `Unauthorized`."""
        if not authorization:
            raise Unauthorized()
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthorized("use Authorization: Bearer <token>")
        match = TOKEN_PATTERN.fullmatch(token)
        if match is None or token_checksum(match.group(1)) != match.group(2):
            raise Unauthorized("unknown token")
        return token, match.group(1)[:LOOKUP_LENGTH]

    @staticmethod
    def lookup_id_of(authorization: str | None) -> str | None:
        """The public lookup id of a well-formed bearer token (prefix and checksum
        right), else None: what the access log may name a refused token by."""
        try:
            return Authenticator._parse(authorization)[1]
        except Unauthorized:
            return None

    @staticmethod
    def _verify(token: str, record: TokenRecord | None) -> Principal:
        if (
            record is None
            or not hmac.compare_digest(hash_token(token), record.secret_hash)
            or record.revoked_at is not None
        ):
            raise Unauthorized("unknown or revoked token")
        # Checked on every request, cached record or not: expiry needs no database.
        if record.expired(datetime.now(UTC)):
            assert record.expires_at is not None
            raise Unauthorized(
                f"this token expired at {wire_time(record.expires_at)}; "
                "ask the server's operator for a new one"
            )
        return Principal.of(record)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal behind an `Authorization` header, or `Unauthorized`."""
        known = self._known(authorization)
        if known is not None:
            return known
        token, lookup_id = self._parse(authorization)
        hit, record = self._cached(lookup_id)
        return self._accept(token, record if hit else self._fetch(lookup_id))

    async def authenticate_async(self, authorization: str | None) -> Principal:
        """`authenticate` for the event loop: only a cache miss goes to a worker thread."""
        known = self._known(authorization)
        if known is not None:
            return known
        token, lookup_id = self._parse(authorization)
        hit, record = self._cached(lookup_id)
        if not hit:
            from anyio import to_thread

            record = await to_thread.run_sync(self._fetch, lookup_id)
        return self._accept(token, record)
