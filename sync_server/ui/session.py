"""The web page's session: a signed cookie naming a token, checked on every request.

The cookie never holds the token. Signing in checks the pasted token like a bearer
header; the cookie then holds the token's public lookup id, a prefix of its stored
hash (so a token minted again under the same id could not ride an old cookie) and
the session's CSRF token, signed with itsdangerous under the server's UI secret and
time-stamped. Each request reads the token's record from the store again, past the
authenticator's cache: a revoked or expired token ends its sessions at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from itsdangerous import BadSignature, URLSafeTimedSerializer

from sync_server.auth import Principal
from sync_server.storage.base import Store, TokenRecord

COOKIE_NAME = "memsync_ui"
COOKIE_PATH = "/ui"
# A write's outcome rides to the next page in this cookie, signed and bound to the session.
NOTICE_COOKIE = "memsync_ui_notice"
NOTICE_SECONDS = 120
# A notice longer than this is cut: a cookie holds about 4 KB.
NOTICE_CHARS = 1200
# A session lasts this long after signing in (the token's own expiry still applies).
SESSION_SECONDS = 12 * 3600
SECRET_NAME = "ui-session"  # noqa: S105 (a row name, not a secret)
_BINDING_CHARS = 24


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: the token's lookup id and hash prefix, and its CSRF token."""

    lookup_id: str
    binding: str
    csrf: str


class Sessions:
    """Issues and reads session cookies under one secret, fetched on first use (the
    database's own secret can only be read once the app has migrated the schema)."""

    def __init__(self, secret: Callable[[], str]) -> None:
        self._secret = secret
        self._ready: tuple[URLSafeTimedSerializer, URLSafeTimedSerializer] | None = None
        self._lock = threading.Lock()

    def _serializers(self) -> tuple[URLSafeTimedSerializer, URLSafeTimedSerializer]:
        with self._lock:
            if self._ready is None:
                secret = self._secret()
                self._ready = (
                    URLSafeTimedSerializer(secret, salt="memsync-ui-session"),
                    URLSafeTimedSerializer(secret, salt="memsync-ui-notice"),
                )
            return self._ready

    @property
    def _serializer(self) -> URLSafeTimedSerializer:
        return self._serializers()[0]

    def issue(self, record: TokenRecord) -> tuple[str, Session]:
        """A new session for a token just checked: (cookie value, session)."""
        session = Session(
            lookup_id=record.lookup_id,
            binding=record.secret_hash[:_BINDING_CHARS],
            csrf=secrets.token_urlsafe(32),
        )
        value = self._serializer.dumps([session.lookup_id, session.binding, session.csrf])
        return value, session

    def read(self, cookie: str | None) -> Session | None:
        """The session of a cookie, or None (absent, forged, too old, malformed)."""
        if not cookie:
            return None
        try:
            data = self._serializer.loads(cookie, max_age=SESSION_SECONDS)
        except BadSignature:
            return None
        if not (
            isinstance(data, list) and len(data) == 3 and all(isinstance(x, str) for x in data)
        ):
            return None
        return Session(lookup_id=data[0], binding=data[1], csrf=data[2])

    def seal_notice(self, session: Session, text: str) -> str:
        """A notice cookie's value: `text` signed for this session only (a write's
        outcome, shown once on the page the browser lands on; never in the URL)."""
        if len(text) > NOTICE_CHARS:
            text = text[: NOTICE_CHARS - 1] + "…"
        return self._serializers()[1].dumps([_notice_binding(session), text])

    def open_notice(self, session: Session, value: str | None) -> str | None:
        """The text of a notice cookie sealed for this session, or None (absent,
        forged, stale, or another session's)."""
        if not value:
            return None
        try:
            data = self._serializers()[1].loads(value, max_age=NOTICE_SECONDS)
        except BadSignature:
            return None
        if not (
            isinstance(data, list) and len(data) == 2 and all(isinstance(x, str) for x in data)
        ):
            return None
        if not hmac.compare_digest(data[0], _notice_binding(session)):
            return None
        text: str = data[1]
        return text


def _notice_binding(session: Session) -> str:
    """What ties a notice to one session without repeating its CSRF token."""
    return hashlib.sha256(f"notice:{session.csrf}".encode()).hexdigest()[:_BINDING_CHARS]


def ui_secret(configured: str | None, store: Store) -> str:
    """MEMSYNC_UI_SECRET, else the database's own (made once, shared by all workers)."""
    return configured if configured else store.server_secret(SECRET_NAME)


def current_principal(store: Store, session: Session) -> Principal | None:
    """The token behind a session, read afresh; None when it is gone, revoked or expired."""
    record = store.find_token(session.lookup_id)
    if (
        record is None
        or record.revoked_at is not None
        or record.expired(datetime.now(UTC))
        or not hmac.compare_digest(record.secret_hash[:_BINDING_CHARS], session.binding)
    ):
        return None
    return Principal.of(record)


def csrf_ok(session: Session, submitted: str | None) -> bool:
    """Whether a form carried this session's CSRF token."""
    return submitted is not None and hmac.compare_digest(
        session.csrf.encode(), submitted.encode("utf-8", "replace")
    )
