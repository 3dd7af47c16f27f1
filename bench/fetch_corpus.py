"""Fetch the big honest corpus: real text nobody here wrote, for the scanner's report.

Documentation, tests and READMEs of widely used SDKs, as their registries ship them:

- PyPI: each package's sdist (`pip download --no-deps --no-binary NAME`), or its
  wheel when the sdist cannot be prepared here (a Rust or C build backend);
- npm: each package's tarball (`npm pack`);
- Debian: this machine's `/usr/share/doc`, and a few documentation packages
  (`apt-get download`, then `dpkg-deb -x`; run `apt-get update` once first).

Only text is kept: a file is kept when it is at most 2 MB, has no NUL byte and decodes
as UTF-8 (gzip-compressed files, as `/usr/share/doc` has many, are decompressed first).
Everything goes into a cache outside the repository, one folder per package, with a
manifest (`manifest.json`: source, name, version, archive, files, bytes) recording what was
fetched. A package already in the manifest is skipped, so a second run fetches only
what is missing; versions are the latest at fetch time.

    .venv/bin/python -m bench.fetch_corpus [--cache DIR] [--jobs 3] [--only pypi,npm,debian]

Prints each package fetched (or failed) and the corpus's total size. Nothing here is
ever committed: the cache defaults to `~/.cache/memsync-bench/corpus`.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

DEFAULT_CACHE = Path("~/.cache/memsync-bench/corpus").expanduser()
MAX_FILE_BYTES = 2 * 1024 * 1024
COMMAND_TIMEOUT = 600.0

# Widely used SDKs and libraries, many of them for services with credentials.
PYPI_PACKAGES: tuple[str, ...] = (
    # AWS
    "boto3", "botocore", "s3transfer", "awscli", "aiobotocore", "moto", "aws-lambda-powertools",
    "aws-xray-sdk", "troposphere",
    # Google
    "google-cloud-storage", "google-cloud-bigquery", "google-cloud-pubsub",
    "google-cloud-secret-manager", "google-cloud-kms", "google-cloud-firestore",
    "google-cloud-logging", "google-api-core", "google-auth", "google-auth-oauthlib",
    "google-api-python-client", "firebase-admin", "gspread",
    # Azure and Microsoft
    "azure-core", "azure-identity", "azure-storage-blob", "azure-keyvault-secrets",
    "azure-keyvault-keys", "azure-mgmt-resource", "azure-mgmt-storage", "azure-cosmos",
    "azure-servicebus", "azure-eventhub", "msal", "office365-rest-python-client",
    # Other clouds and infrastructure
    "kubernetes", "docker", "hvac", "openstacksdk", "hcloud", "linode-api4",
    "python-digitalocean", "oci", "minio", "b2sdk", "pulumi", "ansible-core",
    "fabric", "invoke", "paramiko", "netmiko", "pyvmomi",
    # Payments, messaging, SaaS APIs
    "stripe", "twilio", "sendgrid", "braintree", "plaid-python", "squareup",
    "Adyen", "ShopifyAPI", "simple-salesforce", "hubspot-api-client", "mailchimp3",
    "slack-sdk", "slack-bolt", "discord.py", "python-telegram-bot", "tweepy", "dropbox",
    "jira", "atlassian-python-api", "PyGithub", "python-gitlab", "GitPython",
    "okta", "auth0-python", "python-keycloak", "pysaml2",
    # AI APIs
    "openai", "anthropic", "cohere", "mistralai", "replicate", "huggingface-hub",
    "langchain-core", "pinecone", "weaviate-client",
    # Data
    "sqlalchemy", "alembic", "psycopg", "psycopg2", "asyncpg", "pymysql", "redis",
    "pymongo", "motor", "elasticsearch", "cassandra-driver", "snowflake-connector-python",
    "databricks-sdk", "celery", "kombu", "pika", "kafka-python", "confluent-kafka",
    # Web frameworks and HTTP
    "requests", "urllib3", "httpx", "aiohttp", "django", "djangorestframework", "flask",
    "werkzeug", "fastapi", "starlette", "jinja2", "tornado",
    # Security and auth
    "cryptography", "pyopenssl", "pyjwt", "python-jose", "authlib", "oauthlib",
    "requests-oauthlib", "passlib", "bcrypt", "itsdangerous", "certifi", "keyring",
    "ldap3", "detect-secrets", "bandit",
    # Observability
    "sentry-sdk", "datadog", "ddtrace", "prometheus-client", "opentelemetry-sdk",
    # Tools and testing
    "pytest", "tox", "setuptools", "pip", "twine", "pre-commit", "responses", "vcrpy",
    "python-dotenv", "pydantic", "pyyaml", "click", "rich", "mypy",
)  # fmt: skip

NPM_PACKAGES: tuple[str, ...] = (
    # AWS
    "aws-sdk", "@aws-sdk/client-s3", "@aws-sdk/client-dynamodb",
    "@aws-sdk/client-secrets-manager", "@aws-sdk/client-sts", "@aws-sdk/credential-providers",
    "aws-amplify", "aws-cdk-lib", "serverless",
    # Google and Firebase
    "firebase-admin", "firebase", "@google-cloud/storage", "@google-cloud/pubsub",
    "@google-cloud/secret-manager", "google-auth-library", "googleapis",
    # Azure and Microsoft
    "@azure/identity", "@azure/storage-blob", "@azure/keyvault-secrets", "@azure/msal-node",
    "@azure/cosmos", "@microsoft/microsoft-graph-client",
    # Payments, messaging, SaaS APIs
    "stripe", "twilio", "@sendgrid/mail", "mailgun.js", "nodemailer", "@slack/web-api",
    "@slack/bolt", "discord.js", "telegraf", "twitter-api-v2", "@hubspot/api-client",
    "@shopify/shopify-api", "square", "braintree", "plaid", "@linear/sdk",
    "@notionhq/client", "algoliasearch", "@mailchimp/mailchimp_marketing", "contentful",
    # Git hosting and CI
    "@octokit/rest", "@octokit/core", "@octokit/webhooks", "@octokit/auth-app",
    "@gitbeaker/rest", "@actions/core", "@actions/github", "simple-git", "isomorphic-git",
    # Auth
    "jsonwebtoken", "jose", "passport", "passport-jwt", "passport-google-oauth20", "auth0",
    "next-auth", "@supabase/supabase-js", "node-forge", "bcryptjs", "crypto-js", "dotenv",
    # AI APIs
    "openai", "@anthropic-ai/sdk", "cohere-ai", "replicate", "@huggingface/inference",
    "@pinecone-database/pinecone", "@langchain/core",
    # Data
    "mongodb", "mongoose", "pg", "mysql2", "mysql", "ioredis", "redis", "sequelize",
    "typeorm", "knex", "@prisma/client", "kafkajs", "amqplib", "@elastic/elasticsearch",
    # Infrastructure and observability
    "@kubernetes/client-node", "dockerode", "ssh2", "@pulumi/pulumi", "@sentry/node",
    "dd-trace", "vercel", "@netlify/functions",
    # Web frameworks, HTTP, tools
    "next", "express", "koa", "fastify", "axios", "node-fetch", "got", "typescript",
    "webpack", "jest", "mocha", "eslint", "react", "react-dom", "vue", "@angular/core",
    "lodash", "moment", "uuid", "yargs", "commander",
)  # fmt: skip

DEBIAN_PACKAGES: tuple[str, ...] = (
    "python3.11-doc", "postgresql-doc-15", "git-doc", "python-django-doc", "nodejs-doc",
    "perl-doc", "python-sqlalchemy-doc", "libssl-doc", "python-flask-doc",
    "python-cryptography-doc", "nginx-doc", "docker-doc", "golang-1.19-doc",
)  # fmt: skip

SOURCES = ("pypi", "npm", "debian")


@dataclass(frozen=True)
class Fetched:
    """One package in the cache: where it came from and how much text it gave."""

    source: str
    name: str
    version: str
    folder: str
    files: int
    bytes: int
    archive: str = ""  # the file the registry gave (a wheel when the sdist failed here)


class Manifest:
    """`manifest.json` in the cache: what is there, written after every package."""

    def __init__(self, cache: Path) -> None:
        self.path = cache / "manifest.json"
        self._lock = threading.Lock()
        self.entries: dict[str, Fetched] = {}
        if self.path.exists():
            for key, entry in json.loads(self.path.read_text(encoding="utf-8")).items():
                self.entries[key] = Fetched(**entry)

    def has(self, key: str, cache: Path) -> bool:
        """True when `key` was fetched and its folder is still there."""
        entry = self.entries.get(key)
        return entry is not None and (cache / entry.folder).is_dir()

    def add(self, key: str, fetched: Fetched) -> None:
        """Record one package (atomically, so an interrupted run leaves a valid file)."""
        with self._lock:
            self.entries[key] = fetched
            data = {key: asdict(entry) for key, entry in sorted(self.entries.items())}
            temporary = self.path.with_suffix(".tmp")
            temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
            temporary.replace(self.path)


def text_of(name: str, data: bytes) -> str | None:
    """The file's text when it is one we keep: small, no NUL, UTF-8 (after gunzip)."""
    if name.endswith(".gz"):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as compressed:
                data = compressed.read(MAX_FILE_BYTES + 1)
        except (OSError, EOFError):
            return None
    if len(data) > MAX_FILE_BYTES or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _safe_relative(name: str) -> PurePosixPath | None:
    """An archive member's path inside its folder, or None for `..` and absolute ones."""
    path = PurePosixPath(name.lstrip("/"))
    if not path.parts or any(part in ("", ".", "..") for part in path.parts):
        return None
    if path.suffix == ".gz":
        path = path.with_suffix("")
    return path


class _Writer:
    """Writes kept text files into one package folder, counting them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files = 0
        self.bytes = 0

    def add(self, name: str, data: bytes) -> None:
        relative = _safe_relative(name)
        text = text_of(name, data)
        if relative is None or text is None:
            return
        target = self.folder / relative
        if target.exists():  # `x` and `x.gz` side by side: keep the first
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        encoded = text.encode("utf-8")
        target.write_bytes(encoded)
        self.files += 1
        self.bytes += len(encoded)


def _archive_members(archive: Path) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each regular file of at most the size limit in a tar or zip."""
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as opened:
            for info in opened.infolist():
                if not info.is_dir() and info.file_size <= MAX_FILE_BYTES:
                    yield info.filename, opened.read(info)
        return
    with tarfile.open(archive) as opened:
        for member in opened:
            if member.isfile() and member.size <= MAX_FILE_BYTES:
                extracted = opened.extractfile(member)
                if extracted is not None:
                    yield member.name, extracted.read()


def _tree_members(root: Path) -> Iterator[tuple[str, bytes]]:
    """(path relative to `root`, bytes) of each regular file (no symlinks) under it."""
    for directory, subdirectories, names in os.walk(root, followlinks=False):
        subdirectories.sort()
        for name in sorted(names):
            path = Path(directory, name)
            if path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            yield path.relative_to(root).as_posix(), path.read_bytes()


def _store(
    cache: Path,
    source: str,
    name: str,
    version: str,
    members: Iterator[tuple[str, bytes]],
    archive: str,
) -> Fetched:
    """Write the text members into `source/<name>-<version>/`, replacing a partial one."""
    folder_name = f"{re.sub(r'[^A-Za-z0-9._-]+', '_', name.lstrip('@'))}-{version}"
    folder = cache / source / folder_name
    if folder.exists():
        shutil.rmtree(folder)
    writer = _Writer(folder)
    for member_name, data in members:
        writer.add(member_name, data)
    folder.mkdir(parents=True, exist_ok=True)
    folder_key = f"{source}/{folder_name}"
    return Fetched(source, name, version, folder_key, writer.files, writer.bytes, archive)


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # Fixed commands; the only input is our own package names.
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )


def _version_from_archive(archive: Path) -> str:
    """The version in a wheel's or sdist's file name (`name-1.2.3.tar.gz`)."""
    stem = archive.name
    if stem.endswith(".whl"):
        return stem.split("-")[1]
    stem = re.sub(r"\.(tar\.gz|tar\.bz2|tgz|zip)$", "", stem)
    return stem.rsplit("-", 1)[-1]


def fetch_pypi(cache: Path, name: str, work: Path) -> Fetched:
    """One PyPI package: its sdist, or its wheel when pip cannot prepare the sdist."""
    # The sdist of this package only: its build backend comes as a wheel, never built.
    attempts = (["--no-binary", name], ["--only-binary", ":all:"])
    errors = []
    for flags in attempts:
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", *flags]
        result = _run([*pip, "--dest", str(work), name], work)
        archives = sorted(work.iterdir())
        if result.returncode == 0 and archives:
            archive = archives[0]
            version = _version_from_archive(archive)
            return _store(cache, "pypi", name, version, _archive_members(archive), archive.name)
        errors.append(result.stderr.strip().splitlines()[-1:] or ["no file"])
    raise RuntimeError("; ".join(line for lines in errors for line in lines))


def fetch_npm(cache: Path, name: str, work: Path) -> Fetched:
    """One npm package: the registry's tarball of its latest version."""
    result = _run(["npm", "pack", name, "--json", "--pack-destination", str(work)], work)
    if result.returncode != 0:
        raise RuntimeError((result.stderr.strip().splitlines() or ["npm pack failed"])[-1])
    packed = json.loads(result.stdout)[0]
    archive = work / packed["filename"]
    return _store(cache, "npm", name, packed["version"], _archive_members(archive), archive.name)


def fetch_debian(cache: Path, name: str, work: Path) -> Fetched:
    """One Debian package: `apt-get download`, `dpkg-deb -x`, the text under usr/share."""
    result = _run(["apt-get", "download", name], work)
    debs = sorted(work.glob("*.deb"))
    if result.returncode != 0 or not debs:
        raise RuntimeError((result.stderr.strip().splitlines() or ["apt-get failed"])[-1])
    version = _run(["dpkg-deb", "--field", str(debs[0]), "Version"], work).stdout.strip()
    tree = work / "tree"
    extracted = _run(["dpkg-deb", "-x", str(debs[0]), str(tree)], work)
    if extracted.returncode != 0:
        raise RuntimeError(extracted.stderr.strip() or "dpkg-deb failed")
    return _store(
        cache, "debian", name, version, _tree_members(tree / "usr" / "share"), debs[0].name
    )


def fetch_local_doc(cache: Path, name: str, work: Path) -> Fetched:
    """This machine's `/usr/share/doc` (changelogs, copyright files, READMEs)."""
    del work
    return _store(
        cache, "debian", name, "local", _tree_members(Path("/usr/share/doc")), "/usr/share/doc"
    )


def _fetch_one(
    cache: Path,
    manifest: Manifest,
    key: str,
    name: str,
    fetcher: Callable[[Path, str, Path], Fetched],
) -> bool:
    """Fetch one package unless cached; print one line either way it was tried."""
    if manifest.has(key, cache):
        return True
    with tempfile.TemporaryDirectory(prefix="memsync-corpus-") as work:
        try:
            fetched = fetcher(cache, name, Path(work))
        except (RuntimeError, OSError, ValueError, tarfile.TarError, zipfile.BadZipFile,
                subprocess.TimeoutExpired) as error:  # fmt: skip
            print(f"failed  {key}: {error}", flush=True)
            return False
    manifest.add(key, fetched)
    size = f"{fetched.files} files, {fetched.bytes / 1e6:.1f} MB"
    print(f"fetched {key} {fetched.version} ({fetched.archive}): {size}", flush=True)
    return True


def main() -> None:
    """Fetch whatever is missing from the cache, then print the corpus's size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--jobs", type=int, default=3, help="packages fetched at once")
    parser.add_argument("--only", default=",".join(SOURCES), help="sources, comma-separated")
    arguments = parser.parse_args()
    cache: Path = arguments.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    manifest = Manifest(cache)
    sources = set(arguments.only.split(","))

    jobs: list[tuple[str, str, Callable[[Path, str, Path], Fetched]]] = []
    if "debian" in sources:
        jobs.append(("debian:usr-share-doc", "usr-share-doc", fetch_local_doc))
        jobs += [(f"debian:{name}", name, fetch_debian) for name in DEBIAN_PACKAGES]
    if "pypi" in sources:
        jobs += [(f"pypi:{name}", name, fetch_pypi) for name in PYPI_PACKAGES]
    if "npm" in sources:
        jobs += [(f"npm:{name}", name, fetch_npm) for name in NPM_PACKAGES]
    with ThreadPoolExecutor(max_workers=max(1, arguments.jobs)) as pool:
        results = list(
            pool.map(lambda job: _fetch_one(cache, manifest, job[0], job[1], job[2]), jobs)
        )

    entries = [entry for key, entry in manifest.entries.items() if manifest.has(key, cache)]
    total = sum(entry.bytes for entry in entries)
    files = sum(entry.files for entry in entries)
    print(
        f"corpus: {len(entries)} packages, {files} files, {total / 1e6:.1f} MB of text in {cache}"
        f" ({results.count(False)} failed this run)"
    )
    if results.count(False):
        sys.exit(1)


if __name__ == "__main__":
    main()
