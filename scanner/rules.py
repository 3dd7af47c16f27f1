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

from memsync_protocol.tokens import is_well_formed_token


@dataclass(frozen=True)
class Rule:
    """One credential format.

    `prefixes`: literal, case-sensitive substrings; the regex runs only when at least one
    of them occurs in the text (the cheap prefilter). Empty means "always run" and is
    allowed only for the few structural formats without any fixed literal.
    `pattern`: compiled regex; when it has a group named `secret`, that group is the
    secret, else the whole match is.
    `validate`: an optional structural check on the secret (a checksum, a decodable
    part); a candidate that fails it is not a finding.
    """

    id: str
    label: str
    prefixes: tuple[str, ...]
    pattern: re.Pattern[str]
    validate: Callable[[str], bool] | None = None


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


def _token(*alternatives: str, alphabet: str = _WORD) -> re.Pattern[str]:
    """A pattern for any of `alternatives` that is not followed by a char of `alphabet`.

    `alphabet` is the token's own alphabet (a class body), so a longer string that merely
    starts like a credential is not one.
    """
    return re.compile(f"(?:{'|'.join(alternatives)})(?![{alphabet}])")


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
_PRIVATE_KEY_BLOCK = re.compile(
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
        pattern=re.compile(
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
        pattern=re.compile(
            r"AccountKey=(?<!AccountName=devstoreaccount1;AccountKey=)"
            r"(?P<secret>[A-Za-z0-9+/]{86}==)(?![A-Za-z0-9+/=])"
        ),
        validate=_not_stand_in,
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
        id="slack-webhook-url",
        label="Slack webhook URL",
        prefixes=("hooks.slack.com/services/",),
        pattern=re.compile(
            r"hooks\.slack\.com/services/T[A-Z0-9]{8,12}/B[A-Z0-9]{8,12}/[A-Za-z0-9]{24}"
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
        pattern=re.compile(
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
        prefixes=("k_live_", "k_test_"),
        pattern=_token(_starting("[sr]k_(?:live|test)_", "[A-Za-z0-9]{24,247}")),
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
        # The current format only: legacy Heroku keys are bare UUIDs, not recognisable.
        id="heroku-api-key",
        label="Heroku API key",
        prefixes=("HRKU-",),
        pattern=_token(_starting("HRKU-", "[A-Za-z0-9_-]{60}"), alphabet=_BASE64URL),
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
        pattern=re.compile(
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
        pattern=re.compile(
            r"[0-9](?<![A-Za-z0-9_:][0-9])[0-9]{7,9}:AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"
        ),
        validate=_not_stand_in,
    ),
    Rule(
        # 32 hex characters (the secret), then the data center (`-us` and a number). The
        # regex starts at the rare `-us` and looks back for the hex: far faster on prose.
        id="mailchimp-api-key",
        label="Mailchimp API key",
        prefixes=("-us",),
        pattern=re.compile(
            r"-us(?<=(?<![A-Za-z0-9_])(?P<secret>[0-9a-f]{32})-us)[0-9]{1,2}(?![A-Za-z0-9_])"
        ),
        validate=_not_stand_in,
    ),
)
