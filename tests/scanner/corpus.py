"""A deterministic corpus for the secret scanner: fake credentials and hard negatives.

Everything is built at run time from a seeded `random.Random`, so no credential-shaped
literal ever sits in this file (push protection and our own scanner read it too).

- `positives()`: for each credential format, three format-valid FAKE credentials, each
  in a realistic Markdown note, with the 1-based line where the secret starts.
- `negatives()`: about 300 notes full of things that look like secrets and are not.
- `multi_secret_note()` and `same_line_notes()`: several secrets in one note.
- `realistic_notes(n, size_bytes, seed)`: secret-free notes for throughput checks; fast
  enough for the benchmark to build ~10 MB in well under a second.

Checksummed formats (GitHub, npm, Grafana service accounts, age, memsync) carry a
correct checksum, so a rule that validates the checksum must still find them.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import re
import string
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memsync_protocol.tokens import TOKEN_PREFIX, is_well_formed_token, token_checksum

SEED = 20_240_611
SAMPLES_PER_FORMAT = 3

DIGITS = string.digits
HEX = "0123456789abcdef"
LETTERS = string.ascii_letters
ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
BASE62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
URLSAFE = ALNUM + "_-"
AWS_BASE32 = string.ascii_uppercase + "234567"
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

# The PEM armour, assembled so that no literal header appears in this source.
_DASHES = "-" * 5


def pem_line(verb: str, label: str) -> str:
    """`verb` is BEGIN or END; `label` e.g. "RSA PRIVATE KEY"."""
    return f"{_DASHES}{verb} {label}{_DASHES}"


def _chars(rng: random.Random, alphabet: str, count: int) -> str:
    return "".join(rng.choices(alphabet, k=count))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


# ---------------------------------------------------------------------------------------
# Credential generators


@dataclass(frozen=True)
class Credential:
    """A generated fake credential.

    `text` is what goes into the note (one line, or a whole PEM block with newlines).
    `material` is its random part, without fixed prefixes or armour: a finding must
    never contain any 8-character piece of it.
    """

    text: str
    material: str


def _prefixed(prefix: str, body: str) -> Credential:
    return Credential(prefix + body, body)


def _base62_crc32(body: str) -> str:
    """GitHub's and npm's checksum: CRC32 of the random part, 6 base62 digits."""
    number = zlib.crc32(body.encode("ascii"))
    digits = []
    for _ in range(6):
        number, digit = divmod(number, 62)
        digits.append(BASE62[digit])
    return "".join(reversed(digits))


def _checksummed(prefix: str) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        body = _chars(rng, BASE62, 30)
        return _prefixed(prefix, body + _base62_crc32(body))

    return generate


def _simple(
    prefix: str, alphabet: str, count: int, suffix: str = ""
) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        return _prefixed(prefix, _chars(rng, alphabet, count) + suffix)

    return generate


def _mixed(prefix: str, alphabet: str, count: int) -> Callable[[random.Random], Credential]:
    """Like `_simple`, for formats whose rule wants upper case, lower case and a digit.

    About one random body in 500 lacks one of them and is missed on purpose (the rule
    cannot tell it from an identifier); the corpus draws until the body has all three.
    """

    def generate(rng: random.Random) -> Credential:
        while True:
            body = _chars(rng, alphabet, count)
            if all(any(test(char) for char in body) for test in _CHAR_KINDS):
                return _prefixed(prefix, body)

    return generate


_CHAR_KINDS = (str.isupper, str.islower, str.isdigit)


def _aws_access_key_id(rng: random.Random) -> Credential:
    return _prefixed("AKIA", _chars(rng, AWS_BASE32, 16))


def _gcp_api_key(rng: random.Random) -> Credential:
    # Real keys start "AIzaSy"; the 35 characters after "AIza" include that "Sy".
    return _prefixed("AIza", "Sy" + _chars(rng, URLSAFE, 33))


def _azure_ad_client_secret(rng: random.Random) -> Credential:
    head = _chars(rng, ALNUM, 3) + rng.choice(DIGITS) + "Q~"
    text = head + _chars(rng, ALNUM + "_~.-", rng.randint(31, 34))
    return Credential(text, text)


def _openai_project_key(rng: random.Random) -> Credential:
    # Every OpenAI secret key carries "T3BlbkFJ" (base64 of "OpenAI") between two random
    # halves: 74 + 74 today (156 characters after "sk-proj-"), 58 + 58 and 48 + 48 in
    # older keys.
    half = rng.choice([74, 58, 48])
    marker = "T3B" + "lbkFJ"
    return _prefixed("sk-proj-", _chars(rng, URLSAFE, half) + marker + _chars(rng, URLSAFE, half))


def _openai_legacy_key(rng: random.Random) -> Credential:
    body = _chars(rng, ALNUM, 20) + "T3B" + "lbkFJ" + _chars(rng, ALNUM, 20)
    return _prefixed("sk-", body)


def _github_fine_grained(rng: random.Random) -> Credential:
    return _prefixed("github_pat_", _chars(rng, BASE62, 22) + "_" + _chars(rng, BASE62, 59))


def _slack_bot(rng: random.Random) -> Credential:
    body = "-".join(
        (
            _chars(rng, DIGITS, rng.randint(10, 13)),
            _chars(rng, DIGITS, rng.randint(10, 13)),
            _chars(rng, ALNUM, 24),
        )
    )
    return _prefixed("xoxb-", body)


def _slack_user(rng: random.Random) -> Credential:
    body = "-".join(
        (
            _chars(rng, DIGITS, rng.randint(10, 13)),
            _chars(rng, DIGITS, rng.randint(10, 13)),
            _chars(rng, DIGITS, rng.randint(10, 13)),
            _chars(rng, HEX, 32),
        )
    )
    return _prefixed("xoxp-", body)


def _slack_app(rng: random.Random) -> Credential:
    body = "A" + _chars(rng, UPPER_ALNUM, 10) + "-" + _chars(rng, DIGITS, 13)
    body += "-" + _chars(rng, HEX, 64)
    return _prefixed("xapp-1-", body)


def _slack_webhook(rng: random.Random) -> Credential:
    body = "T" + _chars(rng, UPPER_ALNUM, rng.randint(8, 10))
    body += "/B" + _chars(rng, UPPER_ALNUM, rng.randint(8, 10)) + "/" + _chars(rng, ALNUM, 24)
    return _prefixed("https://hooks.slack.com/services/", body)


def _sendgrid(rng: random.Random) -> Credential:
    return _prefixed("SG.", _chars(rng, URLSAFE, 22) + "." + _chars(rng, URLSAFE, 43))


def _pypi(rng: random.Random) -> Credential:
    """A macaroon in PyPI's v2 binary form, so the token decodes like a real one."""

    def field(kind: int, data: bytes) -> bytes:
        assert len(data) < 128
        return bytes([kind, len(data)]) + data

    identifier = str(uuid.UUID(int=rng.getrandbits(128), version=4)).encode("ascii")
    project = rng.choice(["memsync", "notes-sync", "acme-tools", "billing-client"])
    caveat = json.dumps({"version": 1, "permissions": {"projects": [project]}}).encode()
    macaroon = (
        b"\x02"
        + field(1, b"pypi.org")
        + field(2, identifier)
        + b"\x00"
        + field(2, caveat)
        + b"\x00\x00"
        + field(6, rng.randbytes(32))
    )
    encoded = _b64url(macaroon)
    assert encoded.startswith("AgEIcHlwaS5vcmc")
    return Credential("pypi-" + encoded, encoded[15:])


def _terraform_cloud(rng: random.Random) -> Credential:
    text = _chars(rng, ALNUM, 14) + ".atlasv1." + _chars(rng, URLSAFE, 67)
    return Credential(text, text.replace(".atlasv1.", ""))


def _postman(rng: random.Random) -> Credential:
    return _prefixed("PMAK-", _chars(rng, HEX, 24) + "-" + _chars(rng, HEX, 34))


def _grafana_api_key(rng: random.Random) -> Credential:
    # Base64 of {"k":<32 alnum>,"n":<key name>,"id":<n>}: ~80 characters, as issued.
    name = rng.choice(["api-key", "deploy-bot", "grafana-ci", "alerting"])
    payload = {"k": _chars(rng, ALNUM, 32), "n": name, "id": rng.randint(1, 99)}
    encoded = _b64(json.dumps(payload, separators=(",", ":")).encode())
    assert encoded.startswith("eyJrIjoi")
    assert len(encoded) >= 78
    return Credential(encoded, encoded[8:])


def _grafana_cloud(rng: random.Random) -> Credential:
    payload = {
        "o": str(rng.randint(100_000, 999_999)),
        "n": f"stack-{rng.randint(100_000, 999_999)}-hm-read",
        "k": _chars(rng, ALNUM, 24),
        "m": {"r": rng.choice(["prod-eu-west-0", "prod-us-central-0"])},
    }
    return _prefixed("glc_", _b64(json.dumps(payload, separators=(",", ":")).encode()))


def _grafana_service_account(rng: random.Random) -> Credential:
    body = _chars(rng, ALNUM, 32)
    checksum = zlib.crc32(("glsa_" + body).encode("ascii")).to_bytes(4, "little").hex()
    return _prefixed("glsa_", f"{body}_{checksum}")


def _stripe(prefix: str) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        # Old keys have 24 characters; newer ones are ~99 and start with "51".
        if rng.random() < 0.5:
            body = _chars(rng, ALNUM, 24)
        else:
            body = "51" + _chars(rng, ALNUM, rng.randint(60, 97))
        return _prefixed(prefix, body)

    return generate


def _vault(rng: random.Random) -> Credential:
    # Service tokens are a base64url protobuf, which starts "CAESI".
    return _prefixed("hvs.", "CAESI" + _chars(rng, URLSAFE, rng.randint(85, 100)))


def _bech32_polymod(values: Sequence[int]) -> int:
    generators = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    checksum = 1
    for value in values:
        top = checksum >> 25
        checksum = (checksum & 0x1FFFFFF) << 5 ^ value
        for index, generator in enumerate(generators):
            if (top >> index) & 1:
                checksum ^= generator
    return checksum


def _bech32_encode(hrp: str, data: bytes) -> str:
    bits = "".join(f"{byte:08b}" for byte in data)
    bits += "0" * (-len(bits) % 5)
    words = [int(bits[i : i + 5], 2) for i in range(0, len(bits), 5)]
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    polymod = _bech32_polymod([*expanded, *words, 0, 0, 0, 0, 0, 0]) ^ 1
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(BECH32[w] for w in [*words, *checksum])


def _age(rng: random.Random) -> Credential:
    text = _bech32_encode("age-secret-key-", rng.randbytes(32)).upper()
    assert len(text) == len("AGE-SECRET-KEY-1") + 58
    return Credential(text, text[len("AGE-SECRET-KEY-1") :])


def _heroku(rng: random.Random) -> Credential:
    # The current format is "HRKU-AA" + 58, i.e. 60 characters after "HRKU-".
    return _prefixed("HRKU-", "AA" + _chars(rng, URLSAFE, 58))


# -- tokens other scanners find only near a keyword --
# Formats other scanners find only near a keyword; ours must find them on their own.

URLSAFE_NO_UNDERSCORE = ALNUM + "-"
BASE36 = string.digits + string.ascii_lowercase


def _dropbox_short_lived(rng: random.Random) -> Credential:
    # The classic form (`sl.B...`, ~140 characters) or the newer `sl.u.` (over 1,000).
    if rng.random() < 0.6:
        return _prefixed("sl.", "B" + _chars(rng, URLSAFE, rng.randint(129, 150)))
    return _prefixed("sl.u.", "AF" + _chars(rng, URLSAFE, rng.randint(1000, 1400)))


def _dropbox_long_lived(rng: random.Random) -> Credential:
    # Base64url of an 8-byte id, 8 zero bytes and 32 random bytes: 11 characters, ten
    # `A`, 43 characters.
    text = _b64url(_dropbox_long_lived_bytes(rng))
    assert len(text) == 64
    assert text[11:21] == "A" * 10
    return Credential(text, text[21:])


def _dropbox_long_lived_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(8) + bytes(8) + rng.randbytes(32)


def _mailgun(rng: random.Random) -> Credential:
    return _prefixed("key-", _chars(rng, BASE36, 32))


def _mapbox_token(rng: random.Random, kind: str) -> Credential:
    """A Mapbox token (`pk` public, `sk` secret): base64url claims and a signature."""
    claims = {
        "u": rng.choice(["acme", "notes-team", "maria-garcia"]),
        "a": "cl" + _chars(rng, string.ascii_lowercase + DIGITS, 23),
    }
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    assert payload.startswith("eyJ")
    return _prefixed(f"{kind}.", f"{payload}.{_chars(rng, URLSAFE, 22)}")


def _mapbox_secret(rng: random.Random) -> Credential:
    return _mapbox_token(rng, "sk")


def _new_relic_license(rng: random.Random) -> Credential:
    # A region part (`eu01xx` or six hex digits), 30 hex, then `NRAL`.
    region = rng.choice(["eu01xx", _chars(rng, HEX, 6)])
    text = region + _chars(rng, HEX, 30) + "NRAL"
    return Credential(text, text)


def _plaid_access(rng: random.Random) -> Credential:
    environment = rng.choice(["sandbox", "development", "production"])
    return _prefixed(f"access-{environment}-", _uuid(rng))


def _yandex_iam(rng: random.Random) -> Credential:
    body = _chars(rng, URLSAFE, rng.randint(140, 200)) + "." + _chars(rng, URLSAFE, 86)
    return _prefixed("t1.9euelZ", body)


def _twitter_bearer(rng: random.Random) -> Credential:
    """Base64 of 16 zero bytes, a little-endian app id and 20 random bytes, URL-encoded,
    then `=` (or `%3D`) and 40-50 alphanumerics, as issued."""
    app_id = rng.randint(10**6, 2**31)
    encoded = _b64(bytes(16) + app_id.to_bytes(8, "little") + rng.randbytes(20))
    assert encoded[:21] == "A" * 21
    assert encoded[27:32] == "A" * 5
    assert encoded.endswith("=")
    assert "=" not in encoded[:-1]

    def url_encoded(part: str) -> str:
        return part.replace("+", "%2B").replace("/", "%2F")

    separator = rng.choice(["=", "%3D"])
    secret = url_encoded(encoded[32:-1]) + separator + _chars(rng, ALNUM, rng.randint(40, 50))
    return Credential(url_encoded(encoded[:32]) + secret, secret)


def _discord_webhook(rng: random.Random) -> Credential:
    host = rng.choice(["discord.com", "discordapp.com", "canary.discord.com"])
    webhook_id = rng.choice("123456789") + _chars(rng, DIGITS, 18)
    token = _chars(rng, URLSAFE, 68)
    return Credential(f"https://{host}/api/webhooks/{webhook_id}/{token}", token)


def _jfrog_reference(rng: random.Random) -> Credential:
    expiry = rng.choice(["0000000000", str(rng.randint(1_700_000_000, 1_900_000_000))])
    text = _b64(f"reftkn:01:{expiry}:{_chars(rng, ALNUM, 27)}".encode())
    return Credential(text, text[len("cmVmdGtuOjAxOj") :])


def _one_password(rng: random.Random) -> Credential:
    payload = {
        "signInAddress": "my.1password.com",
        "userAuth": {
            "method": "SRPg-4096",
            "alg": "PBES2g-HS256",
            "iterations": 650000,
            "salt": _b64url(rng.randbytes(16)),
        },
        "email": f"{_chars(rng, string.ascii_lowercase, 13)}@1passwordserviceaccounts.com",
        "srpX": rng.randbytes(32).hex(),
        "muk": {
            "alg": "A256GCM",
            "ext": True,
            "k": _b64url(rng.randbytes(32)),
            "key_ops": ["encrypt", "decrypt"],
            "kty": "oct",
            "kid": "mp",
        },
        "secretKey": "A3-" + "-".join(_chars(rng, UPPER_ALNUM, 6) for _ in range(5)),
        "deviceUuid": _chars(rng, string.ascii_lowercase + DIGITS, 26),
    }
    encoded = _b64(json.dumps(payload, separators=(",", ":")).encode())
    assert encoded.startswith("eyJ")
    assert len(encoded) > 250
    return _prefixed("ops_", encoded)


def _memsync(rng: random.Random) -> Credential:
    # mint_token() draws from `secrets`; this is the same construction, seeded.
    body = _chars(rng, BASE62, 36)
    text = f"{TOKEN_PREFIX}{body}{token_checksum(body)}"
    assert is_well_formed_token(text)
    return _prefixed(TOKEN_PREFIX, text[len(TOKEN_PREFIX) :])


def _azure_storage(rng: random.Random) -> Credential:
    account = _chars(rng, string.ascii_lowercase + DIGITS, rng.randint(6, 20))
    key = _b64(rng.randbytes(64))
    assert len(key) == 88
    assert key.endswith("==")
    text = (
        f"DefaultEndpointsProtocol=https;AccountName={account};AccountKey={key};"
        "EndpointSuffix=core.windows.net"
    )
    return Credential(text, key)


# -- context rules --

# A masked key id: the `aws-access-key-id` rule skips it as a stand-in, so a note with it
# beside a real secret holds exactly one finding, the secret (the id is still an anchor).
_MASKED_KEY_IDS = ("AKIA" + "X" * 16, "ASIA" + "X" * 16)


def _aws_secret(rng: random.Random) -> str:
    """40 characters of base64 with both cases and a digit, as AWS issues them."""
    while True:
        secret = _chars(rng, ALNUM + "/+", 40)
        if (
            any(char.isupper() for char in secret)
            and any(char.islower() for char in secret)
            and any(char.isdigit() for char in secret)
            and not _HAZARDS.search(secret)
        ):
            return secret


def _aws_secret_csv_row(rng: random.Random) -> Credential:
    # The console's credentials download: `Access key ID,Secret access key`.
    secret = _aws_secret(rng)
    return Credential(f"{rng.choice(_MASKED_KEY_IDS)},{secret}", secret)


def _aws_secret_env_block(rng: random.Random) -> Credential:
    secret = _aws_secret(rng)
    text = f"AWS_SECRET_ACCESS_KEY={secret}\nAWS_ACCESS_KEY_ID={rng.choice(_MASKED_KEY_IDS)}"
    return Credential(text, secret)


def _url_password(rng: random.Random) -> str:
    while True:
        password = _chars(rng, ALNUM, rng.randint(16, 28)) + rng.choice(["", "-", "_", "~"])
        password += _chars(rng, ALNUM, 4)
        if not _HAZARDS.search(password):
            return password


def _database_url(
    schemes: Sequence[str], port: int, path: str, users: Sequence[str] = ("app", "billing_rw")
) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        password = _url_password(rng)
        host = f"{rng.choice(_SERVICES)}.db.internal"
        text = f"{rng.choice(schemes)}{rng.choice(users)}:{password}@{host}:{port}{path}"
        return Credential(text, password)

    return generate


def _discord(rng: random.Random) -> Credential:
    # An 18-digit snowflake; its first digit picks the first base64 letter (M, N, O).
    user_id = rng.choice("149") + _chars(rng, DIGITS, 17)
    head = _b64(user_id.encode()).rstrip("=")
    text = head + "." + _chars(rng, URLSAFE, 6) + "." + _chars(rng, URLSAFE, 38)
    return Credential(text, text)


def _telegram(rng: random.Random) -> Credential:
    text = rng.choice("123456789") + _chars(rng, DIGITS, 8) + ":AA" + _chars(rng, URLSAFE, 33)
    return Credential(text, text)


def _mailchimp(rng: random.Random) -> Credential:
    text = _chars(rng, HEX, 32) + "-us" + str(rng.randint(1, 21))
    return Credential(text, text)


# -- cloud, AI, payment and messaging providers --


def _one_password_secret_key(rng: random.Random) -> Credential:
    # `A3-`, the account id, then 26 random characters: grouped 6-5-5-5-5 as 1Password
    # prints them, or with the first two random groups joined (the white paper's form).
    groups = [_chars(rng, UPPER_ALNUM, size) for size in (6, 6, 5, 5, 5, 5)]
    if rng.random() < 0.5:
        groups[1:3] = [groups[1] + groups[2]]
    return _prefixed("A3-", "-".join(groups))


def _notion(rng: random.Random) -> Credential:
    return _prefixed("ntn_", _chars(rng, DIGITS, 11) + _chars(rng, ALNUM, 35))


def _bedrock_long_term(rng: random.Random) -> Credential:
    # base64 of the service credential's alias (`<IAM user>-at-<account>`), `:`, and its
    # secret; the console names the user `BedrockAPIKey-<4 chars>`.
    user = rng.choice(
        [f"BedrockAPIKey-{_chars(rng, string.ascii_lowercase + DIGITS, 4)}", "bedrock-notes-bot"]
    )
    alias = f"{user}-at-{rng.choice('123456789')}{_chars(rng, DIGITS, 11)}"
    encoded = _b64(f"{alias}:{_b64(rng.randbytes(44))}".encode("ascii"))
    return _prefixed("ABSK", encoded)


def _bedrock_short_term(rng: random.Random) -> Credential:
    # base64 of a SigV4 presigned URL without its scheme, as aws-bedrock-token-generator
    # builds it (with a session token when the caller's credentials are temporary).
    def quoted(text: str) -> str:
        return text.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")

    region = rng.choice(["us-east-1", "eu-west-1", "ap-southeast-2"])
    day = f"2025{rng.randint(7, 12):02d}{rng.randint(10, 28)}"
    credential = f"ASIA{_chars(rng, AWS_BASE32, 16)}/{day}/{region}/bedrock/aws4_request"
    query = [
        "Action=CallWithBearerToken",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256",
        f"X-Amz-Credential={quoted(credential)}",
        f"X-Amz-Date={day}T{rng.randint(10, 23)}{rng.randint(10, 59)}00Z",
        "X-Amz-Expires=43200",
        "X-Amz-SignedHeaders=host",
    ]
    if rng.random() < 0.7:
        query.append(f"X-Amz-Security-Token={quoted(_b64(rng.randbytes(rng.randint(400, 900))))}")
    query.append(f"X-Amz-Signature={rng.randbytes(32).hex()}")
    url = "bedrock.amazonaws.com/?" + "&".join(query) + "&Version=1"
    return _prefixed("bedrock-api-key-", _b64(url.encode("ascii")))


def _dynatrace(prefix: str) -> Callable[[random.Random], Credential]:
    # The public part (the token id) and the secret part are uppercase base32.
    def generate(rng: random.Random) -> Credential:
        return _prefixed(prefix, _chars(rng, AWS_BASE32, 24) + "." + _chars(rng, AWS_BASE32, 64))

    return generate


def _flutterwave_secret(prefix: str) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        body = _chars(rng, HEX, 32)
        return Credential(f"{prefix}{body}-X", body)

    return generate


def _flutterwave_encryption(rng: random.Random) -> Credential:
    return _prefixed(rng.choice(["FLWSECK_TEST", "FLWSECK"]), _chars(rng, HEX, 12))


def _maxmind(rng: random.Random) -> Credential:
    body = _chars(rng, ALNUM, 6) + "_" + _chars(rng, ALNUM, 29)
    return Credential(body + "_mmk", body)


def _brevo(prefix: str) -> Callable[[random.Random], Credential]:
    def generate(rng: random.Random) -> Credential:
        return _prefixed(prefix, _chars(rng, HEX, 64) + "-" + _chars(rng, ALNUM, 16))

    return generate


def _teams_webhook(rng: random.Random) -> Credential:
    tenant = _chars(rng, string.ascii_lowercase, rng.randint(4, 12))
    path = f"{_uuid(rng)}@{_uuid(rng)}/IncomingWebhook/{rng.randbytes(16).hex()}/{_uuid(rng)}"
    text = f"https://{tenant}.webhook.office.com/webhookb2/{path}"
    if rng.random() < 0.5:  # newer URLs end in a `/V2...` part
        text += "/V2" + _chars(rng, URLSAFE, 43)
    return Credential(text, path)


def _cloudflare_origin_ca(rng: random.Random) -> Credential:
    return _prefixed("v1.0-", _chars(rng, HEX, 24) + "-" + _chars(rng, HEX, 146))


def _alibaba(rng: random.Random) -> Credential:
    # Current key ids start "LTAI5t"; older ones have other characters there.
    head = "5t" if rng.random() < 0.5 else _chars(rng, ALNUM, 2)
    return _prefixed("LTAI", head + _chars(rng, ALNUM, 18))


def _facebook(rng: random.Random) -> Credential:
    return _prefixed(rng.choice(["EAAM", "EAAC"]), _chars(rng, ALNUM, rng.randint(150, 250)))


def _sidekiq_url(rng: random.Random) -> Credential:
    secret = f"{_chars(rng, HEX, 8)}:{_chars(rng, HEX, 8)}"
    host = rng.choice(["gems", "enterprise"])
    return Credential(f"https://{secret}@{host}.contribsys.com/", secret)


def _sidekiq_bundler(rng: random.Random) -> Credential:
    secret = f"{_chars(rng, HEX, 8)}:{_chars(rng, HEX, 8)}"
    host = rng.choice(["GEMS", "ENTERPRISE"])
    text = rng.choice(
        [
            f"BUNDLE_{host}__CONTRIBSYS__COM={secret}",
            f'BUNDLE_{host}__CONTRIBSYS__COM: "{secret}"',
            f"bundle config --local {host.lower()}.contribsys.com {secret}",
        ]
    )
    return Credential(text, secret)


def _sentry_org(rng: random.Random) -> Credential:
    # Sentry's generate_token: standard base64 of the JSON payload (padding kept), "_",
    # then 32 random bytes in standard base64 without padding.
    payload = {
        "iat": 1_700_000_000 + rng.randint(0, 10**7) + rng.randint(0, 999_999) / 1e6,
        "url": "https://sentry.io",
        "region_url": rng.choice(["https://us.sentry.io", "https://de.sentry.io"]),
        "org": rng.choice(["acme", "acme-labs", "notes-team"]),
    }
    body = _b64(json.dumps(payload).encode()) + "_" + _b64(rng.randbytes(32)).rstrip("=")
    return _prefixed("sntrys_", body)


def _vault_batch(rng: random.Random) -> Credential:
    return _prefixed("hvb.", "AAAAAQ" + _chars(rng, URLSAFE, rng.randint(140, 190)))


def _doppler_service(rng: random.Random) -> Credential:
    config = rng.choice(["dev", "stg", "prd"])
    body = _chars(rng, ALNUM, 43)
    return Credential(f"dp.st.{config}.{body}", body)


# -- developer platforms, CI and hosting --

BASE36 = string.digits + string.ascii_lowercase
LOWER_ALNUM = string.ascii_lowercase + string.digits


def _atlassian(rng: random.Random) -> Credential:
    # "ATATT3xFfGF0", 171 random characters, "=" and 8 upper-case hex digits (which
    # look like a CRC32 of the rest): 186 characters after "ATATT3".
    head = "ATATT3xFfGF0" + _chars(rng, URLSAFE, 171) + "="
    text = head + f"{zlib.crc32(head.encode('ascii')):08X}"
    assert len(text) == 6 + 186
    return Credential(text, text[len("ATATT3xFfGF0") :])


def _gitlab_ci_job(rng: random.Random) -> Credential:
    partition = _chars(rng, HEX, rng.randint(1, 3))
    return _prefixed("glcbt-", f"{partition}_{_chars(rng, URLSAFE, 20)}")


def _gitlab_ci_job_jwt(rng: random.Random) -> Credential:
    # `glcbt-` and a JWT signed by the instance (RS256, a 2048-bit signature).
    header = {"kid": _chars(rng, URLSAFE, 43), "typ": "JWT", "alg": "RS256"}
    claims = {
        "version": "0.1.0",
        "o": str(rng.randint(1, 10**8)),
        "u": _chars(rng, URLSAFE, 6),
        "p": _chars(rng, URLSAFE, 6),
        "jti": _uuid(rng),
        "aud": "gitlab-authz-token",
        "sub": f"gid://gitlab/Ci::Build/{rng.randint(10**9, 10**10)}",
        "iss": "gitlab.com",
        "iat": 1_760_000_000 + rng.randint(0, 10**7),
    }
    parts = [_b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)]
    return _prefixed("glcbt-", ".".join([*parts, _b64url(rng.randbytes(256))]))


def _gitlab_routable_runner(rng: random.Random) -> Credential:
    # `t<n>_`, a base64url payload, `.`, an optional 2-char version and `.`, then the
    # payload length (2 base-36 characters) and a CRC32 (7).
    payload = f"t{rng.randint(1, 3)}_" + _chars(rng, URLSAFE, rng.randint(30, 60))
    version = rng.choice(["", "01."])
    return _prefixed("glrt-", f"{payload}.{version}{_chars(rng, BASE36, 9)}")


def _gitlab_session(rng: random.Random) -> Credential:
    session = _chars(rng, HEX, 32)
    return Credential(f"_gitlab_session={session}", session)


def _sourcegraph(rng: random.Random) -> Credential:
    instance = rng.choice([_chars(rng, HEX, 16), "local"])
    return _prefixed("sgp_", f"{instance}_{_chars(rng, HEX, 40)}")


def _settlemint(rng: random.Random) -> Credential:
    return _prefixed(rng.choice(["sm_aat_", "sm_pat_", "sm_sat_"]), _chars(rng, ALNUM, 16))


def _intra42(rng: random.Random) -> Credential:
    return _prefixed(f"s-s4t2{rng.choice(['ud', 'af'])}-", _chars(rng, HEX, 64))


def _defined_networking(rng: random.Random) -> Credential:
    return _prefixed("dnkey-", _chars(rng, URLSAFE, 26) + "-" + _chars(rng, URLSAFE, 52))


def _authress(rng: random.Random) -> Credential:
    # Client id, key id, account, then an Ed25519 private key (PKCS #8 DER) in base64.
    der = b"\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20" + rng.randbytes(32)
    body = ".".join(
        (
            _chars(rng, LOWER_ALNUM, rng.randint(10, 20)),
            _chars(rng, LOWER_ALNUM, 4),
            "acc_" + _chars(rng, LOWER_ALNUM, 13),
            _b64(der),
        )
    )
    return _prefixed("sc_", body)


def _clickhouse(rng: random.Random) -> Credential:
    return _prefixed("4b1d", _chars(rng, ALNUM, 38))


def _harness(rng: random.Random) -> Credential:
    parts = (_chars(rng, URLSAFE, 22), _chars(rng, HEX, 24), _chars(rng, ALNUM, 20))
    return _prefixed(rng.choice(["pat.", "sat."]), ".".join(parts))


def _planetscale(rng: random.Random) -> Credential:
    kind = rng.choice(["tkn", "oauth", "pw"])
    return _prefixed(f"pscale_{kind}_", _chars(rng, URLSAFE, 43))


def _flyio_macaroon(rng: random.Random) -> Credential:
    prefix = rng.choice(["fm2_", "fm1r_", "fm1a_"])
    # A msgpack array (0x94...) of binary fields, as base64.
    return _prefixed(prefix, _b64(b"\x94\xc4" + rng.randbytes(rng.randint(120, 300))))


def _slack_legacy(rng: random.Random) -> Credential:
    ids = "-".join(_chars(rng, DIGITS, rng.randint(9, 12)) for _ in range(3))
    return _prefixed(rng.choice(["xoxs-", "xoxo-"]), f"{ids}-{_chars(rng, HEX, 64)}")


def _slack_legacy_workspace(rng: random.Random) -> Credential:
    if rng.random() < 0.5:
        return _prefixed("xoxa-2-", _chars(rng, ALNUM, rng.randint(30, 46)))
    return _prefixed("xoxr-", _chars(rng, ALNUM, rng.randint(30, 48)))


def _slack_workflow_webhook(rng: random.Random) -> Credential:
    body = "T" + _chars(rng, UPPER_ALNUM, rng.randint(8, 10))
    body += "/A" + _chars(rng, UPPER_ALNUM, rng.randint(8, 10))
    body += "/" + rng.choice("123456789") + _chars(rng, DIGITS, 17) + "/" + _chars(rng, ALNUM, 24)
    return _prefixed("https://hooks.slack.com/workflows/", body)


def _slack_trigger(rng: random.Random) -> Credential:
    body = "T" + _chars(rng, UPPER_ALNUM, rng.randint(8, 10))
    body += "/" + rng.choice("123456789") + _chars(rng, DIGITS, 12) + "/" + _chars(rng, HEX, 32)
    return _prefixed("https://hooks.slack.com/triggers/", body)


# PEM private keys: a DER-looking body (so it starts "MII..." like a real one) of a
# realistic size, base64-encoded and wrapped.


def _der_sequence(rng: random.Random, inner_head: bytes, total: int) -> bytes:
    length = total - 4
    return (
        b"\x30\x82"
        + length.to_bytes(2, "big")
        + inner_head
        + rng.randbytes(total - 4 - len(inner_head))
    )


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)]


def _pem(label: str, body: bytes, width: int = 64) -> Credential:
    lines = _wrap(_b64(body), width)
    text = "\n".join([pem_line("BEGIN", label), *lines, pem_line("END", label)])
    return Credential(text, "".join(lines))


def _pem_rsa(rng: random.Random) -> Credential:
    total = rng.choice([1192, 1766, 2349])  # 2048-, 3072- and 4096-bit keys
    return _pem("RSA PRIVATE KEY", _der_sequence(rng, b"\x02\x01\x00\x02\x82", total))


def _pem_ec(rng: random.Random) -> Credential:
    body = (
        b"\x30\x77\x02\x01\x01\x04\x20"
        + rng.randbytes(32)
        + b"\xa0\x0a\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07\xa1\x44\x03\x42\x00\x04"
        + rng.randbytes(64)
    )
    return _pem("EC PRIVATE KEY", body)


def _ssh_string(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def _pem_openssh(rng: random.Random) -> Credential:
    key_type = rng.choice([b"ssh-ed25519", b"ssh-rsa"])
    key_size = 32 if key_type == b"ssh-ed25519" else 279
    private_size = 144 if key_type == b"ssh-ed25519" else 1040
    public = _ssh_string(key_type) + _ssh_string(rng.randbytes(key_size))
    body = (
        b"openssh-key-v1\x00"
        + _ssh_string(b"none")
        + _ssh_string(b"none")
        + _ssh_string(b"")
        + (1).to_bytes(4, "big")
        + _ssh_string(public)
        + _ssh_string(rng.randbytes(private_size))
    )
    return _pem("OPENSSH PRIVATE KEY", body, width=70)  # ssh-keygen wraps at 70


def _pem_pkcs8(rng: random.Random) -> Credential:
    if rng.random() < 0.3:  # Ed25519: a single 64-character body line
        return _pem(
            "PRIVATE KEY",
            b"\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20" + rng.randbytes(32),
        )
    head = b"\x02\x01\x00\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00\x04\x82"
    return _pem("PRIVATE KEY", _der_sequence(rng, head, rng.choice([1218, 1794, 2377])))


def _pem_encrypted(rng: random.Random) -> Credential:
    head = b"\x30\x57\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x05\x0d\x30\x4a"
    return _pem("ENCRYPTED PRIVATE KEY", _der_sequence(rng, head, rng.choice([1329, 1905])))


@dataclass(frozen=True)
class Format:
    """One credential format in the corpus.

    `rule_tokens`: words one of which the id of the rule that finds it must contain
    (compared on word boundaries after lower-casing, any punctuation read as "-").
    `last_chars`: punctuation the format's final character may be (e.g. "-_" for a
    base64url body). Samples 1 and 2 end with these, so a rule that wants a word
    boundary (`\b`) after the secret misses them, as it would miss real ones.
    """

    name: str
    generate: Callable[[random.Random], Credential]
    rule_tokens: frozenset[str]
    multiline: bool = False
    last_chars: str = ""


def _format(
    name: str,
    generate: Callable[[random.Random], Credential],
    *tokens: str,
    multiline: bool = False,
    last: str = "",
) -> Format:
    return Format(name, generate, frozenset(tokens), multiline, last)


def _ending_with(credential: Credential, char: str) -> Credential:
    assert credential.text[-1] == credential.material[-1]
    return Credential(credential.text[:-1] + char, credential.material[:-1] + char)


_AZURE_AD = ("azure-ad", "entra", "azure-client-secret", "azure-ad-client-secret", "msal")
_AZURE_STORAGE = ("azure-storage", "storage-account", "azure-storage-account-key", "storage")
_PEM = ("private-key", "pem", "privatekey")

FORMATS: tuple[Format, ...] = (
    _format("aws_access_key_id", _aws_access_key_id, "aws"),
    _format("aws_temporary_access_key_id", _simple("ASIA", AWS_BASE32, 16), "aws"),
    # -- context rules --
    _format("aws_secret_access_key_csv_row", _aws_secret_csv_row, "aws", last="/+"),
    _format("aws_secret_access_key_env_block", _aws_secret_env_block, "aws", multiline=True),
    _format(
        "postgres_url_password",
        _database_url(
            ("postgres://", "postgresql://", "postgresql+psycopg://", "postgresql+asyncpg://"),
            5432,
            "/ledger",
        ),
        "database",
    ),
    _format(
        "mysql_url_password",
        _database_url(
            ("mysql://", "mysql+pymysql://", "mariadb://", "jdbc:mysql://"), 3306, "/app"
        ),
        "database",
    ),
    _format(
        "mongodb_url_password",
        _database_url(("mongodb://", "mongodb+srv://"), 27017, "/notes?retryWrites=true"),
        "database",
    ),
    _format(
        "redis_url_password",
        _database_url(("redis://", "rediss://"), 6379, "/0", users=("", "cache")),
        "database",
    ),
    _format(
        "amqp_url_password",
        _database_url(("amqp://", "amqps://"), 5672, "/jobs", users=("worker", "events")),
        "database",
    ),
    _format(
        "other_database_url_password",
        _database_url(("mssql://", "sqlserver://", "clickhouse://", "cockroachdb://"), 9000, "/db"),
        "database",
    ),
    _format("gcp_api_key", _gcp_api_key, "gcp", "google", last="-_"),
    _format("azure_ad_client_secret", _azure_ad_client_secret, *_AZURE_AD, last="~.-_"),
    _format("digitalocean_token", _simple("dop_v1_", HEX, 64), "digitalocean", "do"),
    _format("digitalocean_oauth_token", _simple("doo_v1_", HEX, 64), "digitalocean", "do"),
    _format("anthropic_api_key", _simple("sk-ant-api03-", URLSAFE, 93, "AA"), "anthropic"),
    _format("anthropic_admin_key", _simple("sk-ant-admin01-", URLSAFE, 93, "AA"), "anthropic"),
    _format("openai_project_key", _openai_project_key, "openai", last="-_"),
    _format("openai_legacy_key", _openai_legacy_key, "openai"),
    _format("huggingface_token", _simple("hf_", LETTERS, 34), "huggingface", "hugging-face", "hf"),
    _format(
        "huggingface_org_token",
        _simple("api_org_", LETTERS, 34),
        "huggingface",
        "hugging-face",
        "hf",
    ),
    _format("github_classic_pat", _checksummed("ghp_"), "github"),
    _format("github_oauth_token", _checksummed("gho_"), "github"),
    _format("github_user_to_server", _checksummed("ghu_"), "github"),
    _format("github_server_to_server", _checksummed("ghs_"), "github"),
    _format("github_refresh_token", _checksummed("ghr_"), "github"),
    _format("github_fine_grained_pat", _github_fine_grained, "github"),
    _format("gitlab_pat", _simple("glpat-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_deploy_token", _simple("gldt-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_runner_token", _simple("glrt-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_pipeline_trigger", _simple("glptt-", HEX, 40), "gitlab"),
    _format("gitlab_runner_registration", _simple("GR1348941", URLSAFE, 20), "gitlab", last="-_"),
    # -- developer platforms, CI and hosting --
    _format("atlassian_api_token", _atlassian, "atlassian"),
    _format("gitlab_ci_job_token", _gitlab_ci_job, "gitlab", last="-_"),
    _format("gitlab_ci_job_token_jwt", _gitlab_ci_job_jwt, "gitlab", last="-_"),
    _format("gitlab_feature_flag_token", _simple("glffct-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_feed_token", _simple("glft-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_incoming_mail_token", _simple("glimt-", BASE36, 25), "gitlab"),
    _format("gitlab_agent_token", _simple("glagent-", URLSAFE, 50), "gitlab", last="-_"),
    _format("gitlab_oauth_app_secret", _simple("gloas-", HEX, 64), "gitlab"),
    _format("gitlab_scim_token", _simple("glsoat-", URLSAFE, 20), "gitlab", last="-_"),
    _format("gitlab_runner_token_routable", _gitlab_routable_runner, "gitlab"),
    _format("gitlab_session_cookie", _gitlab_session, "gitlab"),
    _format("sourcegraph_access_token", _sourcegraph, "sourcegraph"),
    _format("sourcegraph_legacy_token", _simple("sgp_", HEX, 40), "sourcegraph"),
    _format("rubygems_api_key", _simple("rubygems_", HEX, 48), "rubygems"),
    _format("clojars_deploy_token", _simple("CLOJARS_", HEX, 60), "clojars"),
    _format("readme_api_key", _simple("rdme_", LOWER_ALNUM, 70), "readme"),
    _format("prefect_api_key", _simple("pnu_", ALNUM, 36), "prefect"),
    _format("infracost_api_key", _simple("ico-", ALNUM, 32), "infracost"),
    _format("scalingo_api_token", _simple("tk-us-", URLSAFE, 48), "scalingo", last="_"),
    _format("frameio_token", _simple("fio-u-", URLSAFE, 64), "frameio", last="-_"),
    _format("defined_networking_key", _defined_networking, "defined-networking", last="-_"),
    _format("openshift_user_token", _simple("sha256~", URLSAFE, 43), "openshift", last="-_"),
    _format("settlemint_token", _settlemint, "settlemint"),
    _format("intra42_client_secret", _intra42, "intra42"),
    _format("authress_access_key", _authress, "authress"),
    _format("clickhouse_cloud_key", _clickhouse, "clickhouse"),
    _format("harness_token", _harness, "harness"),
    _format("octopus_deploy_api_key", _simple("API-", UPPER_ALNUM, 26), "octopus"),
    _format("planetscale_token", _planetscale, "planetscale", last="-_"),
    _format("flyio_org_token", _simple("fo1_", URLSAFE, 43), "flyio", "fly", last="-_"),
    _format("flyio_macaroon_token", _flyio_macaroon, "flyio", "fly"),
    _format("slack_legacy_token", _slack_legacy, "slack"),
    _format("slack_legacy_workspace_token", _slack_legacy_workspace, "slack"),
    _format("slack_workflow_webhook_url", _slack_workflow_webhook, "slack"),
    _format("slack_trigger_url", _slack_trigger, "slack"),
    _format("slack_bot_token", _slack_bot, "slack"),
    _format("slack_user_token", _slack_user, "slack"),
    _format("slack_app_token", _slack_app, "slack"),
    _format("slack_webhook_url", _slack_webhook, "slack"),
    _format("twilio_api_key", _simple("SK", HEX, 32), "twilio"),
    _format("sendgrid_api_key", _sendgrid, "sendgrid", last="-_"),
    _format("npm_token", _checksummed("npm_"), "npm"),
    _format("pypi_token", _pypi, "pypi", last="-_"),
    _format("databricks_token", _simple("dapi", HEX, 32), "databricks"),
    _format("terraform_cloud_token", _terraform_cloud, "terraform", "hashicorp", "tfc", last="-_"),
    _format("pulumi_token", _simple("pul-", HEX, 40), "pulumi"),
    _format("postman_api_key", _postman, "postman"),
    _format("grafana_api_key", _grafana_api_key, "grafana"),
    _format("grafana_cloud_token", _grafana_cloud, "grafana"),
    _format("grafana_service_account_token", _grafana_service_account, "grafana"),
    _format("sentry_user_token", _simple("sntryu_", HEX, 64), "sentry"),
    _format("sentry_org_token", _sentry_org, "sentry"),
    _format("stripe_secret_live", _stripe("sk_live_"), "stripe"),
    _format("stripe_secret_test", _stripe("sk_test_"), "stripe"),
    _format("stripe_restricted_live", _stripe("rk_live_"), "stripe"),
    _format("shopify_access_token", _simple("shpat_", HEX, 32), "shopify"),
    _format("shopify_shared_secret", _simple("shpss_", HEX, 32), "shopify"),
    _format("shopify_custom_app_token", _simple("shpca_", HEX, 32), "shopify"),
    _format("square_access_token", _simple("EAAA", URLSAFE, 60), "square", last="-_"),
    _format("square_oauth_secret", _simple("sq0csp-", URLSAFE, 43), "square", last="-_"),
    _format("square_legacy_access_token", _simple("sq0atp-", URLSAFE, 22), "square", last="-_"),
    _format("linear_api_key", _simple("lin_api_", ALNUM, 40), "linear"),
    _format("doppler_token", _simple("dp.pt.", ALNUM, 43), "doppler"),
    _format("doppler_service_token", _doppler_service, "doppler"),
    _format("vault_service_token", _vault, "vault", "hashicorp", last="-_"),
    _format("vault_batch_token", _vault_batch, "vault", "hashicorp", last="-_"),
    _format("age_secret_key", _age, "age"),
    _format(
        "jfrog_api_key",
        _mixed("AKCp" + str(SEED % 10), ALNUM, 68),
        "jfrog",
        "artifactory",
    ),
    _format("jfrog_reference_token", _jfrog_reference, "jfrog", "artifactory"),
    _format("docker_hub_pat", _simple("dckr_pat_", URLSAFE, 27), "docker", "dockerhub", last="-_"),
    _format("heroku_api_key", _heroku, "heroku", last="-_"),
    # -- tokens other scanners find only near a keyword --
    _format("dropbox_short_lived_token", _dropbox_short_lived, "dropbox", last="-_"),
    _format("dropbox_long_lived_token", _dropbox_long_lived, "dropbox", last="-_"),
    _format("mailgun_api_key", _mailgun, "mailgun"),
    _format("mapbox_secret_token", _mapbox_secret, "mapbox", last="-_"),
    _format("new_relic_user_api_key", _simple("NRAK-", UPPER_ALNUM, 27), "new-relic"),
    _format(
        "new_relic_insert_key", _simple("NRII-", URLSAFE_NO_UNDERSCORE, 32), "new-relic", last="-"
    ),
    _format("new_relic_license_key", _new_relic_license, "new-relic"),
    _format("plaid_access_token", _plaid_access, "plaid"),
    _format("typeform_token", _simple("tfp_", URLSAFE, 59), "typeform", last="-_"),
    _format("yandex_iam_token", _yandex_iam, "yandex", last="-_"),
    _format("yandex_api_key", _mixed("AQVN", URLSAFE, 36), "yandex", last="-_"),
    _format("twitter_bearer_token", _twitter_bearer, "twitter"),
    _format("lob_live_secret_key", _simple("live_", HEX, 35), "lob"),
    _format("lob_test_secret_key", _simple("test_", HEX, 35), "lob"),
    _format("gocardless_access_token", _simple("live_", URLSAFE, 40), "gocardless", last="-_"),
    _format("discord_webhook_url", _discord_webhook, "discord-webhook", last="-_"),
    _format("onepassword_service_account", _one_password, "1password", "onepassword", "op"),
    _format("pem_rsa_private_key", _pem_rsa, *_PEM, multiline=True),
    _format("pem_ec_private_key", _pem_ec, *_PEM, multiline=True),
    _format("pem_openssh_private_key", _pem_openssh, *_PEM, "openssh", multiline=True),
    _format("pem_pkcs8_private_key", _pem_pkcs8, *_PEM, multiline=True),
    _format("pem_encrypted_private_key", _pem_encrypted, *_PEM, multiline=True),
    _format("memsync_token", _memsync, "memsync", "mst"),
    _format("azure_storage_connection_string", _azure_storage, *_AZURE_STORAGE),
    _format("discord_bot_token", _discord, "discord", last="-_"),
    _format("telegram_bot_token", _telegram, "telegram", last="-_"),
    _format("mailchimp_api_key", _mailchimp, "mailchimp"),
    # -- cloud, AI, payment and messaging providers --
    _format("onepassword_secret_key", _one_password_secret_key, "1password", "onepassword"),
    _format("notion_api_token", _notion, "notion"),
    _format("notion_legacy_token", _simple("secret_", ALNUM, 43), "notion"),
    _format("aws_bedrock_long_term_key", _bedrock_long_term, "bedrock"),
    _format("aws_bedrock_short_term_key", _bedrock_short_term, "bedrock"),
    _format("perplexity_api_key", _simple("pplx-", ALNUM, 48), "perplexity"),
    _format("groq_api_key", _simple("gsk_", ALNUM, 48), "groq"),
    _format("xai_api_key", _simple("xai-", ALNUM, 80), "xai"),
    _format("dynatrace_api_token", _dynatrace("dt0c01."), "dynatrace"),
    _format("dynatrace_oauth_client_secret", _dynatrace("dt0s01."), "dynatrace"),
    _format("shippo_live_token", _simple("shippo_live_", HEX, 40), "shippo"),
    _format("shippo_test_token", _simple("shippo_test_", HEX, 40), "shippo"),
    _format("easypost_api_key", _simple("EZAK", ALNUM, 54), "easypost"),
    _format("easypost_test_key", _simple("EZTK", ALNUM, 54), "easypost"),
    _format("duffel_test_token", _simple("duffel_test_", URLSAFE, 43), "duffel", last="-_"),
    _format("duffel_live_token", _simple("duffel_live_", URLSAFE, 43), "duffel", last="-_"),
    _format("flutterwave_test_secret_key", _flutterwave_secret("FLWSECK_TEST-"), "flutterwave"),
    _format("flutterwave_live_secret_key", _flutterwave_secret("FLWSECK-"), "flutterwave"),
    _format("flutterwave_encryption_key", _flutterwave_encryption, "flutterwave"),
    _format("maxmind_license_key", _maxmind, "maxmind"),
    _format("brevo_api_key", _brevo("xkeysib-"), "brevo", "sendinblue"),
    _format("brevo_smtp_key", _brevo("xsmtpsib-"), "brevo", "sendinblue"),
    _format("teams_webhook_url", _teams_webhook, "teams", "microsoft-teams"),
    _format("cloudflare_origin_ca_key", _cloudflare_origin_ca, "cloudflare"),
    _format("alibaba_access_key_id", _alibaba, "alibaba"),
    _format("adobe_client_secret", _simple("p8e-", ALNUM, 32), "adobe"),
    _format("facebook_access_token", _facebook, "facebook", "meta"),
    _format("stripe_secret_prod", _stripe("sk_prod_"), "stripe"),
    _format("stripe_restricted_prod", _stripe("rk_prod_"), "stripe"),
    _format("sidekiq_credentials_url", _sidekiq_url, "sidekiq"),
    _format("sidekiq_bundler_credentials", _sidekiq_bundler, "sidekiq"),
)

FORMATS_BY_NAME: dict[str, Format] = {fmt.name: fmt for fmt in FORMATS}


def rule_id_matches(rule_id: str, tokens: frozenset[str]) -> bool:
    """True when `rule_id` contains one of `tokens` as whole words."""
    normalized = "-" + re.sub(r"[^a-z0-9]+", "-", rule_id.lower()).strip("-") + "-"
    return any(f"-{token}-" in normalized for token in tokens)


# ---------------------------------------------------------------------------------------
# Note filler: prose about project decisions, with no secrets in it

_SERVICES = (
    "billing-worker",
    "search-indexer",
    "notes-sync",
    "auth-proxy",
    "metrics-gateway",
    "export-job",
    "release-bot",
    "image-resizer",
    "ledger-api",
    "webhook-relay",
)
_TOPICS = (
    "the nightly export",
    "the staging cluster",
    "the release pipeline",
    "the search reindex",
    "the billing retries",
    "the mobile build",
    "the feature-flag service",
    "the data warehouse load",
    "the on-call rotation",
    "the shared notes directory",
)
_DECISIONS = (
    "We decided to move {topic} to the shared worker pool",
    "After the outage we agreed to pin {topic} to a single region",
    "The team chose to keep {topic} on the old schedule for one more sprint",
    "We are splitting {topic} into two smaller jobs",
    "Platform signed off on running {topic} behind a feature flag",
    "We dropped the custom retry logic in {topic}",
    "Ownership of {topic} moves to the {service} maintainers",
    "We will rewrite {topic} once the queue migration lands",
)
_REASONS = (
    "because the retry storm doubled our p99 latency",
    "so that on-call can restart it without a deploy",
    "since the vendor SDK leaks file handles under load",
    "to cut the monthly bill by roughly 18 %",
    "after three pages in one week",
    "because nobody could reproduce the race locally",
    "so the Zürich team can own it end to end",
    "because the naïve cache ignored invalidation",
)
_FOLLOW_UPS = (
    "Maria will write the migration plan.",
    "Revisit after the Q3 load test.",
    "Owner: platform team (#infra-help).",
    "See RUNBOOK.md for the rollback steps.",
    "Jonas is pairing with the new hire on this.",
    "No customer impact expected — the change is behind a flag.",
    "Decision recorded in ADR-0042.",
    "We'll measure for two weeks and then decide…",
)
_BULLETS = (
    "keep the old code path behind a flag for two weeks",
    "document the rollback in RUNBOOK.md",
    "add a dashboard panel for queue depth",
    "page only on sustained errors, not single spikes",
    "ask security to review the new IAM role",
    "move the cron to 02:30 UTC to avoid the backup window",
    "delete the unused bucket after the audit",
    "bump the client to v2.14.1",
    "run the load test with 3× the usual traffic",
    "write down why we did not pick the managed offering",
)
_ENV_NAMES = (
    "API_KEY",
    "SERVICE_TOKEN",
    "STAGING_API_KEY",
    "DEPLOY_TOKEN",
    "CLIENT_SECRET",
    "ACCESS_TOKEN",
    "CI_TOKEN",
    "INTEGRATION_KEY",
)


def _sentence(rng: random.Random) -> str:
    decision = rng.choice(_DECISIONS).format(
        topic=rng.choice(_TOPICS), service=rng.choice(_SERVICES)
    )
    return f"{decision} {rng.choice(_REASONS)}."


def _paragraph(rng: random.Random) -> str:
    parts = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.6:
        parts.append(rng.choice(_FOLLOW_UPS))
    return " ".join(parts)


def _bullets(rng: random.Random) -> list[str]:
    return [f"- {item}" for item in rng.sample(_BULLETS, rng.randint(2, 4))]


def _heading(rng: random.Random) -> str:
    topic = rng.choice(_TOPICS).removeprefix("the ")
    return f"# {topic[0].upper()}{topic[1:]}: decision log"


def _code_block(rng: random.Random) -> list[str]:
    service = rng.choice(_SERVICES)
    choice = rng.randrange(3)
    if choice == 0:
        return [
            "```bash",
            f"kubectl -n prod rollout status deploy/{service}",
            f"kubectl -n prod logs deploy/{service} --since=1h | grep -c ERROR",
            "```",
        ]
    if choice == 1:
        return [
            "```yaml",
            f"name: {service}",
            f"replicas: {rng.randint(2, 12)}",
            f"image: registry.example.com/{service}:v{rng.randint(1, 9)}.{rng.randint(0, 30)}",
            "resources:",
            f"  memory: {rng.choice([256, 512, 1024])}Mi",
            "```",
        ]
    return [
        "```python",
        "def retry_delay(attempt: int) -> float:",
        f"    return min({rng.randint(10, 60)}.0, 0.5 * 2**attempt)",
        "```",
    ]


def _wrap_note(rng: random.Random, payload: Sequence[str], focus: int) -> tuple[str, int]:
    """A note around `payload`; returns it and the 1-based line of `payload[focus]`."""
    lines = [_heading(rng), "", _paragraph(rng), ""]
    if rng.random() < 0.5:
        lines += [*_bullets(rng), ""]
    if rng.random() < 0.3:
        lines += [*_code_block(rng), ""]
    line = len(lines) + focus + 1
    lines += [*payload, ""]
    if rng.random() < 0.7:
        lines += [_paragraph(rng), ""]
    if rng.random() < 0.4:
        lines += [*_bullets(rng), ""]
    return "\n".join(lines), line


# ---------------------------------------------------------------------------------------
# Positives

URL_SAFE = re.compile(r"[A-Za-z0-9._~-]+")

# Each placement: (name, builder). A builder gets the secret and an env name and
# returns the payload lines and the index of the line holding the secret.
_Placement = Callable[[str, str], tuple[list[str], int]]


def _one(line: str) -> tuple[list[str], int]:
    return [line], 0


SINGLE_LINE_PLACEMENTS: tuple[tuple[str, _Placement], ...] = (
    (
        "prose",
        lambda s, _: _one(f"We rotated it on Tuesday; the old value {s} is revoked now."),
    ),
    ("backticks", lambda s, _: _one(f"For the record, staging used `{s}` until the move.")),
    ("env", lambda s, env: (["```bash", f"{env}={s}", "./scripts/deploy staging", "```"], 1)),
    ("export", lambda s, env: (["```sh", f'export {env}="{s}"', "```"], 1)),
    (
        "yaml",
        lambda s, env: (
            [
                "```yaml",
                "service:",
                "  name: billing-worker",
                f"  {env.lower()}: {s}",
                "  timeout: 30",
                "```",
            ],
            3,
        ),
    ),
    (
        "json",
        lambda s, env: (
            [
                "```json",
                "{",
                '  "endpoint": "https://api.example.com/v2",',
                f'  "{env.lower()}": "{s}",',
                '  "retries": 3',
                "}",
                "```",
            ],
            3,
        ),
    ),
    (
        "url",
        lambda s, _: _one(f"The old hook was https://api.example.com/v1/hooks?key={s}&format=json"),
    ),
    (
        "curl",
        lambda s, _: (
            [
                "```bash",
                f'curl -sS -H "Authorization: Bearer {s}" https://api.example.com/v1/status',
                "```",
            ],
            1,
        ),
    ),
    ("line_start", lambda s, _: _one(f"{s} was pasted here by mistake during the call.")),
    ("sentence_end", lambda s, _: _one(f"Yesterday's deploy still used {s}.")),
    ("parenthesised", lambda s, _: _one(f"The CI job (token {s}) is disabled.")),
    (
        "python_call",
        lambda s, _: (["```python", f"client = Client(api_key='{s}', timeout=10)", "```"], 1),
    ),
    ("line_end", lambda s, _: _one(f"Token used by the nightly export job: {s}")),
    ("bullet", lambda s, _: _one(f"- staging credential: {s}")),
    (
        "table",
        lambda s, _: (
            [
                "| environment | credential | status |",
                "| --- | --- | --- |",
                f"| staging | {s} | revoked |",
            ],
            2,
        ),
    ),
)


def _pem_fenced(block: str, _: str) -> tuple[list[str], int]:
    return ["The key the old bastion used:", "", "```", *block.split("\n"), "```"], 3


def _pem_bare(block: str, _: str) -> tuple[list[str], int]:
    return ["Pasted from the vault export:", "", *block.split("\n")], 2


def _pem_yaml(block: str, _: str) -> tuple[list[str], int]:
    indented = ["    " + line for line in block.split("\n")]
    return ["```yaml", "tls:", "  cert_file: /etc/tls/server.crt", "  key: |", *indented, "```"], 4


def _pem_json_escaped(block: str, _: str) -> tuple[list[str], int]:
    escaped = json.dumps(block + "\n")
    return [
        "```json",
        "{",
        '  "type": "service_account",',
        '  "project_id": "acme-analytics",',
        f'  "private_key": {escaped},',
        '  "client_email": "exporter@acme-analytics.iam.gserviceaccount.com"',
        "}",
        "```",
    ], 4


_PEM_PLACEMENTS: dict[str, tuple[tuple[str, _Placement], ...]] = {
    "default": (("fence", _pem_fenced), ("yaml_block", _pem_yaml), ("bare", _pem_bare)),
    # A key inside a JSON string (a service-account file, an escaped env value) is on
    # one line, with `\n` escapes instead of line breaks.
    "pem_pkcs8_private_key": (
        ("fence", _pem_fenced),
        ("yaml_block", _pem_yaml),
        ("json_escaped", _pem_json_escaped),
    ),
    "pem_openssh_private_key": (
        ("fence", _pem_fenced),
        ("yaml_block", _pem_yaml),
        ("json_escaped", _pem_json_escaped),
    ),
}


@dataclass(frozen=True)
class Positive:
    """A note holding one fake credential of `format` starting on `line` (1-based)."""

    format: str
    index: int
    placement: str
    note: str
    secret: str
    material: str
    line: int
    rule_tokens: frozenset[str]

    @property
    def id(self) -> str:
        return f"{self.format}-{self.index}-{self.placement}"


def _place(
    rng: random.Random, fmt: Format, credential: Credential, slot: int
) -> tuple[str, list[str], int]:
    if fmt.multiline:
        options = _PEM_PLACEMENTS.get(fmt.name, _PEM_PLACEMENTS["default"])
        name, builder = options[slot % len(options)]
    else:
        url_safe = URL_SAFE.fullmatch(credential.text) is not None
        usable = [p for p in SINGLE_LINE_PLACEMENTS if p[0] != "url" or url_safe]
        name, builder = usable[slot % len(usable)]
    payload, focus = builder(credential.text, rng.choice(_ENV_NAMES))
    return name, payload, focus


@functools.cache
def positives() -> tuple[Positive, ...]:
    """Three fake credentials per format, each in its own note."""
    rng = random.Random(SEED)
    result = []
    for format_index, fmt in enumerate(FORMATS):
        for index in range(SAMPLES_PER_FORMAT):
            credential = fmt.generate(rng)
            if fmt.last_chars and index > 0:
                credential = _ending_with(credential, fmt.last_chars[index % len(fmt.last_chars)])
            slot = format_index * SAMPLES_PER_FORMAT + index
            placement, payload, focus = _place(rng, fmt, credential, slot)
            note, line = _wrap_note(rng, payload, focus)
            result.append(
                Positive(
                    fmt.name,
                    index,
                    placement,
                    note,
                    credential.text,
                    credential.material,
                    line,
                    fmt.rule_tokens,
                )
            )
    return tuple(result)


@dataclass(frozen=True)
class MultiSecretNote:
    """A note with several secrets on different lines: `(line, format)` in line order."""

    note: str
    expected: tuple[tuple[int, str], ...]
    materials: tuple[str, ...]


_MULTI_FORMATS = (
    "aws_access_key_id",
    "github_classic_pat",
    "pem_rsa_private_key",
    "slack_bot_token",
    "stripe_secret_live",
    "anthropic_api_key",
    "memsync_token",
)


@functools.cache
def multi_secret_note() -> MultiSecretNote:
    """Several formats in one note, with prose between them."""
    rng = random.Random(SEED + 1)
    lines = [_heading(rng), "", _paragraph(rng), ""]
    expected = []
    materials = []
    for slot, name in enumerate(_MULTI_FORMATS):
        fmt = FORMATS_BY_NAME[name]
        credential = fmt.generate(rng)
        _, payload, focus = _place(rng, fmt, credential, slot * 5)
        expected.append((len(lines) + focus + 1, name))
        materials.append(credential.material)
        lines += [*payload, "", _paragraph(rng), ""]
    return MultiSecretNote("\n".join(lines), tuple(expected), tuple(materials))


@dataclass(frozen=True)
class SameLineNote:
    """A note with two secrets of one format on the same `line`."""

    format: str
    note: str
    line: int
    rule_tokens: frozenset[str]


_SAME_LINE_FORMATS = (
    "aws_access_key_id",
    "github_classic_pat",
    "slack_bot_token",
    "stripe_secret_live",
    "openai_legacy_key",
    "gitlab_pat",
    "memsync_token",
)


@functools.cache
def same_line_notes() -> tuple[SameLineNote, ...]:
    """For each of a few formats, a rotation note naming the old and the new secret."""
    rng = random.Random(SEED + 2)
    result = []
    for name in _SAME_LINE_FORMATS:
        fmt = FORMATS_BY_NAME[name]
        old, new = fmt.generate(rng).text, fmt.generate(rng).text
        payload = [f"- rotated {old} to {new}, both were in the old notes"]
        note, line = _wrap_note(rng, payload, 0)
        result.append(SameLineNote(name, note, line, fmt.rule_tokens))
    return tuple(result)


# ---------------------------------------------------------------------------------------
# Negatives

# Random strings are redrawn if they happen to contain a provider prefix: such a string
# would be a fair positive, not a negative.
_HAZARDS = re.compile(
    r"AKIA|ASIA|AIza|EAAA|eyJ|HRKU|PMAK|ops_|gl[a-z]{0,3}[_-]|gh[pousr]_|npm_|hf_|dop_|"
    r"xox|xapp|sk[-_]|rk_|SG\.|SK[0-9a-fA-F]|dapi|pul-|mst_|shp|sntry|lin_|hvs\.|dckr"
)


def _safe(draw: Callable[[], str]) -> str:
    while True:
        value = draw()
        if not _HAZARDS.search(value):
            return value


def _sha(rng: random.Random, nbytes: int = 20) -> str:
    return rng.randbytes(nbytes).hex()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass(frozen=True)
class Negative:
    """A note that must produce no findings."""

    category: str
    index: int
    note: str

    @property
    def id(self) -> str:
        return f"{self.category}-{self.index}"


_NegativePayload = Callable[[random.Random, int], list[str]]


def _neg_git_shas(rng: random.Random, index: int) -> list[str]:
    full, other, third = _sha(rng), _sha(rng), _sha(rng)
    return [
        f"Fixed in {full[:7]} (full hash {full}); the regression came from {other[:10]}.",
        "",
        "```",
        f"$ git cherry-pick {other}",
        f"$ git log --oneline {third[:7]}..{full[:7]}",
        f"Merge: {other[:7]} {third[:7]}",
        "```",
        f"- revert {third} if the canary fails",
    ]


# -- developer platforms, CI and hosting --


def _slug(rng: random.Random, start: str, length: int) -> str:
    """`start` and dash-separated words, cut to `length` characters (a name, not a key)."""
    words = ("east", "1", "prod", "api", "gateway", "worker", "blue", "v2", "canary", "eu")
    text = start
    while len(text) < length:
        text += "-" + rng.choice(words)
    text = text[:length]
    return text[:-1] + "x" if text.endswith("-") else text


def _neg_prefixed_lookalikes(rng: random.Random, index: int) -> list[str]:
    group = index % 6
    lower = string.ascii_lowercase
    if group == 0:  # Atlassian, GitLab
        return [
            "Atlassian API tokens start with ATATT3 and are 192 characters long; ours is in "
            "the vault, not here (`ATATT3xFfGF0...`).",
            f"- truncated in the log: ATATT3{_chars(rng, URLSAFE, 185)}",
            f"- GitLab feed tokens look like glft-{_chars(rng, URLSAFE, 19)} (one short) and "
            f"the old one glft-{_chars(rng, ALNUM, 21)} (one long)",
            f"- CI_JOB_TOKEN is glcbt-{_chars(rng, HEX, 2)}_{_chars(rng, URLSAFE, 19)} in "
            "the job log excerpt, cut by the runner",
            "- a job token is glcbt- and a JWT (header.payload.signature); glcbt-eyJhbGciOi "
            f"and glcbt-{_jwt(rng).split('.', 1)[0]}.{_chars(rng, URLSAFE, 30)} are cut",
            f"- `glimt-{_chars(rng, BASE36, 24)}`, `glagent-{_chars(rng, URLSAFE, 49)}`, "
            f"`gloas-{_chars(rng, HEX, 63)}` were partial copies",
            "- the UNLEASH_INSTANCE_ID is glffct-test in staging; glsoat- tokens are for SCIM "
            f"(glsoat-{_chars(rng, URLSAFE, 19)} is one short)",
            f"- cookie _gitlab_session={_chars(rng, HEX, 31)} expired; "
            f"_gitlab_session={_uuid(rng)} is the new format in the proxy log",
            f"- runner glrt-t1_{_chars(rng, ALNUM, 12)} was never registered",
        ]
    if group == 1:  # Sourcegraph, RubyGems, Clojars, ReadMe, Prefect
        return [
            f"Sourcegraph indexed commit {_sha(rng)} at 09:14; search for sgp_ in the logs.",
            f"- sgp_{_chars(rng, HEX, 39)} and sgp_local_{_chars(rng, lower, 40)} are not tokens",
            f"- rubygems_{_chars(rng, HEX, 47)} is short; `rubygems_api_key` is the env name",
            "- export CLOJARS_USERNAME and CLOJARS_DEPLOY_TOKEN from the vault; "
            f"CLOJARS_{_chars(rng, HEX, 59)} was cut",
            f"- the hex id CLOJARS_{_chars(rng, HEX, 60).upper()} is upper-case, not a token",
            f"- rdme_{_chars(rng, LOWER_ALNUM, 69)} (short) and rdme_{_chars(rng, ALNUM, 70)}",
            f"- pnu_{_chars(rng, ALNUM, 35)} is one character short",
        ]
    if group == 2:  # Infracost, Scalingo, Frame.io, Defined Networking, OpenShift
        return [
            "Icons: "
            f'`<i class="ico-{_chars(rng, lower, 32)}"></i>` and ico-{_chars(rng, ALNUM, 31)}.',
            f"- cluster {_slug(rng, 'tk-us', 54)} runs the API",
            f"- tk-us-{_chars(rng, URLSAFE, 47)} is truncated",
            f"- fio-u-{_chars(rng, URLSAFE, 63)} (short); Frame.io tokens start with fio-u-",
            f"- dnkey-{_chars(rng, URLSAFE, 26)}-{_chars(rng, URLSAFE, 51)} lost a character",
            f"- image digest sha256:{_sha(rng, 32)}; the token sha256~{_chars(rng, URLSAFE, 42)}"
            " was cut",
            f"- sha256~{_chars(rng, URLSAFE, 44)} is one too long",
        ]
    if group == 3:  # SettleMint, Intra 42, Authress
        return [
            "SettleMint tokens start sm_aat_, sm_pat_ or sm_sat_; the metric is sm_pat_count.",
            f"- sm_pat_{_chars(rng, ALNUM, 15)} is short and sm_sat_{_chars(rng, lower, 16)} "
            "is a name",
            f"- s-s4t2ud-{_chars(rng, HEX, 63)} is short; s-s4t2xx-{_chars(rng, HEX, 64)} "
            "is not a 42 prefix",
            "- config path sc_frontend.conf.acc_user-profile.load_user_profile_from_remote_cache",
            f"- ext_{_chars(rng, lower, 8)}.util.acc-{_chars(rng, lower, 12)}."
            f"{_chars(rng, lower, 40)}",
        ]
    if group == 4:  # ClickHouse, Harness, Octopus
        hex42 = "4b1d" + _chars(rng, HEX, 38)
        dotted = ".".join(
            _chars(rng, lower, 1).upper() + _chars(rng, lower, size - 1) for size in (22, 24, 20)
        )
        return [
            f"The digest 4b1d{_sha(rng, 31)} and the id {hex42} are hex, not keys.",
            f"- request API-01{_chars(rng, '0123456789ABCDEFGHJKMNPQRSTVWXYZ', 24)} (a ULID) and "
            f"asset ico-{_sha(rng, 16)}.png",
            f"- upper-case hex {hex42.upper()} and 4b1d{_chars(rng, LOWER_ALNUM, 38)}",
            f"- pat.{dotted} is a dotted name; see pat. 7 and sat. 12 of the contract",
            f"- org.pat.{_chars(rng, URLSAFE, 22)}.{_chars(rng, HEX, 24)}.{_chars(rng, ALNUM, 20)}"
            " is a Java package path",
            f"- sat.{_chars(rng, URLSAFE, 22)}.{_chars(rng, HEX, 24)}.{_chars(rng, ALNUM, 19)}"
            " was cut",
            "- API-VERSIONINGANDCOMPATIBILITY, API-KEY-REQUIRED and API-2024 are headings",
            f"- API-{_chars(rng, string.ascii_uppercase, 25)}1 has one digit; "
            f"API-{_chars(rng, UPPER_ALNUM, 25)} is short",
        ]
    # PlanetScale, Fly.io, Slack legacy tokens and webhooks
    team = "T" + _chars(rng, UPPER_ALNUM, 9)
    return [
        "PlanetScale passwords start with pscale_pw_ and tokens with pscale_tkn_.",
        f"- pscale_tkn_{_chars(rng, URLSAFE, 31)} (short), "
        f"pscale_oauth_{_chars(rng, URLSAFE, 65)} (too long)",
        f"- fo1_{_chars(rng, URLSAFE, 42)} is short; FlyV1 fm2_... in the docs",
        f"- fm2_{_b64(rng.randbytes(72))} is too short for a macaroon",
        "- Slack legacy tokens (xoxo-, xoxs-) are gone; xoxa-yourtokenhere in the sample",
        f"- xoxs-{_chars(rng, DIGITS, 10)}-{_chars(rng, DIGITS, 10)}-{_chars(rng, DIGITS, 10)}"
        f"-{_chars(rng, HEX, 15)} and xoxr-{_chars(rng, ALNUM, 7)} are cut",
        f"- https://hooks.slack.com/workflows/{team}/A{_chars(rng, UPPER_ALNUM, 9)}/"
        f"{_chars(rng, DIGITS, 18)}/{_chars(rng, ALNUM, 22)} lost its end",
        f"- https://hooks.slack.com/triggers/{team}/{_chars(rng, DIGITS, 13)}/"
        f"{_chars(rng, HEX, 31)} too",
        f"- https://hooks.slack.com/triggers/{team}/{_chars(rng, DIGITS, 13)}/"
        f"{_chars(rng, 'ghijklmnopqrstuvwxyz', 32)} is not hex",
    ]


def _neg_digests(rng: random.Random, index: int) -> list[str]:
    sha256, sha512, md5 = _sha(rng, 32), _sha(rng, 64), _sha(rng, 16)
    integrity = _b64(rng.randbytes(64))
    service = rng.choice(_SERVICES)
    return [
        f"Pinned the base image to registry.example.com/{service}@sha256:{_sha(rng, 32)}.",
        "",
        "```",
        f"SHA256 (memsync-0.{index}.0.tar.gz) = {sha256}",
        f"sha512: {sha512}",
        f"md5: {md5}",
        "```",
        "",
        "```json",
        f'"integrity": "sha512-{integrity}",',
        f'"resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.{index}.0.tgz"',
        "```",
        f"Checksum of the export: `{sha256.upper()}` (upper-case, as the vendor prints it).",
        f"- bucket: logs-{_sha(rng, 16)}-us-east-{rng.randint(1, 2)}",
    ]


def _neg_uuids(rng: random.Random, index: int) -> list[str]:
    return [
        f"Request id {_uuid(rng)} failed with a 502; retry id {_uuid(rng)} went through.",
        "",
        "```yaml",
        f"tenant_id: {_uuid(rng)}",
        f"client_id: {_uuid(rng)}",
        f"subscription: {_uuid(rng).upper()}",
        "```",
        f"- trace: `{_uuid(rng).replace('-', '')}`",
    ]


# -- cloud, AI, payment and messaging providers --


def _prefixed_format_near_misses(rng: random.Random) -> list[str]:
    """One line per near miss: a character short or long, a public key, a placeholder."""

    def hex_(count: int) -> str:
        return _chars(rng, HEX, count)

    def alnum(count: int) -> str:
        return _chars(rng, ALNUM, count)

    def upper_groups(alphabet: str, sizes: Sequence[int]) -> str:
        return "-".join(_chars(rng, alphabet, size) for size in sizes)

    guid = _uuid(rng)
    bedrock_garbage = _b64(rng.randbytes(100))
    bedrock_no_account = _b64(f"BedrockAPIKey-{alnum(4)}:{_b64(rng.randbytes(44))}".encode())
    bedrock_unsigned = _b64(
        f"bedrock.amazonaws.com/?Action=ListFoundationModels&page={rng.randint(2, 9)}"
        f"&region=us-east-1&byProvider=anthropic&nextToken={alnum(40)}".encode()
    )
    return [
        f"- the old kit showed A3-{upper_groups(UPPER_ALNUM, (6, 6, 5, 5, 5))} (one group lost)",
        f"- part number A3-{upper_groups(string.ascii_uppercase, (6, 6, 5, 5, 5, 5))} is a brake",
        "- print the poster A3-sized; the A3-format tray is on floor 2",
        f"- Notion id ntn_{_chars(rng, DIGITS, 10)}{rng.choice(LETTERS)}{alnum(35)} is too short",
        "- `ntn_sync_worker` copies the Notion database every hour",
        "- `secret_ProductionDatabasePassword2024ForAdminUser1` names a vault entry, and "
        f"secret_{_chars(rng, HEX, 43)} is a digest",
        f"- secret_{_chars(rng, string.ascii_uppercase + DIGITS, 43)} is an upper-case id",
        f"- cached blob ABSK{bedrock_garbage} (not a Bedrock key)",
        f"- half-pasted ABSK{bedrock_no_account} lacks the account",
        f"- bedrock-api-key-{bedrock_unsigned} is an unsigned URL",
        "- the Lambda is called `bedrock-api-key-rotation`",
        f"- pplx-{alnum(47)} is a character short; we use pplx-70b-online",
        f"- gsk_{alnum(47)} and xai-{alnum(79)} were truncated in the paste",
        "- install xai-sdk and read xai-org/grok-1 before the Groq gsk_config review",
        f"- Dynatrace token id dt0c01.{_chars(rng, AWS_BASE32, 24)} (the public part only)",
        f"- dt0c01.{_chars(rng, AWS_BASE32, 24)}.{_chars(rng, AWS_BASE32, 63)} is one short",
        f"- shippo_live_{hex_(39)} and shippo_test_{hex_(20)}g{hex_(19)} are malformed",
        f"- EZAK{alnum(53)} is short and EZTK{alnum(55)} is long",
        f"- duffel_test_{_chars(rng, URLSAFE, 42)} lost a character; set duffel_live_mode",
        f"- public keys: FLWPUBK_TEST-{hex_(32)}-X and FLWPUBK-{hex_(32)}-X",
        f"- FLWSECK_TEST-{hex_(31)}-X and FLWSECK_TEST{hex_(11)} are cut off",
        f"- MaxMind: {alnum(6)}_{alnum(28)}_mmk is short, see `geoip_city_mmk`",
        f"- {alnum(7)}_{alnum(29)}_mmk has a 7-character head",
        f"- xkeysib-{hex_(63)}-{alnum(16)} and xsmtpsib-{hex_(64)}-{alnum(15)} are truncated",
        "- Teams: https://your-org.webhook.office.com/webhookb2/<group-id>@<tenant-id>"
        "/IncomingWebhook/<token>/<owner-id>",
        f"- https://acme.webhook.office.com/webhookb2/{guid}/IncomingWebhook/{hex_(32)}/{guid}",
        f"- https://acme.webhook.office.com/webhookb2/{guid}@{_uuid(rng)}/IncomingWebhook/"
        f"{hex_(31)}/{_uuid(rng)}",
        f"- v1.0-{hex_(24)}-{hex_(145)} is one short; we shipped v1.0-rc2",
        f"- LTAI{alnum(19)} is short, LTAI{alnum(21)} is long; ALTAIR is a star",
        f"- p8e-{alnum(31)} lost a character",
        f"- EAAM{alnum(99)} is short",
        f"- blob {alnum(20)}/EAAC{alnum(120)}+{alnum(20)}",
        f"- publishable pk_prod_{alnum(24)}; `sk_prod_config` is a module",
        "- https://username:password@gems.contribsys.com/ in the Sidekiq docs",
        "- BUNDLE_GEMS__CONTRIBSYS__COM=${SIDEKIQ_CREDENTIALS}",
        f"- https://{hex_(8)}:{hex_(7)}@enterprise.contribsys.com/ is cut off",
        "- bundle config --local gems.contribsys.com $SIDEKIQ_USER:$SIDEKIQ_PASS",
        f"- AKCp{rng.choice(LETTERS)}{alnum(68)} has a letter where the digit goes;"
        f" AKCp{rng.choice(DIGITS)}{alnum(67)} is one short",
        f"- AKCp{rng.choice(DIGITS)}{_chars(rng, string.ascii_lowercase, 68)} is lower case",
        "- cmVmdGtuOjAxOj"
        + _b64(f"{alnum(10)}:{alnum(27)}".encode())[:50]
        + " decodes to no reference token",
    ]


_PREFIXED_FORMATS_PER_NOTE = 3


# Enough notes for every near miss, however many the list holds.
_PREFIXED_FORMATS_NOTES = -(
    -len(_prefixed_format_near_misses(random.Random(0))) // _PREFIXED_FORMATS_PER_NOTE
)


def _neg_prefixed_formats(rng: random.Random, index: int) -> list[str]:
    lines = _prefixed_format_near_misses(rng)
    chosen = lines[index * _PREFIXED_FORMATS_PER_NOTE : (index + 1) * _PREFIXED_FORMATS_PER_NOTE]
    return ["Near misses from the provider docs (none is a credential):", "", *chosen]


def _neg_base64_blobs(rng: random.Random, index: int) -> list[str]:
    size = (12, 16, 24, 32, 48, 64, 96, 128, 300, 700)[index % 10]
    urlsafe = index % 3 == 0
    blob = _safe(lambda: (_b64url if urlsafe else _b64)(rng.randbytes(size)))
    if len(blob) > 100:
        width = 76 if index % 2 else 64
        return ["The cached blob, base64:", "", "```text", *_wrap(blob, width), "```"]
    png = _safe(lambda: "iVBORw0KGgoAAAANSUhEUg" + _b64(rng.randbytes(45)))
    return [
        f"The cursor for the next page is `{blob}` and it expires in an hour.",
        f'- nonce: "{_safe(lambda: _b64(rng.randbytes(16)))}"',
        f"![dot](data:image/png;base64,{png})",
    ]


def _neg_random_ids(rng: random.Random, index: int) -> list[str]:
    def draw(low: int, high: int) -> str:
        return _safe(lambda: _chars(rng, ALNUM, rng.randint(low, high)))

    pod_suffix = _chars(rng, "bcdfghjklmnpqrstvwxz2456789", 5)
    pod = f"{rng.choice(_SERVICES)}-{_chars(rng, HEX, 9)}-{pod_suffix}"
    return [
        f"Trace {draw(20, 40)} shows the slow span in the ledger call.",
        f"- object key: uploads/2024/{draw(30, 60)}.bin",
        f"- pod: {pod}",
        f"Next page: https://api.example.com/v1/events?cursor={draw(40, 80)}&limit=100",
        f"{draw(20, 80)}",
    ]


# -- tokens other scanners find only near a keyword --
# Near misses of the formats found by shape alone: one character short, a public
# counterpart, a name or hash after the same prefix, a documentation route.


def _shape_dropbox(rng: random.Random) -> list[str]:
    return [
        "Dropbox tokens from the app console start with `sl.` and expire after four hours.",
        f"- truncated in the log: sl.B{_chars(rng, URLSAFE, 128)}",
        f"- a slug, not a token: sl.{_chars(rng, string.ascii_lowercase, 135)}",
        f"- one short: {_chars(rng, ALNUM, 11)}{'A' * 10}{_chars(rng, URLSAFE, 42)}",
        f"- a word run: {_chars(rng, ALNUM, 11)}{'A' * 10}{_chars(rng, LETTERS.lower(), 43)}",
        f"- zero-filled buffer: {'A' * 64}",
        "",
        "Fixed-size records with zero padding, base64url, wrapped at 64:",
        "",
        "```text",
        *_wrap(_b64url(b"".join(_dropbox_long_lived_bytes(rng) for _ in range(4))), 64),
        "```",
    ]


def _shape_mailgun_mapbox(rng: random.Random) -> list[str]:
    jwt_header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    return [
        "Mailgun: the public validation key is fine to ship, the private one is not.",
        f"- public: pubkey-{_chars(rng, BASE36, 32)}",
        f"- Redis entry key-{_sha(rng, 16)} holds the rendered template",
        f"- cache-key-{_chars(rng, BASE36, 32)} and s3://exports/key-{_chars(rng, BASE36, 32)}",
        f"- one short: key-{_chars(rng, BASE36, 31)}",
        f"Mapbox public token (it ships in the page): {_mapbox_token(rng, 'pk').text}",
        f"- a signed value, not a Mapbox token: sk.{jwt_header}.{_chars(rng, URLSAFE, 22)}",
        "- secret tokens start with sk.eyJ and public ones with pk.eyJ",
    ]


def _shape_new_relic(rng: random.Random) -> list[str]:
    return [
        "New Relic browser agent snippet (the browser key is in every page's source):",
        "",
        "```js",
        f'NREUM.loader_config = {{accountID: "{_chars(rng, DIGITS, 7)}", '
        f'licenseKey: "NRJS-{_chars(rng, HEX, 19)}"}};',
        "```",
        f"- one short: NRAK-{_chars(rng, UPPER_ALNUM, 26)} and NRII-{_chars(rng, ALNUM, 31)}",
        "- placeholder from the docs: NRAK-" + "X" * 27,
        f"- license key placeholder: {_chars(rng, HEX, 32)}FFFFNRAL",
        f"- one short: {_chars(rng, HEX, 35)}NRAL; NRAL alone is just the suffix",
    ]


def _shape_plaid(rng: random.Random) -> list[str]:
    return [
        "Plaid Link hands the browser a public token, which the server exchanges:",
        f"- public_token: public-sandbox-{_uuid(rng)}",
        f"- link_token: link-production-{_uuid(rng)}",
        f"- not an environment: access-staging-{_uuid(rng)}",
        f"- a role name: role/access-production-{_uuid(rng)}",
        f"- truncated: access-sandbox-{_uuid(rng)[:-1]}",
    ]


def _shape_typeform_yandex(rng: random.Random) -> list[str]:
    snake = "_".join(
        rng.choice(["form", "response", "hidden", "field", "webhook"]) for _ in range(12)
    )
    return [
        f"- one short: tfp_{_chars(rng, URLSAFE, 58)}",
        f"- a Terraform field, not a token: tfp_{snake[:59]}",
        "- the bastion runs on t1.micro, the workers on t1.small",
        f"- truncated IAM token: t1.9euelZ{_chars(rng, URLSAFE, 60)}.{_chars(rng, URLSAFE, 85)}",
        f"- one short: AQVN{_chars(rng, URLSAFE, 34)}",
    ]


def _shape_twitter(rng: random.Random) -> list[str]:
    return [
        "An AES-GCM record with a zero IV, base64 (a test vector, not a token):",
        "",
        "```text",
        _b64(bytes(16) + rng.randbytes(57)),
        "```",
        "- empty buffer: " + "A" * 59 + "=",
    ]


def _shape_lob_gocardless(rng: random.Random) -> list[str]:
    return [
        "Lob publishable keys are safe in the browser:",
        f"- test_pub_{_chars(rng, HEX, 31)} and live_pub_{_chars(rng, HEX, 31)}",
        f"- fixture test_{_sha(rng, 16)} and snapshot test_{_sha(rng)}",
        f"- pytest id my_test_{_chars(rng, HEX, 35)}",
        "- flag live_migration_downtime_threshold_seconds and "
        f"live_{'_'.join(['stream', 'configuration', 'for', 'the', 'main', 'sites'])}1",
        f"- one short: live_{_chars(rng, URLSAFE, 39)}",
    ]


def _shape_discord(rng: random.Random) -> list[str]:
    snowflake = rng.choice("123456789") + _chars(rng, DIGITS, 18)
    return [
        "Discord webhooks: POST https://discord.com/api/webhooks/{webhook.id}/{webhook.token}",
        "- docs: https://discord.com/api/webhooks/<id>/<token>",
        f"- messages: https://discord.com/api/v10/channels/{snowflake}/messages",
        f"- truncated: https://discordapp.com/api/webhooks/{snowflake}/{_chars(rng, URLSAFE, 20)}",
        f"- placeholder: https://discord.com/api/webhooks/{snowflake}/" + "x" * 68,
    ]


_SHAPE_NEAR_MISSES = (
    _shape_dropbox,
    _shape_mailgun_mapbox,
    _shape_new_relic,
    _shape_plaid,
    _shape_typeform_yandex,
    _shape_twitter,
    _shape_lob_gocardless,
    _shape_discord,
)


def _neg_shape_tokens(rng: random.Random, index: int) -> list[str]:
    return _SHAPE_NEAR_MISSES[index % len(_SHAPE_NEAR_MISSES)](rng)


def _jwt(rng: random.Random) -> str:
    header = rng.choice(
        [
            {"alg": "HS256", "typ": "JWT"},
            {"alg": "RS256", "typ": "JWT", "kid": _chars(rng, ALNUM, 12)},
            {"typ": "JWT", "alg": "ES256"},
        ]
    )
    payload = {
        "sub": _uuid(rng),
        "iss": "https://auth.example.com/",
        "aud": "notes-api",
        "iat": 1_700_000_000 + rng.randint(0, 10**7),
        "exp": 1_800_000_000 + rng.randint(0, 10**7),
    }
    signature = _b64url(rng.randbytes(rng.choice([32, 64, 256])))
    parts = [_b64url(json.dumps(part).encode()) for part in (header, payload)]
    return ".".join([*parts, signature])


def _neg_jwts(rng: random.Random, index: int) -> list[str]:
    return [
        "The test fixture token decodes to a user that no longer exists:",
        "",
        "```json",
        f'{{"access_token": "{_jwt(rng)}", "token_type": "Bearer"}}',
        "```",
        f"- id_token in the redirect: https://app.example.com/callback#id_token={_jwt(rng)}",
    ]


def _placeholders() -> tuple[str, ...]:
    return (
        "AKIA" + "X" * 16,
        "AKIA" + "IOSFODNN7" + "EXAMPLE",
        "AKIA" + "I44QH8DHB" + "EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY" + "EXAMPLEKEY",
        "sk-...",
        "sk-ant-...",
        "sk-proj-...",
        "ghp_...",
        "ghp_" + "x" * 36,
        "ghp_abc123",
        "github_pat_...",
        "<token>",
        "<your-api-key>",
        "sk_live_...",
        "xoxb-your-token",
        "xoxb-" + "X" * 12 + "-" + "X" * 12 + "-" + "X" * 24,
        "hf_***",
        "glpat-" + "X" * 20,
        "${GITHUB_TOKEN}",
        "$OPENAI_API_KEY",
        "AIza...",
        "dop_v1_...",
        "npm_" + "x" * 36,
        "ghp_" + "*" * 32 + "a1B2",
        "AKIA" + "*" * 12 + "WXYZ",
        "sk-proj-…" + "Q3xZ",
        "sk_live_" + "•" * 20 + "4242",
        "xoxb-…",
        "[REDACTED]",
    )


def _neg_placeholders(rng: random.Random, index: int) -> list[str]:
    values = _placeholders()
    value = values[index % len(values)]
    env = rng.choice(_ENV_NAMES)
    context = index // len(values)
    if context == 0:
        return [
            f"Set `{env}` to your own key, e.g. `{value}`, before running the script.",
            "",
            "```bash",
            f"{env}={value}",
            "```",
        ]
    return [
        "Example config from the vendor docs (replace the placeholder):",
        "",
        "```yaml",
        f"{env.lower()}: {value}",
        f'header: "Authorization: Bearer {value}"',
        "```",
        f"- never commit the real value; the docs show {value}",
    ]


# -- context rules --

_PATH_WORDS = ("src", "billing", "Handlers", "worker", "RetryPolicy", "exports", "Tests", "nightly")


def _forty_char_path(rng: random.Random) -> str:
    """A path of words and a version, cut to exactly 40 characters."""
    segments = [rng.choice(_PATH_WORDS), f"v{rng.randint(2, 9)}"]
    while len("/".join(segments)) < 40:
        segments.append(rng.choice(_PATH_WORDS))
    path = "/".join(segments)[:40]
    return path if not path.endswith("/") else path[:-1] + "s"


def _neg_context_lookalikes(rng: random.Random, index: int) -> list[str]:
    """Near misses of the context rules: no real AWS secret beside a key id, no real
    password in a database URL."""
    key_id = _MASKED_KEY_IDS[index % 2]
    service = rng.choice(_SERVICES)
    kind = index % 14
    if kind == 0:  # 40-character strings that are not base64 secrets, beside a key id
        return [
            "```ini",
            "[profile ci]",
            f"aws_access_key_id = {key_id}",
            f"source_commit = {_sha(rng)}",
            f"source_commit_upper = {_sha(rng).upper()}",
            f"role_session_name = {_chars(rng, string.ascii_lowercase + DIGITS, 40)}",
            f"build_label = {_chars(rng, string.ascii_uppercase + DIGITS, 40)}",
            f"artifact_name = {_safe(lambda: _chars(rng, LETTERS, 40))}",
            "```",
        ]
    if kind == 1:  # a path of exactly 40 characters
        return [
            f"- key id {key_id}",
            f"- artifact: {_forty_char_path(rng)}",
            f"- logs under s3://{service}-logs/{_forty_char_path(rng)}.gz",
        ]
    if kind == 2:  # base64 in a certificate right below the key id (a 40-char last line)
        block = _pem("CERTIFICATE", b"\x30\x82\x03\x8b" + rng.randbytes(48 * 12 + 26)).text
        return ["```", f"aws_access_key_id = {key_id}", *block.split("\n"), "```"]
    if kind == 3:  # the key id two paragraphs away from a secret-shaped string
        return [
            f"The CI user's key id is {key_id}; the secret is in the vault.",
            "",
            _paragraph(rng),
            "",
            f"Unrelated: the export cursor was {_safe(lambda: _aws_secret(rng))} yesterday.",
        ]
    if kind == 4:  # one character short or long, and a slice of a longer base64url token
        return [
            "```bash",
            f"AWS_ACCESS_KEY_ID={key_id}",
            f"AWS_SECRET_ACCESS_KEY={_aws_secret(rng)[:39]}",
            f"AWS_SESSION_NOTE={_aws_secret(rng)}{rng.choice(ALNUM)}",
            f"UPLOAD_CURSOR=v1_{_aws_secret(rng).replace('/', 'a').replace('+', 'b')}",
            f"TRACE_ID={_aws_secret(rng).replace('/', '-').replace('+', '_')}-{rng.randint(1, 99)}",
            "```",
        ]
    if kind == 5:  # the documentation's own example pair
        return [
            "From the AWS CLI guide:",
            "```",
            "aws_access_key_id = AKIA" + "IOSFODNN7" + "EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCY" + "EXAMPLEKEY",
            "```",
        ]
    if kind == 6:  # stand-ins of the secret
        return [
            "```yaml",
            "aws:",
            f"  access_key_id: {key_id}",
            "  secret_access_key: " + "X" * 40,
            "  secret_access_key_old: " + "Ab1" + "Z" * 37,
            "  secret_access_key_docs: " + ("abcdefghijklmnopqrstuvwxyz0123456789ABCD"),
            "```",
        ]
    urls = (
        (
            "postgres://user:password@localhost:5432/app",
            "mysql://root:root@127.0.0.1:3306/app",
            "postgresql://postgres:postgres@db:5432/postgres",
            "mongodb://admin:changeme@mongo:27017/admin",
            "redis://:${REDIS_PASSWORD}@redis:6379/0",
        ),
        (
            "amqp://guest:guest@rabbitmq:5672/",
            "postgres://app:$DB_PASSWORD@db:5432/app",
            "mysql://app:%(password)s@db/app",
            "postgresql://app:{{ db_password }}@db/app",
            "mongodb+srv://app:<password>@cluster0.example.mongodb.net/notes",
        ),
        (
            "postgres://app:[password]@db/app",
            "redis://:xxxxxxxxxx@cache:6379/0",
            "mysql://app:**********@db/app",
            "postgres://app:aaaaaaaaaaaa@db/app",
            "postgres://deploy:deploy@db/app",
            "clickhouse://default:@clickhouse:8123/default",
        ),
        (
            "postgresql://scott:tiger@localhost/mydatabase",
            "postgres://postgres:mysecretpassword@localhost:5432/postgres",
            "redis://:foobared@localhost:6379",
            "mysql://app:example123@db/app",
            "postgres://app:test1234@db/app",
            "postgres://app:dummy-pass-2024@db/app",
        ),
        (
            "postgres://db.internal:5432/app",
            "mongodb://mongo-0:27017,mongo-1:27017/?replicaSet=rs0",
            f"redis://{service}-cache:6379/0",
            "postgres://app@db/app",
            "sqlserver://sql.internal:1433;databaseName=app",
            "jdbc:postgresql://db:5432/app?user=app&password=${DB_PASSWORD}",
        ),
        (
            "postgres://app:Password1@db/app",
            "mysql://app:Admin2024!@db/app",
            "cockroachdb://root:root@crdb:26257/defaultdb",
            "mssql://sa:YourStrong!Passw0rd@localhost:1433",
            "postgres://app_user:app_user2024@db/app",
            "amqps://events:CHANGE_ME_IN_PROD@mq.internal:5671/",
        ),
        (
            "postgres://app:12345678@db/app",
            "redis://:REDIS_PASSWORD@cache:6379",
            "mysql://app:%PASSWORD%@db/app",
            "postgres://app:s3cr3t@db/app",
            "mongodb://app:hunter2@mongo/app",
            "postgresql+psycopg://ledger:ledgerledger1@db/ledger",
        ),
    )[kind - 7]
    return [
        "Connection strings from the setup guide (replace the values):",
        "",
        "```bash",
        *(f"DATABASE_URL_{number}={url}" for number, url in enumerate(urls)),
        "```",
        f"- in prose: connect with `{urls[0]}` and then `{urls[-1]}`.",
    ]


_PROVIDER_ENV = ("OPENAI_API_KEY", "HF_TOKEN", "SENTRY_AUTH_TOKEN", "PYPI_API_TOKEN")


def _neg_env_var_names(rng: random.Random, index: int) -> list[str]:
    return [
        "Variables the deploy needs (values live in the vault, not here):",
        "",
        "```bash",
        "AWS_ACCESS_KEY_ID=",
        "AWS_SECRET_ACCESS_KEY=",
        "export STRIPE_SECRET_KEY",
        "export SLACK_BOT_TOKEN=$(vault read -field=token secret/slack)",
        "```",
        "",
        "```yaml",
        "env:",
        "  GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
        "  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
        "```",
        '- read it with `os.environ["ANTHROPIC_API_KEY"]` or '
        f"`process.env.{_PROVIDER_ENV[index % len(_PROVIDER_ENV)]}`",
    ]


def _neg_curl_examples(rng: random.Random, index: int) -> list[str]:
    return [
        "How to call the API by hand:",
        "",
        "```bash",
        'curl -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/me',
        'curl -H "X-API-Key: ${API_KEY}" "https://api.example.com/v1/items?page=2"',
        'curl -u "$DEPLOY_USER:$DEPLOY_PASSWORD" https://ci.example.com/job/build',
        "npm config set //registry.npmjs.org/:_authToken=${NPM_TOKEN}",
        'twine upload -u __token__ -p "$PYPI_TOKEN" dist/*',
        "gh auth login --with-token < ~/.config/gh/token.txt",
        "```",
    ]


_SECRET_PROSE = (
    "Rotate the Slack bot token every 90 days; the GitHub PAT lives in 1Password.",
    "Never paste an AWS access key into a note. Access key ids start with AKIA and the "
    "secret access key is 40 characters.",
    "Our memsync tokens start with mst_ and end in a CRC32 checksum, like GitHub's ghp_ "
    "tokens, so scanners can spot them.",
    "The password policy: 14 characters minimum, rotation only on suspicion, no reuse.",
    "If a private key leaks, revoke it first, then rotate the certificate; the PEM "
    "header alone tells you which kind it was.",
    "Anthropic keys start with sk-ant-, OpenAI keys with sk-, Stripe live keys with "
    "sk_live_ and Hugging Face tokens with hf_.",
    "Secrets belong in the vault. The token TTL is 24 h and refresh tokens last 30 days.",
)


def _neg_secret_prose(rng: random.Random, index: int) -> list[str]:
    chosen = rng.sample(_SECRET_PROSE, 3)
    return [chosen[0], "", f"- {chosen[1]}", f"- {chosen[2]}"]


def _neg_pem_non_secret(rng: random.Random, index: int) -> list[str]:
    kind = index % 7
    if kind == 0:
        body = b"\x30\x82\x01\x22\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00"
        block = _pem("PUBLIC KEY", body + rng.randbytes(275)).text
    elif kind == 1:
        block = _pem("CERTIFICATE", b"\x30\x82\x03\x8b\x30\x82\x02\x73" + rng.randbytes(900)).text
    elif kind == 2:
        block = _pem(
            "RSA PUBLIC KEY", b"\x30\x82\x01\x0a\x02\x82\x01\x01" + rng.randbytes(262)
        ).text
    elif kind == 3:
        key = _b64(_ssh_string(b"ssh-ed25519") + _ssh_string(rng.randbytes(32)))
        return [
            "Add this deploy key (public half) to the repository:",
            "",
            "```",
            f"ssh-ed25519 {key} deploy@ci",
            "```",
            f"- fingerprint SHA256:{_b64(rng.randbytes(32)).rstrip('=')}",
        ]
    elif kind == 4:
        label = rng.choice(["OPENSSH PRIVATE KEY", "RSA PRIVATE KEY", "PRIVATE KEY"])
        header = pem_line("BEGIN", label)
        return [
            f"A valid key file starts with `{header}`; if yours starts with something "
            "else, convert it first.",
            "",
            "```",
            header,
            "```",
        ]
    elif kind == 5:  # the documentation form: a truncated body
        label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"])
        return [
            "The file should look like this:",
            "",
            "```",
            pem_line("BEGIN", label),
            "MIIEpAIBAAKCAQEA...",
            "...",
            pem_line("END", label),
            "```",
        ]
    else:
        label = rng.choice(["OPENSSH PRIVATE KEY", "PRIVATE KEY"])
        return [
            "```yaml",
            "ssh:",
            "  private_key: |",
            f"    {pem_line('BEGIN', label)}",
            "    <paste the deploy key here>",
            f"    {pem_line('END', label)}",
            "```",
        ]
    return ["The public certificate for the internal CA:", "", "```", *block.split("\n"), "```"]


_CJK = (
    "部署密钥已经轮换，旧的令牌全部作废。🔑",
    "トークンは1Passwordに保存しました。ノートには書かないでください 🚀",
    "会议决定：下周把夜间导出任务迁移到共享工作池。",
    "明日のリリースは延期です。理由はステージングの障害です 😅",
    "密码策略：至少十四个字符，不要重复使用。",
    "このメモは社外秘です。🙏 詳しくは #infra-help へ。",
    "Ünïcödé test: café, naïve, Zürich, Ελληνικά, Кириллица ✅ 🎉 👩‍💻",
)


def _neg_cjk_emoji(rng: random.Random, index: int) -> list[str]:
    chosen = rng.sample(_CJK, 3)
    return [f"## 備忘録 {index}", "", chosen[0], "", f"- {chosen[1]}", f"- {chosen[2]}"]


def _neg_hash_tables(rng: random.Random, index: int) -> list[str]:
    rows = [
        f"| v1.{index}.{patch} | {_sha(rng)} | {_sha(rng, 32)} | {rng.randint(10, 999)} KB |"
        for patch in range(rng.randint(3, 6))
    ]
    return ["| release | commit | sha256 | size |", "| --- | --- | --- | ---: |", *rows]


def _neg_urls_emails(rng: random.Random, index: int) -> list[str]:
    return [
        f"Search link: https://example.com/search?q=secret+rotation&page={index}&sort=desc",
        f"- review: https://github.com/acme/memsync/pull/{100 + index}"
        f"#discussion_r{rng.randint(10**9, 10**10)}",
        f"- dashboard: https://grafana.example.com/d/{_chars(rng, ALNUM, 9)}/latency"
        "?orgId=1&from=now-6h&to=now",
        f"- contact maria.garcia{index}@example.com or ops+alerts@acme.io",
        f"- tracking: https://example.com/launch?utm_source=newsletter&utm_medium=email&id={_uuid(rng)}",
    ]


# -- seen in the big honest corpus --
# Near misses met in the big corpus of real SDK text (`bench/scanner_report.py`).


def _neg_big_corpus(rng: random.Random, index: int) -> list[str]:
    # The storage emulator's published account and key, as SDKs and compose files carry it.
    emulator_key = _b64(rng.randbytes(64))
    return [
        f"Local blob storage for test run {index} (Azurite in docker compose):",
        "",
        "```",
        "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;"
        f"AccountName=devstoreaccount1;AccountKey={emulator_key};"
        "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
        "```",
        "",
        "- or simply `UseDevelopmentStorage=true` with the SDK's defaults",
    ]


def _neg_package_words(rng: random.Random, index: int) -> list[str]:
    return [
        "CI notes:",
        "",
        "- `npm_config_cache` points at /tmp/npm, `npm_package_version` is set by npm",
        "- the publish step uses pypa/gh-action-pypi-publish and the pypi-publish environment",
        "- models are trained with sk-learn (scikit-learn) 1.5",
        "- the task-ant-api service and the risk-analysis job share a queue",
        "- `npm_lifecycle_event=test` tells the script which hook runs",
    ]


def _neg_hex_colours(rng: random.Random, index: int) -> list[str]:
    colours = [f"#{_chars(rng, HEX, 6)}" for _ in range(4)]
    return [
        f"Brand colours: {colours[0]} (primary) and {colours[1]} (accent).",
        "",
        "```css",
        f".banner {{ color: {colours[2]}; background: {colours[3].upper()}; }}",
        "```",
    ]


def _neg_ipv6(rng: random.Random, index: int) -> list[str]:
    groups = ":".join(f"{rng.getrandbits(16):x}" for _ in range(6))
    link_local = ":".join(f"{rng.getrandbits(16):x}" for _ in range(4))
    return [
        f"The bastion listens on [2001:db8::{rng.getrandbits(16):x}]:22 and fe80::{link_local}.",
        f"- full address: 2001:db8:{groups}",
    ]


def _neg_sk_non_hex(rng: random.Random, index: int) -> list[str]:
    body = list(_chars(rng, HEX, 32))
    body[rng.randrange(8)] = rng.choice("ghijklmnopqrstuvwxyz")
    return [
        f"Order SKU-2024-{index:04d} shipped; set SKIP_LINT=1 to skip the check.",
        f"- the migration id is SK{''.join(body)}",
        "- SKETCHES and SKUNKWORKS are folder names, not keys",
    ]


def _neg_slack_channel_links(rng: random.Random, index: int) -> list[str]:
    channel = "C0" + _chars(rng, UPPER_ALNUM, 9)
    return [
        f"Discussion: https://acme.slack.com/archives/{channel}/p{rng.randint(10**15, 10**16)}",
        f"- slack://channel?team=T0{_chars(rng, UPPER_ALNUM, 8)}&id={channel}",
        "- the alert goes to #incidents via the Slack app, configured in the admin UI",
    ]


def _neg_public_identifiers(rng: random.Random, index: int) -> list[str]:
    mapbox_claims = {"u": "acme", "a": "cl" + _chars(rng, string.ascii_lowercase + DIGITS, 23)}
    claims = _b64url(json.dumps(mapbox_claims, separators=(",", ":")).encode())
    mapbox = f"pk.{claims}.{_chars(rng, URLSAFE, 22)}"
    stripe_body = _chars(rng, ALNUM, 24) if index % 2 else "51" + _chars(rng, ALNUM, 97)
    return [
        "Public identifiers (safe to share, they ship in the client):",
        "",
        f"- Stripe publishable key: pk_{rng.choice(['live', 'test'])}_{stripe_body}",
        f"- Twilio account SID: AC{_chars(rng, HEX, 32)}",
        f"- AWS account {_chars(rng, DIGITS, 12)}, role arn:aws:iam::{_chars(rng, DIGITS, 12)}"
        ":role/deploy",
        f"- Google OAuth client: {_chars(rng, DIGITS, 12)}-"
        f"{_chars(rng, string.ascii_lowercase + DIGITS, 32)}.apps.googleusercontent.com",
        f"- GitHub App client id Iv1.{_chars(rng, HEX, 16)}, "
        f"Slack app A0{_chars(rng, UPPER_ALNUM, 9)}",
        f"- Sentry DSN: https://{_chars(rng, HEX, 32)}@o{_chars(rng, DIGITS, 6)}"
        f".ingest.sentry.io/{_chars(rng, DIGITS, 7)}",
        f"- Mapbox public token: {mapbox}",
    ]


def _neg_dotted_identifiers(rng: random.Random, index: int) -> list[str]:
    words = ("Settings", "Controller", "Update", "Payload", "Handler", "Invalid", "Request")

    def camel(first: str, length: int) -> str:
        name = first
        while len(name) < length:
            name += rng.choice(words)
        return name[:length]

    first = camel(rng.choice(["Org", "Note", "Member"]), rng.randint(23, 26))
    test_name = f"{first}.{camel('verify', 6)}.{camel('reject', rng.randint(27, 38))}"
    return [
        f"The flaky test is `{test_name}`; it fails about once a week.",
        f"- logger: {camel('Ops', 25)}.worker.{camel('handle', 30)}",
    ]


_NEGATIVE_CATEGORIES: tuple[tuple[str, _NegativePayload, int], ...] = (
    ("git_shas", _neg_git_shas, 18),
    ("prefixed_lookalikes", _neg_prefixed_lookalikes, 12),
    ("digests", _neg_digests, 18),
    ("uuids", _neg_uuids, 12),
    # -- cloud, AI, payment and messaging providers --
    ("prefixed_formats", _neg_prefixed_formats, _PREFIXED_FORMATS_NOTES),
    ("base64_blobs", _neg_base64_blobs, 22),
    ("random_ids", _neg_random_ids, 22),
    ("shape_tokens", _neg_shape_tokens, 2 * len(_SHAPE_NEAR_MISSES)),
    ("jwts", _neg_jwts, 12),
    ("placeholders", _neg_placeholders, 2 * len(_placeholders())),
    ("context_lookalikes", _neg_context_lookalikes, 14),  # context rules (engine)
    ("env_var_names", _neg_env_var_names, 10),
    ("curl_examples", _neg_curl_examples, 10),
    ("secret_prose", _neg_secret_prose, 12),
    ("pem_non_secret", _neg_pem_non_secret, 21),
    ("cjk_emoji", _neg_cjk_emoji, 12),
    ("hash_tables", _neg_hash_tables, 8),
    ("urls_emails", _neg_urls_emails, 12),
    ("big_corpus", _neg_big_corpus, 4),
    ("package_words", _neg_package_words, 6),
    ("hex_colours", _neg_hex_colours, 5),
    ("ipv6", _neg_ipv6, 5),
    ("sk_non_hex", _neg_sk_non_hex, 5),
    ("slack_channel_links", _neg_slack_channel_links, 5),
    ("public_identifiers", _neg_public_identifiers, 14),
    ("dotted_identifiers", _neg_dotted_identifiers, 8),
)

NEGATIVE_CATEGORIES: tuple[str, ...] = tuple(name for name, _, _ in _NEGATIVE_CATEGORIES)


@functools.cache
def negatives() -> tuple[Negative, ...]:
    """About 300 notes of near misses, none of which holds a credential."""
    rng = random.Random(SEED + 3)
    result = []
    for category, payload, count in _NEGATIVE_CATEGORIES:
        for index in range(count):
            note, _ = _wrap_note(rng, payload(rng, index), 0)
            result.append(Negative(category, index, note))
    return tuple(result)


# ---------------------------------------------------------------------------------------
# Realistic, secret-free notes at volume


def _realistic_block(rng: random.Random) -> str:
    kind = rng.randrange(10)
    service = rng.choice(_SERVICES)
    if kind == 0:
        return f"## {rng.choice(_TOPICS).removeprefix('the ').capitalize()}\n"
    if kind in (1, 2, 3):
        return _paragraph(rng) + "\n"
    if kind == 4:
        return "\n".join(_bullets(rng)) + "\n"
    if kind == 5:
        return "\n".join(_code_block(rng)) + "\n"
    if kind == 6:
        rows = [
            f"| {name} | {rng.choice(['maria', 'jonas', 'aiko', 'wei'])} | "
            f"{rng.randint(20, 900)} ms | {_sha(rng, 4)} |"
            for name in rng.sample(_SERVICES, 3)
        ]
        return (
            "\n".join(["| service | owner | p99 | build |", "| --- | --- | ---: | --- |", *rows])
            + "\n"
        )
    if kind == 7:
        return (
            f"See [the design doc](https://docs.example.com/{service}/adr-{rng.randint(1, 99):04d})"
            " "
            f"and commit {_sha(rng)} for the change; incident {_uuid(rng)}.\n"
        )
    if kind == 8:
        return f"{rng.choice(_CJK)}\n"
    return (
        "```json\n"
        f'{{"service": "{service}", "replicas": {rng.randint(1, 9)}, '
        f'"region": "{rng.choice(["eu-west-1", "us-east-2"])}"}}\n'
        "```\n"
    )


def realistic_notes(n: int, size_bytes: int, seed: int = SEED) -> list[str]:
    """`n` secret-free Markdown notes of about `size_bytes` UTF-8 bytes in total.

    Built from a pool of pre-generated blocks, so ~10 MB takes well under a second.
    """
    rng = random.Random(seed)
    pool = [_realistic_block(rng) for _ in range(1500)]
    sizes = [len(block.encode("utf-8")) + 1 for block in pool]
    per_note = max(1, size_bytes // max(1, n))
    notes = []
    for _ in range(n):
        parts = [_heading(rng) + "\n"]
        total = len(parts[0])
        while total < per_note:
            choice = rng.randrange(len(pool))
            parts.append(pool[choice])
            total += sizes[choice]
        notes.append("\n".join(parts))
    return notes
