"""Context rules: credentials that only the text around them tells apart.

An AWS secret access key is 40 characters of base64, a shape many honest strings share;
a password is any string at all. Each is recognised here only where the text around it
leaves no doubt: the key in the same block as an AWS access key id, the password in the
userinfo of a database or broker URL. The `Rule` entries are in `rules.py` (`RULES`); this
module holds their patterns and their `Rule.context` checks, which get the whole text
scanned and the secret's span.

A context rule's detect-secrets plugin sees only one line (detect-secrets hands a
plugin one line at a time): there an AWS secret access key is found only on the line of
its key id (a CSV row), while the URL rule needs no more than its line anyway.

Nothing here imports `rules.py`, which imports this module.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

# -- AWS secret access key ---------------------------------------------------------------

AWS_KEY_ID_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA")

# The anchor: an access key id of the shape the `aws-access-key-id` rule matches. A
# stand-in id (`AKIA` and 16 `X`) counts too: it still says the block holds AWS
# credentials, and the secret beside it may be real.
_AWS_KEY_ID = re.compile(
    r"(?:AKIA|ASIA|ABIA|ACCA)(?<![A-Za-z0-9_](?:AKIA|ASIA|ABIA|ACCA))[A-Z2-7]{16}(?![A-Za-z0-9_])"
)

# Exactly 40 characters of standard base64 (30 random bytes), not part of a longer run
# of base64 or base64url. The boundary before it is matched, not looked behind for, so
# the regex engine skips most positions of prose at its first character.
AWS_SECRET_ACCESS_KEY = re.compile(
    r"(?:^|[^A-Za-z0-9/+_-])(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=_-])"
)

# A block ends at a blank line; looking further than this many lines either way is not
# "beside" any more (a credentials file section, an env block or a YAML map is shorter).
_MAX_BLOCK_LINES = 40

_HEX = re.compile(r"[0-9A-Fa-f]+")
# A path segment: a word, maybe numbered (`src`, `Handlers`, `v2`, `2024`).
_PATH_SEGMENT = re.compile(r"[A-Za-z]*[0-9]*")


def _looks_random(secret: str) -> bool:
    """Both cases and a digit, not hexadecimal (a git SHA), not a path of words."""
    if not (
        any(char.isupper() for char in secret)
        and any(char.islower() for char in secret)
        and any(char.isdigit() for char in secret)
    ):
        return False
    if _HEX.fullmatch(secret):
        return False
    segments = [segment for segment in secret.split("/") if segment]
    is_path = "/" in secret and all(_PATH_SEGMENT.fullmatch(segment) for segment in segments)
    return not is_path


def _inside_armor(text: str, start: int) -> bool:
    """True when `start` is inside a `-----BEGIN ...` block (a key, a certificate)."""
    begin = text.rfind("-----BEGIN", 0, start)
    return begin != -1 and text.rfind("-----END", begin, start) == -1


def _block(text: str, start: int, end: int) -> str:
    """The lines around `start:end` up to a blank line (or `_MAX_BLOCK_LINES` either way)."""
    first = text.rfind("\n", 0, start) + 1
    for _ in range(_MAX_BLOCK_LINES):
        if first == 0:
            break
        previous = text.rfind("\n", 0, first - 1) + 1
        if not text[previous : first - 1].strip():
            break
        first = previous
    last = text.find("\n", end)
    last = len(text) if last == -1 else last
    for _ in range(_MAX_BLOCK_LINES):
        if last == len(text):
            break
        following = text.find("\n", last + 1)
        following = len(text) if following == -1 else following
        if not text[last + 1 : following].strip():
            break
        last = following
    return text[first:last]


def aws_secret_beside_key_id(text: str, start: int, end: int) -> bool:
    """`text[start:end]` is random base64, outside any PEM block, in the same block (no
    blank line between) as an AWS access key id."""
    return (
        _looks_random(text[start:end])
        and not _inside_armor(text, start)
        and _AWS_KEY_ID.search(_block(text, start, end)) is not None
    )


# -- Password in a database or broker URL ------------------------------------------------

_SCHEMES = (
    "postgres",
    "postgresql",
    "mysql",
    "mariadb",
    "mongodb",
    "redis",
    "rediss",
    "amqp",
    "amqps",
    "mssql",
    "sqlserver",
    "clickhouse",
    "cockroachdb",
)

# `scheme://` or `scheme+driver://` (SQLAlchemy's `postgresql+psycopg://`, `mongodb+srv://`);
# a `jdbc:` form with userinfo (`jdbc:mysql://user:password@host`) contains one of them.
DATABASE_URL_PREFIXES = tuple(f"{scheme}{end}" for scheme in _SCHEMES for end in ("://", "+"))

# `scheme://user:password@host`. The user has no `:`, so the first `:` ends it; the
# password runs to the last `@` before the host (an unencoded `@` in it is kept) and has
# none of the characters that end a URL in text or open a template (`{`, `<`, `[`).
DATABASE_URL = re.compile(
    r"(?:postgres(?:ql)?|mysql|mariadb|mongodb|rediss?|amqps?|mssql|sqlserver|clickhouse"
    r"|cockroachdb)(?:\+[A-Za-z0-9]{1,20})?://"
    r"[A-Za-z0-9._~%!$&*+,;=-]{0,128}"
    r":(?P<secret>[^\s/?#\[\]<>{}\"'`\\|^]{1,256})"
    r"@(?=[^\s@])"
)

# Shorter passwords in notes are examples (`tiger`, `s3cr3t`, `hunter2`).
_MIN_PASSWORD_LENGTH = 8

# Words that make a password a stand-in or a default, wherever they occur in it
# (`mysecretpassword`, `Admin123`, `changeme`, `postgres1`).
_STAND_IN_WORDS = (
    "pass",
    "pwd",
    "secret",
    "change",
    "example",
    "test",
    "dummy",
    "sample",
    "placeholder",
    "redacted",
    "replace",
    "postgres",
    "mysql",
    "maria",
    "mongo",
    "redis",
    "rabbit",
    "guest",
    "root",
    "admin",
    "default",
    "demo",
    "fake",
    "mock",
    "local",
    "your",
    "user",
    "login",
    "welcome",
    "qwerty",
    "letmein",
    "hunter",
    "foobar",
    "tiger",
    "xxx",
    "***",
    "...",
    "…",
    "•",
)
# Digits and symbols written for letters (`P@ssw0rd`, `s3cr3t`, `adm1n`).
_LEET = str.maketrans("@40!13$57", "aaoiiesst")
_NOT_ALNUM = re.compile("[^a-z0-9]")
# Template and variable syntax: `${VAR}`, `$VAR`, `$(cmd)`, `%(var)s`, `%VAR%`, `{{ var }}`.
_TEMPLATE = re.compile(r"^\$|\$[({]|%\(|%[A-Za-z_]+%|\{\{|\{%")
# The name of a variable rather than its value: `DB_PASS_WORD`, `REPLACE_ME`.
_VARIABLE_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def _character_classes(value: str) -> int:
    """How many of lower case, upper case, digits and other characters `value` has."""
    return sum(
        (
            any(char.islower() for char in value),
            any(char.isupper() for char in value),
            any(char.isdigit() for char in value),
            any(not char.isalnum() for char in value),
        )
    )


def is_placeholder_password(password: str, user: str) -> bool:
    """True for a URL password that documentation or a default would use, not a real one.

    `password` and `user` are as written in the URL (percent-encoded or not).
    """
    # `%%` is how an ini file (Alembic's, configparser's) writes a literal `%`.
    decoded, decoded_user = unquote(password.replace("%%", "%")), unquote(user)
    lowered = decoded.lower()
    # Leetspeak read as letters, and separators dropped: `P@ssw%rd`, `p,ass@word`.
    spelled = _NOT_ALNUM.sub("", lowered.translate(_LEET))
    return (
        len(decoded) < _MIN_PASSWORD_LENGTH
        or _TEMPLATE.search(decoded) is not None
        or _VARIABLE_NAME.fullmatch(decoded) is not None
        or any(word in lowered or word in spelled for word in _STAND_IN_WORDS)
        or len(set(lowered)) < 4  # repeated characters: `aaaaaaaa`, `abababab`
        or _character_classes(decoded) < 2  # one word or one number
        or (len(decoded_user) >= 3 and decoded_user.lower() in lowered)
    )


# The host that follows the `@`, up to its port, path or the end of the URL.
_HOST = re.compile(r"[^\s:/?#,;\"'`)\]>]{0,255}")
# Hosts that only documentation uses (`db.example.com`, `your-host`).
_DOCUMENTATION_HOST = re.compile(r"example|^your", re.IGNORECASE)


def real_url_password(text: str, start: int, end: int) -> bool:
    """`text[start:end]`, the password of a database or broker URL, is not a stand-in
    and the URL does not point at a documentation host.

    The user is what `DATABASE_URL` matched between `://` and the `:` before the password.
    """
    scheme_end = text.rfind("://", 0, start)
    user = text[scheme_end + 3 : start - 1] if scheme_end != -1 else ""
    host = _HOST.match(text, end + 1)
    if host is not None and _DOCUMENTATION_HOST.search(host.group()):
        return False
    return not is_placeholder_password(text[start:end], user)
