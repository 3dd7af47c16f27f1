"""memsync's high-confidence secret rules.

Each rule matches a credential by a distinctive prefix or structure, never by a
keyword or by entropy: a false positive blocks an honest note with no way around it.
`engine.py` runs these rules (literal prefilter, then regex) and also exposes each as a
detect-secrets plugin, so a team can load them into its own detect-secrets setup.

Facts about the formats (prefixes, lengths, alphabets) come from the providers' public
documentation and public rule sets such as gitleaks'; the rules are written here.
No literal credential appears in this file: patterns and prefixes only.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from memsync_protocol.tokens import is_well_formed_token
from scanner import context_rules


@dataclass(frozen=True)
class Rule:
    """One credential format.

    `prefixes`: literal, case-sensitive substrings; the regex runs only when at least one
    of them occurs in the text (the cheap prefilter). Empty means "always run" and is
    allowed only for the few structural formats without any fixed literal.
    `pattern`: the regex's source, compiled on first use (`regex`): a scan compiles
    only the rules whose prefix occurs, so a command that scans one honest note does not
    pay for compiling a hundred patterns. When it has a group named `secret`, that group
    is the secret, else the whole match is.
    `validate`: an optional structural check on the secret (a checksum, a decodable
    part); a candidate that fails it is not a finding.
    `context`: an optional check for a rule that needs the text around the secret
    (`context_rules.py`): it gets the whole text scanned and the secret's span
    (`start`, `end`), and runs after `validate`. Its detect-secrets plugin sees one line.
    """

    id: str
    label: str
    prefixes: tuple[str, ...]
    pattern: str
    validate: Callable[[str], bool] | None = None
    context: Callable[[str, int, int], bool] | None = None

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """`pattern`, compiled (once per process)."""
        return re.compile(self.pattern)


# -- building blocks -------------------------------------------------------------------

# A credential is a whole token: the character before it is not one of these.
_WORD = "A-Za-z0-9_"


def _starting(start: str, body: str) -> str:
    """`start` then `body`, where `start` does not continue a word (`start` is fixed-width).

    The boundary is checked by a lookbehind written after `start` rather than before it,
    so the regex begins with `start`'s literal and Python's engine can jump from one
    occurrence of it to the next: many times faster on prose than a leading lookbehind.
    """
    return f"{start}(?<![{_WORD}]{start}){body}"


def _token(*alternatives: str, alphabet: str = _WORD) -> str:
    """A pattern for any of `alternatives` that is not followed by a char of `alphabet`.

    `alphabet` is the token's own alphabet (a class body), so a longer string that merely
    starts like a credential is not one.
    """
    return f"(?:{'|'.join(alternatives)})(?![{alphabet}])"


# Token alphabets for `_token`: base64url, and any base64 (standard or URL-safe, padded).
_BASE64URL = "A-Za-z0-9_-"
_BASE64 = "A-Za-z0-9+/=_-"

# Runs of 8 (`AAAAAAAA`) or ascending sequences of 8 (`12345678`, `abcdefgh`) are
# stand-ins written by people; a random credential body has neither in practice.
_SEQUENCES = ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_STAND_IN = re.compile(
    r"(.)\1{7}|" + "|".join(run[i : i + 8] for run in _SEQUENCES for i in range(len(run) - 7))
)


def _not_stand_in(secret: str) -> bool:
    """False for a candidate with a long run of one character or of the alphabet."""
    return _STAND_IN.search(secret) is None


# Letters-only formats can collide with identifiers (`hf_` + a 34-letter class name):
# a body that is a run of capitalised words is a name, not a random token.
_CAMEL_CASE_NAME = re.compile(r"(?:[A-Z][a-z]+)+")


def _random_letters(secret: str) -> bool:
    """A letters-only token body: not a stand-in and not a CamelCase identifier."""
    body = secret.rsplit("_", 1)[-1]
    return _not_stand_in(secret) and _CAMEL_CASE_NAME.fullmatch(body) is None


def _memsync_token(secret: str) -> bool:
    """A memsync token: its 6-character checksum matches its body."""
    return is_well_formed_token(secret)


# -- cloud, AI, payment and messaging providers --


def _decoded_ascii(encoded: str) -> str | None:
    """`encoded` (standard or URL-safe base64, padding optional) as ASCII text, or None."""
    try:
        data = base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_")
    except (binascii.Error, ValueError):
        return None
    if not data.isascii():
        return None
    return data.decode("ascii")


# A long-term Bedrock key decodes to the service credential's alias, `<IAM user>-at-<account
# id>:`, then its secret; the console names the user `BedrockAPIKey-<4 chars>`.
_BEDROCK_LONG_TERM_TEXT = re.compile(r"[A-Za-z0-9+=,.@_-]{1,64}-at-[0-9]{12}:[!-~]{20,}")
_BEDROCK_LONG_TERM_PREFIX = "ABSK"


def _aws_bedrock_api_key(secret: str) -> bool:
    """A Bedrock API key whose base64 part decodes to what AWS puts in one.

    A short-term key is a presigned `bedrock.amazonaws.com` URL (SigV4 query auth); a
    long-term key is `<alias>:<secret>` where the alias ends in `-at-<account id>`.
    """
    if secret.startswith(_BEDROCK_LONG_TERM_PREFIX):
        text = _decoded_ascii(secret[len(_BEDROCK_LONG_TERM_PREFIX) :])
        return text is not None and _BEDROCK_LONG_TERM_TEXT.fullmatch(text) is not None
    text = _decoded_ascii(secret.removeprefix("bedrock-api-key-"))
    return (
        text is not None
        and text.startswith("bedrock.amazonaws.com/?")
        and "X-Amz-Credential=" in text
        and "X-Amz-Signature=" in text
    )


# An identifier made of capitalised words and numbers (`ProductionDatabasePassword2024`).
_WORDS_AND_NUMBERS = re.compile(r"(?:[A-Z][a-z]+|[0-9]+)+")


def _notion_token(secret: str) -> bool:
    """A Notion token; the legacy `secret_` form must also look random, not like a name.

    `secret_` is a common identifier stem, so its 43 characters must mix upper case,
    lower case and digits, with 20 or more distinct ones, and not read as words.
    """
    if not secret.startswith("secret_"):
        return _not_stand_in(secret)
    body = secret.removeprefix("secret_")
    return (
        _not_stand_in(body)
        and any(char.isupper() for char in body)
        and any(char.islower() for char in body)
        and any(char.isdigit() for char in body)
        and len(set(body)) >= 20
        and _WORDS_AND_NUMBERS.fullmatch(body) is None
    )


def _one_password_secret_key(secret: str) -> bool:
    """A 1Password Secret Key: its 32 characters after `A3-` mix letters and digits."""
    body = secret[3:].replace("-", "")
    return (
        _not_stand_in(body)
        and any(char.isdigit() for char in body)
        and any(char.isalpha() for char in body)
        and len(set(body)) >= 12
    )


# Bech32 (BIP 173), which age uses for its keys.
_BECH32_ALPHABET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_AGE_HRP = "age-secret-key-"


def _bech32_checksum_ok(hrp: str, data: str) -> bool:
    """True when `data` (checksum included) is valid bech32 for the human part `hrp`."""
    values = [ord(char) >> 5 for char in hrp] + [0] + [ord(char) & 31 for char in hrp]
    values += [_BECH32_ALPHABET.index(char) for char in data]
    checksum = 1
    for value in values:
        top = checksum >> 25
        checksum = (checksum & 0x1FFFFFF) << 5 ^ value
        for bit, generator in enumerate(_BECH32_GENERATOR):
            if (top >> bit) & 1:
                checksum ^= generator
    return checksum == 1


def _age_secret_key(secret: str) -> bool:
    """An age identity: valid bech32 with its checksum (the last 6 characters)."""
    lowered = secret.lower()
    return _bech32_checksum_ok(_AGE_HRP, lowered[len(_AGE_HRP) + 1 :]) and _not_stand_in(secret)


# -- tokens other scanners find only near a keyword --

# A random token body has every character class of its alphabet; a name, a word run or
# a snake_case identifier of the same length lacks one of them.
_UPPER = re.compile("[A-Z]")
_LOWER = re.compile("[a-z]")
_DIGIT = re.compile("[0-9]")
# Base36 letters that are not hex digits: a hex string is a hash, not a base36 key.
_NOT_HEX_LETTER = re.compile("[g-z]")
_HEX_LETTER = re.compile("[a-f]")


# A line of a wrapped base64 block (binary data has zero runs) can have the shape of a
# one-line token. Such a line is all base64 and sits next to another line of it; a token
# in a note has words, a `KEY=` or quotes around it, or stands between other lines.
_BASE64_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/=_-]+[ \t]*\r?")


def _line_at(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the line holding `text[start:end]`, its line break excluded."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return line_start, len(text) if line_end == -1 else line_end


def _not_in_base64_block(text: str, start: int, end: int) -> bool:
    """False when the secret's line is nothing but base64 and so is a neighbouring line
    (the line above at least 60 characters long, or the line below at least 16)."""
    line_start, line_end = _line_at(text, start, end)
    if _BASE64_LINE.fullmatch(text, line_start, line_end) is None:
        return True
    if line_start > 0:
        above_start, above_end = _line_at(text, line_start - 1, line_start - 1)
        above = _BASE64_LINE.fullmatch(text, above_start, above_end)
        if above is not None and len(text[above_start:above_end].strip()) >= 60:
            return False
    if line_end < len(text):
        below_start, below_end = _line_at(text, line_end + 1, line_end + 1)
        below = _BASE64_LINE.fullmatch(text, below_start, below_end)
        if below is not None and len(text[below_start:below_end].strip()) >= 16:
            return False
    return True


def _mixed_case_and_digits(text: str) -> bool:
    """True when `text` has an upper-case letter, a lower-case letter and a digit."""
    return all(kind.search(text) is not None for kind in (_UPPER, _LOWER, _DIGIT))


def _mixed_case_random(secret: str) -> bool:
    """A random token: upper- and lower-case letters and digits, and not a stand-in."""
    return _mixed_case_and_digits(secret) and _not_stand_in(secret)


def _random_hex(secret: str) -> bool:
    """A random lower-case hex token: both letters and digits, and not a stand-in."""
    return (
        _HEX_LETTER.search(secret) is not None
        and _DIGIT.search(secret) is not None
        and _not_stand_in(secret)
    )


def _mailgun_api_key(secret: str) -> bool:
    """A Mailgun `key-` key: random base36, so a digit and a letter past `f` (all-hex
    after `key-` is an MD5-named cache or object key)."""
    body = secret.removeprefix("key-")
    return (
        _NOT_HEX_LETTER.search(body) is not None
        and _DIGIT.search(body) is not None
        and _not_stand_in(body)
    )


def _mapbox_secret_token(secret: str) -> bool:
    """A Mapbox token: its middle part is base64url JSON naming the account (`"u"`)."""
    import json  # here, not at the top: this block is self-contained (one merge anchor)

    payload = secret.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError):  # JSONDecodeError and UnicodeDecodeError too
        return False
    return (
        isinstance(claims, dict)
        and isinstance(claims.get("u"), str)
        and bool(claims["u"])
        and _not_stand_in(secret)
    )


def _discord_bot_token(secret: str) -> bool:
    """A Discord bot token: its first part is the bot's user id (17-20 digits) in base64."""
    user_id = secret.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(user_id + "=" * (-len(user_id) % 4))
    except (binascii.Error, ValueError):
        return False
    return (
        17 <= len(decoded) <= 20
        and decoded.isdigit()
        and not decoded.startswith(b"0")
        and _not_stand_in(secret)
    )


# -- developer platforms, CI and hosting --

_LETTER = re.compile("[A-Za-z]")
_HEX_ONLY = re.compile("[0-9a-fA-F]+")
# Letters that read as a name: all lower, all upper, CamelCase or camelCase.
_NAME = re.compile("[a-z]+(?:[A-Z][a-z]+)*|[A-Z]+|(?:[A-Z][a-z]+)+")


def _looks_random(body: str, min_digits: int = 0) -> bool:
    """A token body of a format with a short or word-like prefix (`ico-`, `API-`, `tk-us-`).

    A random body of these lengths has letters, is not all hex, does not read as a name
    and has few dashes; an icon class, a hash-named asset, an identifier, a slug or an
    all-caps phrase fails one of these.
    """
    letters = body.replace("-", "").replace("_", "")
    return (
        _not_stand_in(body)
        and len(_DIGIT.findall(body)) >= min_digits
        and _LETTER.search(body) is not None
        and _HEX_ONLY.fullmatch(body) is None
        and not (letters.isalpha() and _NAME.fullmatch(letters))
        and body.count("-") <= 4
    )


def _random_after(start: int) -> Callable[[str], bool]:
    """A check that the secret's body, from `start` on, `_looks_random`."""

    def check(secret: str) -> bool:
        return _looks_random(secret[start:])

    return check


# A ULID (26 Crockford base32 characters, "01" until the 2040s) is an id, not a key.
_ULID = re.compile("01[0-9A-HJKMNP-TV-Z]{24}")


def _octopus_api_key(secret: str) -> bool:
    """An Octopus Deploy key: two or more digits, and not `API-` before a ULID."""
    body = secret[len("API-") :]
    return _looks_random(body, min_digits=2) and _ULID.fullmatch(body) is None


def _clickhouse_key(secret: str) -> bool:
    """A ClickHouse Cloud key: mixed case and digits, so never a hex digest or hex id."""
    return _mixed_case_and_digits(secret[4:]) and _not_stand_in(secret)


def _harness_token(secret: str) -> bool:
    """A Harness token: its three random parts hold a digit; a dotted identifier has none."""
    return _DIGIT.search(secret[4:]) is not None and _not_stand_in(secret)


def _authress_key(secret: str) -> bool:
    """An Authress key: its last part is a base64 private key, never a snake_case name."""
    return _mixed_case_and_digits(secret.rsplit(".", 1)[-1]) and _not_stand_in(secret)


def _flyio_token(secret: str) -> bool:
    """A Fly.io token. Macaroons (`fm1a_`, `fm1r_`, `fm2_`) are base64 of binary data, in
    which long runs of `A` are real, so only the plain `fo1_` form is checked for them."""
    return not secret.startswith("fo1_") or _not_stand_in(secret)


def _slack_legacy_token(secret: str) -> bool:
    """A Slack legacy token; a workspace or refresh token's last part mixes letters and
    digits (`xoxa-yourtokenhere` is a placeholder)."""
    if secret.startswith(("xoxa-", "xoxr-")):
        return _looks_random(secret.rsplit("-", 1)[-1])
    return _not_stand_in(secret)


# Base64 of `reftkn:01:`, then 10 digits (the expiry, or zeros), `:` and 27 characters.
_JFROG_REFERENCE = re.compile(r"reftkn:01:[0-9]{10}:[A-Za-z0-9]{27}")


def _jfrog_api_key(secret: str) -> bool:
    """A JFrog API key: its 68 random characters mix upper case, lower case and digits."""
    return _mixed_case_and_digits(secret[len("AKCp0") :]) and _not_stand_in(secret)


def _jfrog_reference_token(secret: str) -> bool:
    """A JFrog reference token: its base64 decodes to the documented `reftkn` layout."""
    try:
        decoded = base64.b64decode(secret, validate=True).decode("ascii")
    except (binascii.Error, ValueError):  # UnicodeDecodeError too
        return False
    return _JFROG_REFERENCE.fullmatch(decoded) is not None and _not_stand_in(secret)


_PEM_HEADER_LINE = re.compile(r"^[ \t]*[A-Za-z][A-Za-z0-9-]*:.*$", re.MULTILINE)
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/=]")


def _private_key_block(secret: str) -> bool:
    """A private-key block with a real body: 64+ base64 chars, 16+ of them distinct.

    Header lines (`Proc-Type:`, `DEK-Info:`, PGP's `Version:`) are not body; a key that
    sits in a JSON string has `\\n` escapes instead of line breaks.
    """
    inner = secret[secret.index("-----", len("-----BEGIN")) + 5 : secret.rindex("-----END")]
    inner = inner.replace("\\r", "").replace("\\n", "\n")
    body = _NOT_BASE64.sub("", _PEM_HEADER_LINE.sub("", inner))
    return len(body) >= 64 and len(set(body)) >= 16


# A PEM or PGP armored private key: the BEGIN line, optional header lines, a body of
# base64 (and whitespace, or `\n` escapes inside a JSON string), and the END line with
# the same label. Public keys and certificates have other labels. The body is bounded
# and lazy, and cannot contain `-` or `:`, so it stops at the first END line.
_PRIVATE_KEY_BLOCK = (
    r"-----BEGIN (?P<label>(?:RSA |EC |DSA |OPENSSH |ENCRYPTED |PGP )?PRIVATE KEY(?: BLOCK)?)"
    r"-----"
    r"(?:[ \t]*(?:\r?\n|\\r?\\n)[ \t]*[A-Za-z][A-Za-z0-9-]{1,30}:[^\r\n\\]{0,200}){0,10}"
    r"[A-Za-z0-9+/=\s\\]{64,40000}?"
    r"-----END (?P=label)-----"
)

# GitLab tokens: the classic 20-character form, or the routable form (a base64url
# payload, `.`, an optional 2-char version and `.`, then 2 + 7 chars of length and CRC).
_GITLAB_BODY = r"(?:[A-Za-z0-9_-]{20}|[A-Za-z0-9_-]{27,300}\.(?:[0-9a-z]{2}\.)?[0-9a-z]{9})"


RULES: tuple[Rule, ...] = (
    Rule(
        id="private-key",
        label="Private key",
        prefixes=("PRIVATE KEY",),
        pattern=_PRIVATE_KEY_BLOCK,
        validate=_private_key_block,
    ),
    Rule(
        id="memsync-token",
        label="memsync token",
        prefixes=("mst_",),
        pattern=_token(_starting("mst_", "[A-Za-z0-9]{42}")),
        validate=_memsync_token,
    ),
    Rule(
        id="aws-access-key-id",
        label="AWS access key ID",
        prefixes=("AKIA", "ASIA", "ABIA", "ACCA"),
        pattern=_token(_starting("(?:AKIA|ASIA|ABIA|ACCA)", "[A-Z2-7]{16}")),
        validate=_not_stand_in,
    ),
    # -- context rules --
    Rule(
        # 40 characters of base64 in the same block (no blank line between) as an access
        # key id: a credentials file section, an env block, a YAML map, a CSV row.
        id="aws-secret-access-key",
        label="AWS secret access key",
        prefixes=context_rules.AWS_KEY_ID_PREFIXES,
        pattern=context_rules.AWS_SECRET_ACCESS_KEY.pattern,
        validate=_not_stand_in,
        context=context_rules.aws_secret_beside_key_id,
    ),
    Rule(
        id="gcp-api-key",
        label="Google Cloud API key",
        prefixes=("AIza",),
        pattern=_token(_starting("AIza", "[A-Za-z0-9_-]{35}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # 3 characters, a digit, `Q~`, then 31-34 characters.
        id="azure-ad-client-secret",
        label="Azure AD client secret",
        prefixes=("Q~",),
        pattern=(
            r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"
            r"(?![A-Za-z0-9_~-])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # The storage emulator's account (`devstoreaccount1`) has one key, published in
        # Azure's docs and built into its SDKs: a local setting, not a secret.
        id="azure-storage-account-key",
        label="Azure storage account key",
        prefixes=("AccountKey=",),
        pattern=(
            r"AccountKey=(?<!AccountName=devstoreaccount1;AccountKey=)"
            r"(?P<secret>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])"
        ),
        validate=_not_stand_in,
    ),
    # -- context rules --
    Rule(
        # `scheme://user:password@host` for a database or message broker; the secret is
        # the password, unless it is a stand-in, a default or a template variable.
        id="database-url-password",
        label="Password in a database or broker URL",
        prefixes=context_rules.DATABASE_URL_PREFIXES,
        pattern=context_rules.DATABASE_URL.pattern,
        validate=_not_stand_in,
        context=context_rules.real_url_password,
    ),
    Rule(
        id="digitalocean-token",
        label="DigitalOcean token",
        prefixes=("_v1_",),
        pattern=_token(_starting("do[opr]_v1_", "[a-f0-9]{64}")),
        validate=_not_stand_in,
    ),
    Rule(
        # API keys and admin keys: 93 characters, then `AA`.
        id="anthropic-api-key",
        label="Anthropic API key",
        prefixes=("sk-ant-",),
        pattern=_token(
            _starting("sk-ant-", "(?:api03|admin01)-[A-Za-z0-9_-]{93}AA"), alphabet=_BASE64URL
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # Every OpenAI secret key (legacy, project, service account, admin) carries
        # `T3BlbkFJ`, the base64 of "OpenAI", between two random parts.
        id="openai-api-key",
        label="OpenAI API key",
        prefixes=("T3BlbkFJ",),
        pattern=_token(
            _starting("sk-", "[A-Za-z0-9_-]{20,250}T3BlbkFJ[A-Za-z0-9_-]{20,250}"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="huggingface-token",
        label="Hugging Face token",
        prefixes=("hf_",),
        pattern=_token(_starting("hf_", "[A-Za-z]{34}")),
        validate=_random_letters,
    ),
    Rule(
        id="huggingface-org-token",
        label="Hugging Face organization token",
        prefixes=("api_org_",),
        pattern=_token(_starting("api_org_", "[A-Za-z]{34}")),
        validate=_random_letters,
    ),
    Rule(
        id="github-pat",
        label="GitHub personal access token",
        prefixes=("ghp_",),
        pattern=_token(_starting("ghp_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="github-fine-grained-pat",
        label="GitHub fine-grained personal access token",
        prefixes=("github_pat_",),
        pattern=_token(_starting("github_pat_", "[A-Za-z0-9]{22}_[A-Za-z0-9]{59}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="github-oauth-token",
        label="GitHub OAuth token",
        prefixes=("gho_",),
        pattern=_token(_starting("gho_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="github-app-token",
        label="GitHub App token",
        prefixes=("ghu_", "ghs_"),
        pattern=_token(_starting("gh[us]_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="github-refresh-token",
        label="GitHub refresh token",
        prefixes=("ghr_",),
        pattern=_token(_starting("ghr_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-pat",
        label="GitLab personal access token",
        prefixes=("glpat-",),
        pattern=_token(_starting("glpat-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-deploy-token",
        label="GitLab deploy token",
        prefixes=("gldt-",),
        pattern=_token(_starting("gldt-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-runner-token",
        label="GitLab runner authentication token",
        prefixes=("glrt-",),
        pattern=_token(_starting("glrt-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-runner-registration-token",
        label="GitLab runner registration token",
        prefixes=("GR1348941",),
        pattern=_token(_starting("GR1348941", "[A-Za-z0-9_-]{20}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-pipeline-trigger-token",
        label="GitLab pipeline trigger token",
        prefixes=("glptt-",),
        pattern=_token(_starting("glptt-", "[a-f0-9]{40}")),
        validate=_not_stand_in,
    ),
    # -- developer platforms, CI and hosting --
    Rule(
        # `ATATT3`, then 186 base64url characters (the last 9 are `=` and 8 hex digits).
        # The tail looks like a CRC32, but Atlassian documents no checksum: not checked.
        id="atlassian-api-token",
        label="Atlassian API token",
        prefixes=("ATATT3",),
        pattern=_token(_starting("ATATT3", "[A-Za-z0-9_=-]{186}"), alphabet="A-Za-z0-9_=-"),
        validate=_not_stand_in,
    ),
    Rule(
        # `glcbt-`, the partition id (1-5 characters), `_`, then 20 characters; newer
        # GitLab versions issue `glcbt-` and a JWT (header, payload, signature).
        id="gitlab-ci-job-token",
        label="GitLab CI/CD job token",
        prefixes=("glcbt-",),
        pattern=_token(
            _starting(
                "glcbt-",
                r"(?:[A-Za-z0-9]{1,5}_[A-Za-z0-9_-]{20}"
                r"|eyJ[A-Za-z0-9_-]{10,1000}\.eyJ[A-Za-z0-9_-]{10,4000}\.[A-Za-z0-9_-]{20,1000})",
            ),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-feature-flag-client-token",
        label="GitLab feature flag client token",
        prefixes=("glffct-",),
        pattern=_token(_starting("glffct-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-feed-token",
        label="GitLab feed token",
        prefixes=("glft-",),
        pattern=_token(_starting("glft-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-incoming-mail-token",
        label="GitLab incoming email token",
        prefixes=("glimt-",),
        pattern=_token(_starting("glimt-", "[A-Za-z0-9_-]{25}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-kubernetes-agent-token",
        label="GitLab agent for Kubernetes token",
        prefixes=("glagent-",),
        pattern=_token(_starting("glagent-", "[A-Za-z0-9_-]{50}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-oauth-app-secret",
        label="GitLab OAuth application secret",
        prefixes=("gloas-",),
        pattern=_token(_starting("gloas-", "[A-Za-z0-9_-]{64}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="gitlab-scim-token",
        label="GitLab SCIM token",
        prefixes=("glsoat-",),
        pattern=_token(_starting("glsoat-", _GITLAB_BODY), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # The session id in the cookie: 32 hex characters.
        id="gitlab-session-cookie",
        label="GitLab session cookie",
        prefixes=("_gitlab_session=",),
        pattern=_token(_starting("_gitlab_session=", "(?P<secret>[0-9a-f]{32})")),
        validate=_not_stand_in,
    ),
    Rule(
        # `sgp_`, the instance id (16 hex) or `local`, `_`, 40 hex; or the older
        # `sgp_` + 40 hex. A bare 40-hex token is a git SHA as often as not: not matched.
        id="sourcegraph-access-token",
        label="Sourcegraph access token",
        prefixes=("sgp_",),
        pattern=_token(_starting("sgp_", "(?:(?:[a-f0-9]{16}|local)_)?[a-f0-9]{40}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="rubygems-api-key",
        label="RubyGems API key",
        prefixes=("rubygems_",),
        pattern=_token(_starting("rubygems_", "[a-f0-9]{48}")),
        validate=_not_stand_in,
    ),
    Rule(
        # `CLOJARS_` and the lower-case hex of 30 random bytes.
        id="clojars-deploy-token",
        label="Clojars deploy token",
        prefixes=("CLOJARS_",),
        pattern=_token(_starting("CLOJARS_", "[a-f0-9]{60}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="readme-api-key",
        label="ReadMe API key",
        prefixes=("rdme_",),
        pattern=_token(_starting("rdme_", "[a-z0-9]{70}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="prefect-api-key",
        label="Prefect API key",
        prefixes=("pnu_",),
        pattern=_token(_starting("pnu_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        # `ico-` also starts icon class names: the body must not read as a name.
        id="infracost-api-key",
        label="Infracost API key",
        prefixes=("ico-",),
        pattern=_token(_starting("ico-", "[A-Za-z0-9]{32}"), alphabet=_BASE64URL),
        validate=_random_after(len("ico-")),
    ),
    Rule(
        # `tk-us-` and 48 characters; a slug (`tk-us-east-1-...`) has many dashes.
        id="scalingo-api-token",
        label="Scalingo API token",
        prefixes=("tk-us-",),
        pattern=_token(_starting("tk-us-", "[A-Za-z0-9_-]{48}"), alphabet=_BASE64URL),
        validate=_random_after(len("tk-us-")),
    ),
    Rule(
        id="frameio-developer-token",
        label="Frame.io developer token",
        prefixes=("fio-u-",),
        pattern=_token(_starting("fio-u-", "[A-Za-z0-9_=-]{64}"), alphabet="A-Za-z0-9_=-"),
        validate=_not_stand_in,
    ),
    Rule(
        # `dnkey-`, 26 characters, `-`, 52 characters.
        id="defined-networking-api-key",
        label="Defined Networking API key",
        prefixes=("dnkey-",),
        pattern=_token(
            _starting("dnkey-", "[A-Za-z0-9_=-]{26}-[A-Za-z0-9_=-]{52}"), alphabet="A-Za-z0-9_=-"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # `sha256~` and 43 base64url characters (32 bytes); digests use `sha256:`.
        id="openshift-user-token",
        label="OpenShift user token",
        prefixes=("sha256~",),
        pattern=_token(_starting("sha256~", "[A-Za-z0-9_-]{43}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # Application, personal and service access tokens: 16 alphanumerics.
        id="settlemint-access-token",
        label="SettleMint access token",
        prefixes=("sm_aat_", "sm_pat_", "sm_sat_"),
        pattern=_token(_starting("sm_", "(?:aat|pat|sat)_[A-Za-z0-9]{16}")),
        validate=_random_after(len("sm_pat_")),
    ),
    Rule(
        # `s-s4t2ud-` (user) or `s-s4t2af-` (application), then 64 hex characters.
        id="intra42-client-secret",
        label="Intra 42 client secret",
        prefixes=("s-s4t2",),
        pattern=_token(_starting("s-s4t2", "(?:ud|af)-[a-f0-9]{64}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # Client id, key id, `acc_` or `acc-` and the account, then the private key in
        # base64. The prefilter is the rare `.acc` part.
        id="authress-service-client-access-key",
        label="Authress service client access key",
        prefixes=(".acc_", ".acc-"),
        pattern=_token(
            *(
                _starting(
                    start,
                    r"[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_-][A-Za-z0-9-]{10,32}"
                    r"\.[A-Za-z0-9+/_=-]{30,120}",
                )
                for start in ("sc_", "ext_", "scauth_", "authress_")
            ),
            alphabet="A-Za-z0-9+/_=-",
        ),
        validate=_authress_key,
    ),
    Rule(
        # `4b1d` and 38 alphanumerics in mixed case: a hex digest never passes the check.
        id="clickhouse-cloud-api-secret-key",
        label="ClickHouse Cloud API secret key",
        prefixes=("4b1d",),
        pattern=_token(_starting("4b1d", "[A-Za-z0-9]{38}")),
        validate=_clickhouse_key,
    ),
    Rule(
        # `pat.` or `sat.`, the account id (22), the token id (24), the secret (20). Not
        # after a `.`, so a dotted name such as `org.pat.X.Y.Z` is not one.
        id="harness-access-token",
        label="Harness access token",
        prefixes=("pat.", "sat."),
        pattern=_token(
            *(
                rf"{kind}\.(?<![A-Za-z0-9_.]{kind}\.)"
                r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"
                for kind in ("pat", "sat")
            ),
            alphabet=_BASE64URL,
        ),
        validate=_harness_token,
    ),
    Rule(
        # `API-` and 26 upper-case alphanumerics; at least two digits, so an all-caps
        # phrase (`API-VERSIONING...`) is not one.
        id="octopus-deploy-api-key",
        label="Octopus Deploy API key",
        prefixes=("API-",),
        pattern=_token(_starting("API-", "[A-Z0-9]{26}"), alphabet=_BASE64URL),
        validate=_octopus_api_key,
    ),
    Rule(
        # Service tokens, OAuth tokens and database passwords.
        id="planetscale-token",
        label="PlanetScale token or password",
        prefixes=("pscale_tkn_", "pscale_oauth_", "pscale_pw_"),
        pattern=_token(
            _starting("pscale_", "(?:tkn|oauth|pw)_[A-Za-z0-9_=-]{32,64}"), alphabet="A-Za-z0-9_=-"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # Org tokens (`fo1_` + 43) and macaroon tokens (`fm1a_`, `fm1r_`, `fm2_` + base64).
        id="flyio-access-token",
        label="Fly.io access token",
        prefixes=("fo1_", "fm1a_", "fm1r_", "fm2_"),
        pattern=_token(
            _starting("fo1_", "[A-Za-z0-9_-]{43}"),
            _starting("fm", "(?:1[ar]|2)_[A-Za-z0-9+/]{100,4000}={0,3}"),
            alphabet=_BASE64,
        ),
        validate=_flyio_token,
    ),
    Rule(
        # Legacy user and session tokens (`xoxo-`, `xoxs-`: three numeric ids, then hex),
        # workspace tokens (`xoxa-`) and refresh tokens (`xoxr-`).
        id="slack-legacy-token",
        label="Slack legacy token",
        prefixes=("xoxo-", "xoxs-", "xoxa-", "xoxr-"),
        pattern=_token(
            _starting("xox", "[os]-[0-9]{1,16}-[0-9]{1,16}-[0-9]{1,16}-[a-fA-F0-9]{16,64}"),
            _starting("xox", "[ar]-(?:[0-9]-)?[A-Za-z0-9]{8,48}"),
            alphabet=_BASE64URL,
        ),
        validate=_slack_legacy_token,
    ),
    Rule(
        # Bot, user and workspace tokens (numeric team and user ids, then a random part),
        # and configuration tokens (`xoxe.xoxp-1-` or `xoxe-1-`, then a long random part).
        id="slack-token",
        label="Slack token",
        prefixes=("xox",),
        pattern=_token(
            _starting(
                "xox", "[abp]-(?:[0-9]-)?[0-9]{8,14}(?:-[0-9]{8,14}){0,3}-[A-Za-z0-9]{18,64}"
            ),
            _starting("xox", r"e(?:\.xox[bp])?-[0-9]-[A-Za-z0-9]{120,200}"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="slack-app-token",
        label="Slack app-level token",
        prefixes=("xapp-",),
        pattern=_token(
            _starting("xapp-", "[0-9]-[A-Z0-9]{8,14}-[0-9]{10,16}-[A-Za-z0-9]{32,80}"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # Incoming webhooks (`services/`), Workflow Builder webhooks (`workflows/`: team,
        # app, numeric trigger id, 23-25 characters) and triggers (`triggers/`: team,
        # numeric id, 32 hex).
        id="slack-webhook-url",
        label="Slack webhook URL",
        prefixes=(
            "hooks.slack.com/services/",
            "hooks.slack.com/workflows/",
            "hooks.slack.com/triggers/",
        ),
        pattern=(
            r"hooks\.slack\.com/(?:services/T[A-Z0-9]{8,12}/B[A-Z0-9]{8,12}/[A-Za-z0-9]{24}"
            r"|workflows/T[A-Z0-9]{8,12}/A[A-Z0-9]{8,12}/[0-9]{17,19}/[A-Za-z0-9]{23,25}"
            r"|triggers/T[A-Z0-9]{8,12}/[0-9]{8,20}/[a-f0-9]{32})"
            r"(?![A-Za-z0-9])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # Only the API key SID: an account SID (`AC`) alone is an identifier.
        id="twilio-api-key",
        label="Twilio API key",
        prefixes=("SK",),
        pattern=_token(_starting("SK", "[a-f0-9]{32}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="sendgrid-api-key",
        label="SendGrid API key",
        prefixes=("SG.",),
        pattern=_token(
            _starting(r"SG\.", r"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"), alphabet=_BASE64URL
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="npm-token",
        label="npm access token",
        prefixes=("npm_",),
        pattern=_token(_starting("npm_", "[A-Za-z0-9]{36}")),
        validate=_not_stand_in,
    ),
    Rule(
        # A macaroon whose base64 starts with its location, pypi.org or test.pypi.org.
        id="pypi-token",
        label="PyPI upload token",
        prefixes=("pypi-Ag",),
        pattern=_token(
            _starting("pypi-", "(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,1000}"),
            alphabet=_BASE64URL,
        ),
    ),
    Rule(
        id="databricks-token",
        label="Databricks access token",
        prefixes=("dapi",),
        pattern=_token(_starting("dapi", "[a-f0-9]{32}(?:-[0-9])?"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="terraform-cloud-token",
        label="HashiCorp Terraform Cloud token",
        prefixes=(".atlasv1.",),
        pattern=(
            r"(?<![A-Za-z0-9_])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}(?![A-Za-z0-9_=-])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="pulumi-token",
        label="Pulumi access token",
        prefixes=("pul-",),
        pattern=_token(_starting("pul-", "[a-f0-9]{40}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="postman-api-key",
        label="Postman API key",
        prefixes=("PMAK-",),
        pattern=_token(_starting("PMAK-", "[a-fA-F0-9]{24}-[a-fA-F0-9]{34}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Base64 of a JSON object whose first field is the key, `{"k":"`.
        id="grafana-api-key",
        label="Grafana API key",
        prefixes=("eyJrIjoi",),
        pattern=_token(_starting("eyJrIjoi", "[A-Za-z0-9+/]{70,400}={0,2}"), alphabet=_BASE64),
    ),
    Rule(
        id="grafana-cloud-token",
        label="Grafana Cloud access token",
        prefixes=("glc_",),
        pattern=_token(_starting("glc_", "[A-Za-z0-9+/]{32,400}={0,2}"), alphabet=_BASE64),
        validate=_not_stand_in,
    ),
    Rule(
        id="grafana-service-account-token",
        label="Grafana service account token",
        prefixes=("glsa_",),
        pattern=_token(_starting("glsa_", "[A-Za-z0-9]{32}_[a-fA-F0-9]{8}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="sentry-user-token",
        label="Sentry user auth token",
        prefixes=("sntryu_",),
        pattern=_token(_starting("sntryu_", "[a-f0-9]{64}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Base64 of a JSON object starting `{"iat":`, `_`, then the 43-char secret.
        id="sentry-org-token",
        label="Sentry organization auth token",
        prefixes=("sntrys_eyJpYXQiO",),
        pattern=_token(
            _starting("sntrys_eyJpYXQiO", "[A-Za-z0-9+/]{10,400}={0,2}_[A-Za-z0-9+/]{43}"),
            alphabet=_BASE64,
        ),
    ),
    Rule(
        # Secret (`sk_`) and restricted (`rk_`) keys; publishable keys (`pk_`) are public.
        id="stripe-secret-key",
        label="Stripe secret key",
        prefixes=("k_live_", "k_test_", "k_prod_"),
        pattern=_token(_starting("[sr]k_(?:live|test|prod)_", "[A-Za-z0-9]{24,247}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Admin API, custom app and private app access tokens, and app shared secrets.
        id="shopify-token",
        label="Shopify access token or shared secret",
        prefixes=("shp",),
        pattern=_token(_starting("shp", "(?:at|ca|pa|ss)_[a-fA-F0-9]{32}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Access tokens (`EAAA`, legacy `sq0atp-`) and OAuth application secrets.
        id="square-token",
        label="Square access token or OAuth secret",
        prefixes=("EAAA", "sq0"),
        pattern=_token(
            _starting("EAAA", "[A-Za-z0-9_-]{60}"),
            _starting("sq0", "(?:atp-[A-Za-z0-9_-]{22}|csp-[A-Za-z0-9_-]{43})"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="linear-api-key",
        label="Linear API key",
        prefixes=("lin_api_",),
        pattern=_token(_starting("lin_api_", "[A-Za-z0-9]{40}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Personal, CLI, service (optionally naming its config), service account, SCIM
        # and audit tokens.
        id="doppler-token",
        label="Doppler token",
        prefixes=("dp.",),
        pattern=_token(
            _starting(
                r"dp\.", r"(?:pt|ct|st(?:\.[a-z0-9_-]{2,35})?|sa|scim|audit)\.[A-Za-z0-9]{40,44}"
            )
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # 24 characters (a root or local token) or 90+ (one that encodes more). The legacy
        # `s.` form is too short a prefix to tell from ordinary text.
        id="vault-service-token",
        label="HashiCorp Vault service token",
        prefixes=("hvs.",),
        pattern=_token(
            _starting(r"hvs\.", "(?:[A-Za-z0-9]{24}|[A-Za-z0-9_-]{90,300})"), alphabet=_BASE64URL
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="vault-batch-token",
        label="HashiCorp Vault batch token",
        prefixes=("hvb.",),
        pattern=_token(_starting(r"hvb\.", "[A-Za-z0-9_-]{138,300}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="age-secret-key",
        label="age secret key",
        prefixes=("AGE-SECRET-KEY-1",),
        pattern=_token(
            _starting("AGE-SECRET-KEY-1", f"[{_BECH32_ALPHABET.upper()}]{{58}}"),
            alphabet=_BASE64URL,
        ),
        validate=_age_secret_key,
    ),
    Rule(
        id="docker-hub-pat",
        label="Docker Hub personal access token",
        prefixes=("dckr_pat_",),
        pattern=_token(_starting("dckr_pat_", "[A-Za-z0-9_-]{27}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # `AKCp`, a digit, then 68 characters. (`AKC` alone, as some scanners use it, is
        # too short a prefix.)
        id="jfrog-api-key",
        label="JFrog Artifactory API key",
        prefixes=("AKCp",),
        pattern=_token(_starting("AKCp", "[0-9][A-Za-z0-9]{68}")),
        validate=_jfrog_api_key,
    ),
    Rule(
        # 64 characters of base64 of `reftkn:01:<expiry>:<27 characters>`.
        id="jfrog-reference-token",
        label="JFrog Artifactory reference token",
        prefixes=("cmVmdGtuOjAxOj",),
        pattern=_token(_starting("cmVmdGtuOjAxOj", "[A-Za-z0-9+/]{50}"), alphabet=_BASE64),
        validate=_jfrog_reference_token,
    ),
    Rule(
        # The current format only: legacy Heroku keys are bare UUIDs, not recognisable.
        id="heroku-api-key",
        label="Heroku API key",
        prefixes=("HRKU-",),
        pattern=_token(_starting("HRKU-", "[A-Za-z0-9_-]{60}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    # -- tokens other scanners find only near a keyword --
    Rule(
        # `sl.` then 130-152 base64url characters, or the newer `sl.u.` then a longer body
        # (over a thousand characters).
        id="dropbox-short-lived-token",
        label="Dropbox short-lived access token",
        prefixes=("sl.",),
        pattern=_token(
            _starting(r"sl\.", r"(?:[A-Za-z0-9_-]{130,152}|u\.[A-Za-z0-9_-]{130,2000})"),
            alphabet=_BASE64URL,
        ),
        validate=_mixed_case_random,
    ),
    Rule(
        # Base64url of an 8-byte id, 8 zero bytes and 32 random bytes: 11 characters, a
        # run of ten `A`, 43 characters. The engine drops any secret holding such a run as
        # a placeholder, so the secret is the 43-character tail: the regex starts at the
        # run and looks back for the 11. Not inside a wrapped base64 block (binary data
        # has zero runs too).
        id="dropbox-long-lived-token",
        label="Dropbox long-lived access token",
        prefixes=("AAAAAAAAAA",),
        pattern=(
            "AAAAAAAAAA(?<=(?<![A-Za-z0-9_+/-])[A-Za-z0-9_-]{11}"
            "AAAAAAAAAA)(?P<secret>[A-Za-z0-9_-]{43})(?![A-Za-z0-9_+/=-])"
        ),
        validate=_mixed_case_random,
        context=_not_in_base64_block,
    ),
    Rule(
        # `key-` then 32 base36 characters. Not `pubkey-` (the public validation key) nor
        # a name such as `cache-key-...`. The newer hex-groups form has no literal prefix.
        id="mailgun-api-key",
        label="Mailgun private API key",
        prefixes=("key-",),
        pattern=(r"key-(?<![A-Za-z0-9_./-]key-)[a-z0-9]{32}(?![A-Za-z0-9_-])"),
        validate=_mailgun_api_key,
    ),
    Rule(
        # `sk.`, base64url JSON naming the account, `.`, the signature. Public tokens
        # (`pk.`) ship in web pages.
        id="mapbox-secret-token",
        label="Mapbox secret access token",
        prefixes=("sk.eyJ",),
        pattern=_token(
            _starting(r"sk\.eyJ", r"[A-Za-z0-9_-]{20,400}\.[A-Za-z0-9_-]{20,40}"),
            alphabet=_BASE64URL,
        ),
        validate=_mapbox_secret_token,
    ),
    Rule(
        id="new-relic-user-api-key",
        label="New Relic user API key",
        prefixes=("NRAK-",),
        pattern=_token(_starting("NRAK-", "[A-Z0-9]{27}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="new-relic-insert-key",
        label="New Relic Insights insert key",
        prefixes=("NRII-",),
        pattern=_token(_starting("NRII-", "[A-Za-z0-9_-]{32}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # 40 characters ending in `NRAL`: a 6-character region part, 30 hex, `NRAL`. The
        # regex starts at the rare `NRAL` and looks back for the rest. (Browser keys,
        # `NRJS-`, are in the page source of every site that uses them: not secret.)
        id="new-relic-license-key",
        label="New Relic license key",
        prefixes=("NRAL",),
        pattern=(
            r"NRAL(?<=(?<![A-Za-z0-9_])(?P<secret>[a-z0-9]{6}[a-f0-9]{30}NRAL))(?![A-Za-z0-9_])"
        ),
        validate=_random_hex,
    ),
    Rule(
        # `access-`, the environment, then a UUID. Public (`public-`) and Link (`link-`)
        # tokens are handed to the browser.
        id="plaid-access-token",
        label="Plaid access token",
        prefixes=("access-sandbox-", "access-development-", "access-production-"),
        pattern=(
            r"access-(?<![A-Za-z0-9_./-]access-)(?:sandbox|development|production)-"
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![A-Za-z0-9_-])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="typeform-token",
        label="Typeform personal access token",
        prefixes=("tfp_",),
        pattern=_token(_starting("tfp_", "[A-Za-z0-9_-]{59}"), alphabet=_BASE64URL),
        validate=_mixed_case_random,
    ),
    Rule(
        # `t1.`, a base64url part, `.`, then the 86-character signature.
        id="yandex-iam-token",
        label="Yandex Cloud IAM token",
        prefixes=("t1.",),
        pattern=_token(
            _starting(r"t1\.", r"[A-Za-z0-9_-]{50,400}={0,2}\.[A-Za-z0-9_-]{86}={0,2}"),
            alphabet="A-Za-z0-9_=-",
        ),
        validate=_mixed_case_random,
    ),
    Rule(
        id="yandex-api-key",
        label="Yandex Cloud API key",
        prefixes=("AQVN",),
        pattern=_token(_starting("AQVN", "[A-Za-z0-9_-]{35,38}"), alphabet=_BASE64),
        validate=_mixed_case_random,
    ),
    Rule(
        # URL-encoded base64 (`%2B`, `%2F`) of 16 zero bytes (21 `A`), the app id (8 bytes
        # whose high half is zero: 5 more `A`) and 20 random bytes, then `=` (or `%3D`)
        # and 30-60 alphanumerics. The engine drops any secret holding those runs as a
        # placeholder, so the secret is what follows the app id.
        id="twitter-bearer-token",
        label="Twitter (X) app bearer token",
        prefixes=("A" * 21,),
        pattern=(
            _starting("A{21}", "(?:[A-Za-z0-9]|%2[BFbf]){6}AAAAA")
            + r"(?P<secret>(?:[A-Za-z0-9]|%2[BFbf]){27}(?:=|%3[Dd])[A-Za-z0-9]{30,60})"
            + r"(?![A-Za-z0-9%])"
        ),
        validate=_mixed_case_random,
    ),
    Rule(
        # `live_` or `test_` then 35 hex. Publishable keys (`live_pub_`, `test_pub_`) are
        # public.
        id="lob-api-key",
        label="Lob secret API key",
        prefixes=("live_", "test_"),
        pattern=_token(_starting("(?:live|test)_", "[a-f0-9]{35}")),
        validate=_random_hex,
    ),
    Rule(
        # Live access tokens: `live_` then 40 characters (Lob's `live_` keys are 35 hex).
        id="gocardless-access-token",
        label="GoCardless live access token",
        prefixes=("live_",),
        pattern=_token(_starting("live_", "[A-Za-z0-9_-]{40}"), alphabet="A-Za-z0-9_=-"),
        validate=_mixed_case_random,
    ),
    Rule(
        # The webhook's numeric id, then its token (discord.com or the older
        # discordapp.com, any API version).
        id="discord-webhook-url",
        label="Discord webhook URL",
        prefixes=("discord.com/api/", "discordapp.com/api/"),
        pattern=_token(
            _starting(
                "discord",
                r"(?:app)?\.com/api(?:/v[0-9]{1,2})?/webhooks/[1-9][0-9]{16,19}"
                r"/[A-Za-z0-9_-]{60,80}",
            ),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        id="1password-service-account-token",
        label="1Password service account token",
        prefixes=("ops_eyJ",),
        pattern=_token(_starting("ops_eyJ", "[A-Za-z0-9+/]{250,8000}={0,2}"), alphabet=_BASE64),
    ),
    Rule(
        # No literal prefix: the user id part starts with M, N or O. The check decodes it.
        id="discord-bot-token",
        label="Discord bot token",
        prefixes=(),
        pattern=(
            r"[MNO](?<![A-Za-z0-9_.-][MNO])[A-Za-z0-9_-]{22,26}\.[A-Za-z0-9_-]{6}"
            r"\.[A-Za-z0-9_-]{27,38}(?![A-Za-z0-9_-])"
        ),
        validate=_discord_bot_token,
    ),
    Rule(
        # The bot's numeric id, `:`, then 35 characters that start with `AA`.
        id="telegram-bot-token",
        label="Telegram bot token",
        prefixes=(":AA",),
        pattern=(r"[0-9](?<![A-Za-z0-9_:][0-9])[0-9]{7,9}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"),
        validate=_not_stand_in,
    ),
    Rule(
        # 32 hex characters (the secret), then the data center (`-us` and a number). The
        # regex starts at the rare `-us` and looks back for the hex: far faster on prose.
        id="mailchimp-api-key",
        label="Mailchimp API key",
        prefixes=("-us",),
        pattern=(r"-us(?<=(?<![A-Za-z0-9_])(?P<secret>[0-9a-f]{32})-us)[0-9]{1,2}(?![A-Za-z0-9_])"),
        validate=_not_stand_in,
    ),
    # -- cloud, AI, payment and messaging providers --
    Rule(
        # `A3-`, the 6-character account id, then 26 random characters, grouped 6-5-5-5-5
        # (the white paper also shows the first two random groups joined as 11).
        id="1password-secret-key",
        label="1Password Secret Key",
        prefixes=("A3-",),
        pattern=_token(
            _starting(
                "A3-",
                "[A-Z0-9]{6}-(?:[A-Z0-9]{6}-[A-Z0-9]{5}|[A-Z0-9]{11})(?:-[A-Z0-9]{5}){3}",
            ),
            alphabet=_BASE64URL,
        ),
        validate=_one_password_secret_key,
    ),
    Rule(
        # `ntn_`, 11 digits, then 35 characters; the legacy form, `secret_` and 43
        # characters, only when those look random (`secret_` also starts identifiers).
        id="notion-api-token",
        label="Notion integration token",
        prefixes=("ntn_", "secret_"),
        pattern=_token(
            _starting("ntn_", "[0-9]{11}[A-Za-z0-9]{35}"),
            _starting("secret_", "[A-Za-z0-9]{43}"),
        ),
        validate=_notion_token,
    ),
    Rule(
        # Long-term keys: `ABSK` and the base64 of `<alias>:<secret>`; short-term keys:
        # `bedrock-api-key-` and the base64 of a presigned URL. The check decodes both.
        id="aws-bedrock-api-key",
        label="Amazon Bedrock API key",
        prefixes=("ABSK", "bedrock-api-key-"),
        pattern=_token(
            _starting("ABSK", "[A-Za-z0-9+/]{100,400}={0,2}"),
            _starting("bedrock-api-key-", "[A-Za-z0-9+/]{100,6000}={0,2}"),
            alphabet=_BASE64,
        ),
        validate=_aws_bedrock_api_key,
    ),
    Rule(
        id="perplexity-api-key",
        label="Perplexity API key",
        prefixes=("pplx-",),
        pattern=_token(_starting("pplx-", "[A-Za-z0-9]{48}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="groq-api-key",
        label="Groq API key",
        prefixes=("gsk_",),
        pattern=_token(_starting("gsk_", "[A-Za-z0-9]{48}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="xai-api-key",
        label="xAI API key",
        prefixes=("xai-",),
        pattern=_token(_starting("xai-", "[A-Za-z0-9]{80}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # The type (`dt0c01` for API tokens, `dt0s01` as in Dynatrace's own example), `.`,
        # the 24-character public part (the token id), `.`, the 64-character secret part.
        id="dynatrace-api-token",
        label="Dynatrace API token",
        prefixes=("dt0c01.", "dt0s01."),
        pattern=_token(_starting(r"dt0[cs]01\.", r"[A-Z0-9]{24}\.[A-Z0-9]{64}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="shippo-api-token",
        label="Shippo API token",
        prefixes=("shippo_live_", "shippo_test_"),
        pattern=_token(_starting("shippo_(?:live|test)_", "[a-fA-F0-9]{40}")),
        validate=_not_stand_in,
    ),
    Rule(
        # Production (`EZAK`) and test (`EZTK`) keys.
        id="easypost-api-key",
        label="EasyPost API key",
        prefixes=("EZAK", "EZTK"),
        pattern=_token(_starting("EZ[AT]K", "[A-Za-z0-9]{54}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="duffel-api-token",
        label="Duffel access token",
        prefixes=("duffel_test_", "duffel_live_"),
        pattern=_token(
            _starting("duffel_(?:test|live)_", "[A-Za-z0-9_-]{43}"), alphabet=_BASE64URL
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # Live and test secret keys: 32 hex characters, then `-X`. The public keys
        # (`FLWPUBK`) ship in client code and are not secrets.
        id="flutterwave-secret-key",
        label="Flutterwave secret key",
        prefixes=("FLWSECK-", "FLWSECK_TEST-"),
        pattern=_token(
            _starting("FLWSECK-", "[a-fA-F0-9]{32}-X"),
            _starting("FLWSECK_TEST-", "[a-fA-F0-9]{32}-X"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # The encryption key: the secret key's prefix with no `-`, then 12 hex characters.
        id="flutterwave-encryption-key",
        label="Flutterwave encryption key",
        prefixes=("FLWSECK",),
        pattern=_token(
            _starting("FLWSECK", "[a-fA-F0-9]{12}"),
            _starting("FLWSECK_TEST", "[a-fA-F0-9]{12}"),
            alphabet=_BASE64URL,
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # 6 characters, `_`, 29 characters, then `_mmk`. The regex starts at the rare
        # `_mmk` and looks back for the rest.
        id="maxmind-license-key",
        label="MaxMind license key",
        prefixes=("_mmk",),
        pattern=(
            r"_mmk(?<=(?<![A-Za-z0-9_])(?P<secret>[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk))"
            r"(?![A-Za-z0-9_])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # 64 hex characters, `-`, then 16 characters.
        id="brevo-api-key",
        label="Brevo (Sendinblue) API key",
        prefixes=("xkeysib-",),
        pattern=_token(_starting("xkeysib-", "[a-f0-9]{64}-[A-Za-z0-9]{16}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="brevo-smtp-key",
        label="Brevo (Sendinblue) SMTP key",
        prefixes=("xsmtpsib-",),
        pattern=_token(_starting("xsmtpsib-", "[a-f0-9]{64}-[A-Za-z0-9]{16}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # `<tenant>.webhook.office.com/webhookb2/<group>@<tenant id>/IncomingWebhook/<32
        # hex>/<owner>`; newer URLs add `/V2...` after it, which the match need not include.
        id="microsoft-teams-webhook-url",
        label="Microsoft Teams incoming webhook URL",
        prefixes=(".webhook.office.com/webhookb2/",),
        pattern=(
            r"\.webhook\.office\.com/webhookb2/(?<=[A-Za-z0-9]\.webhook\.office\.com/webhookb2/)"
            r"(?P<secret>{uuid}@{uuid}/IncomingWebhook/[0-9a-fA-F]{{32}}/{uuid})"
            r"(?![0-9a-fA-F-])".format(
                uuid="[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            )
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # `v1.0-`, 24 hex characters, `-`, then 146 hex characters.
        id="cloudflare-origin-ca-key",
        label="Cloudflare Origin CA key",
        prefixes=("v1.0-",),
        pattern=_token(_starting(r"v1\.0-", "[a-f0-9]{24}-[a-f0-9]{146}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        id="alibaba-access-key-id",
        label="Alibaba Cloud AccessKey ID",
        prefixes=("LTAI",),
        pattern=_token(_starting("LTAI", "[A-Za-z0-9]{20}")),
        validate=_not_stand_in,
    ),
    Rule(
        id="adobe-client-secret",
        label="Adobe client secret",
        prefixes=("p8e-",),
        pattern=_token(_starting("p8e-", "[A-Za-z0-9]{32}"), alphabet=_BASE64URL),
        validate=_not_stand_in,
    ),
    Rule(
        # `EAA`, a letter for the app (`M` and `C` are the documented ones; Square's `EAAA`
        # is its own rule), then 100 or more characters. A base64 character before it or
        # after it means a longer blob, not a token.
        id="facebook-access-token",
        label="Facebook (Meta) access token",
        prefixes=("EAAM", "EAAC"),
        pattern=(r"EAA(?<![A-Za-z0-9+/_-]EAA)[MC][A-Za-z0-9]{100,1000}(?![A-Za-z0-9+/=_-])"),
        validate=_not_stand_in,
    ),
    Rule(
        # Sidekiq Pro and Enterprise gem-server credentials in a URL: 8 hex, `:`, 8 hex.
        # The regex starts at `@` and looks back for them.
        id="sidekiq-credentials-url",
        label="Sidekiq Pro/Enterprise credentials in a URL",
        prefixes=("@gems.contribsys.com", "@enterprise.contribsys.com"),
        pattern=(
            r"@(?<=://(?P<secret>[0-9a-fA-F]{8}:[0-9a-fA-F]{8})@)"
            r"(?:gems|enterprise)\.contribsys\.com(?![A-Za-z0-9-])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # The same credentials given to Bundler: `BUNDLE_GEMS__CONTRIBSYS__COM=...` (or
        # ENTERPRISE) in the environment or `.bundle/config`, or `bundle config <host> ...`.
        id="sidekiq-bundler-credentials",
        label="Sidekiq Pro/Enterprise credentials for Bundler",
        prefixes=("__CONTRIBSYS__COM", ".contribsys.com "),
        pattern=(
            "(?:"
            + _starting("BUNDLE_", "(?:GEMS|ENTERPRISE)__CONTRIBSYS__COM")
            + r"""["']?[ \t]*[=:][ \t]*["']?"""
            + "|"
            + _starting("gems", "")
            + r"\.contribsys\.com[ \t]+|"
            + _starting("enterprise", "")
            + r"\.contribsys\.com[ \t]+)"
            r"(?P<secret>[0-9a-fA-F]{8}:[0-9a-fA-F]{8})(?![A-Za-z0-9_])"
        ),
        validate=_not_stand_in,
    ),
)
