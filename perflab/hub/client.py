"""Files of Hugging Face hub dataset repositories, fetched over HTTP into a content-addressed cache.

The hub serves a file of a dataset repository at ``{endpoint}/datasets/{repo}/resolve/{revision}/{path}``
(huggingface_hub's ``hf_hub_url`` layout). A ``HEAD`` there answers with ``X-Repo-Commit`` (the commit
the revision points at), ``ETag`` and, for a file stored in Git LFS, ``X-Linked-Etag`` (the SHA-256 of
the content) and ``X-Linked-Size``, then redirects (302) to a CDN that serves the bytes. This module
reads the metadata with ``HEAD`` (following only redirects on the hub itself, as huggingface_hub does),
downloads with ``GET`` following every redirect (the hub token is sent to the hub only: httpx drops
``Authorization`` on a redirect to another origin), reports progress, and verifies the SHA-256 the hub
stated (and the one the caller pinned, when given) before the file enters the cache.

Cache layout under the cache directory (``perflab.settings.hub_cache_dir()``)::

    datasets/<owner>/<name>/blobs/<etag>-<file name>      the content, named by its hub ETag
    datasets/<owner>/<name>/refs/<revision>/<path>.json   what the revision resolved to last time

A blob already present is never downloaded again; with the hub unreachable the last resolved copy is
used. Settings: ``PERFLAB_HF_ENDPOINT``, else ``HF_ENDPOINT``, else ``https://huggingface.co``; the
token only from ``PERFLAB_HF_TOKEN_FILE`` (first line) or ``HF_TOKEN`` (never a flag, page or log);
``HF_HUB_OFFLINE=1`` uses the cache only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote, urljoin, urlsplit

import httpx

from perflab.atomic_file import write_atomically
from perflab.secrets import SecretUnavailable, read_secret_file

DEFAULT_ENDPOINT = "https://huggingface.co"
ENDPOINT_ENV = "PERFLAB_HF_ENDPOINT"
HF_ENDPOINT_ENV = "HF_ENDPOINT"
TOKEN_FILE_ENV = "PERFLAB_HF_TOKEN_FILE"
TOKEN_ENV = "HF_TOKEN"
OFFLINE_ENV = "HF_HUB_OFFLINE"
HEADER_REPO_COMMIT = "X-Repo-Commit"
HEADER_LINKED_ETAG = "X-Linked-Etag"
HEADER_LINKED_SIZE = "X-Linked-Size"
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
CHUNK_BYTES = 1024 * 1024
MAX_HUB_REDIRECTS = 5
# What a hub may send: a body without a usable announced size is read up to this much.
MAX_UNANNOUNCED_BYTES = 2 * 1024**3
# An ETag longer than this is no hub's (the hub's are 40-64 characters); it names the cached blob.
MAX_ETAG_CHARS = 128
# A download must keep up this average rate once its grace period is over (a trickle is stopped).
MIN_RATE_BYTES_S = 32 * 1024
RATE_GRACE_S = 60.0
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SAFE_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

Progress = Callable[[int, int | None], None]


class HubError(Exception):
    """A hub file could not be had; the message says which file and why, in one line."""


class HubUnreachable(HubError):
    """The hub could not be reached (offline, DNS, refused, timed out, or ``HF_HUB_OFFLINE``)."""


class HubChecksumMismatch(HubError):
    """The downloaded bytes do not have the SHA-256 the hub (or the caller) stated; nothing was kept."""


@dataclass(frozen=True)
class HubFile:
    """One file of a hub dataset repository at a revision (branch, tag or commit)."""

    repo: str
    path: str
    revision: str = "main"
    sha256: str | None = None

    def __post_init__(self) -> None:
        parts = self.repo.split("/")
        if len(parts) != 2 or not all(_SAFE_PART.match(part) for part in parts):
            raise HubError(f"hub repository {self.repo!r}: expected owner/name")
        path = PurePosixPath(self.path)
        if not self.path or path.is_absolute() or ".." in path.parts:
            raise HubError(f"hub file {self.path!r}: expected a path inside the repository")
        if not _SAFE_PART.match(self.revision.replace("/", "-")):
            raise HubError(f"hub revision {self.revision!r}: not a branch, tag or commit name")

    @property
    def ref(self) -> str:
        """``hf://datasets/owner/name@revision/path`` (huggingface_hub's file-system notation)."""
        revision = "" if self.revision == "main" else f"@{self.revision}"
        return f"hf://datasets/{self.repo}{revision}/{self.path}"

    def url(self, endpoint: str) -> str:
        """Where the hub serves this file."""
        return (
            f"{endpoint.rstrip('/')}/datasets/{self.repo}/resolve/"
            f"{quote(self.revision, safe='')}/{quote(self.path)}"
        )


@dataclass(frozen=True)
class CachedFile:
    """A hub file on disk, and whether it came from the network this time."""

    path: Path
    commit: str | None
    sha256: str
    size: int
    downloaded: bool


def hub_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The hub's base URL: ``PERFLAB_HF_ENDPOINT``, else ``HF_ENDPOINT``, else huggingface.co."""
    env = os.environ if environ is None else environ
    value = (env.get(ENDPOINT_ENV) or env.get(HF_ENDPOINT_ENV) or DEFAULT_ENDPOINT).strip()
    if urlsplit(value).scheme not in ("http", "https"):
        raise HubError(f"{ENDPOINT_ENV}={value!r}: expected an http(s) URL")
    return value.rstrip("/")


def hub_token(environ: Mapping[str, str] | None = None) -> str | None:
    """The hub token from ``PERFLAB_HF_TOKEN_FILE`` (first line) or ``HF_TOKEN``; None without one."""
    env = os.environ if environ is None else environ
    token_file = env.get(TOKEN_FILE_ENV, "").strip()
    if token_file:
        try:
            return read_secret_file(token_file)
        except SecretUnavailable as problem:
            raise HubError(f"{TOKEN_FILE_ENV}: {problem}") from None
    return env.get(TOKEN_ENV, "").strip() or None


def offline(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``HF_HUB_OFFLINE`` asks for the cache only."""
    env = os.environ if environ is None else environ
    return env.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _normalize_etag(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    value = value.strip('"')
    return value or None


def _repo_dir(cache_dir: Path, file: HubFile) -> Path:
    owner, name = file.repo.split("/")
    return cache_dir / "datasets" / owner / name


def _ref_path(cache_dir: Path, file: HubFile) -> Path:
    return _repo_dir(cache_dir, file) / "refs" / file.revision / f"{file.path}.json"


def _blob_path(cache_dir: Path, file: HubFile, etag: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", etag)
    return _repo_dir(cache_dir, file) / "blobs" / f"{safe}-{PurePosixPath(file.path).name}"


def cached(file: HubFile, cache_dir: Path) -> CachedFile | None:
    """The copy the last successful resolve of ``file`` left in the cache, if its blob is there."""
    try:
        entry = json.loads(_ref_path(cache_dir, file).read_text(encoding="utf-8"))
        blob = _blob_path(cache_dir, file, entry["etag"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not blob.is_file():
        return None
    return CachedFile(blob, entry.get("commit"), entry["sha256"], blob.stat().st_size, downloaded=False)


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for chunk in iter(lambda: source.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _describe(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


@dataclass(frozen=True)
class _Metadata:
    url: str
    commit: str | None
    etag: str
    size: int | None


def _metadata(client: httpx.Client, file: HubFile, endpoint: str, headers: dict[str, str]) -> _Metadata:
    """HEAD the file: follow redirects on the hub itself (a renamed repository), stop at the CDN."""
    url = file.url(endpoint)
    hub_origin = urlsplit(endpoint)[:2]
    for _ in range(MAX_HUB_REDIRECTS + 1):
        response = client.head(url, headers=headers, follow_redirects=False)
        location = response.headers.get("Location")
        if response.is_redirect and location:
            target = urljoin(url, location)
            if urlsplit(target)[:2] == hub_origin and not response.headers.get(HEADER_LINKED_ETAG):
                url = target
                continue
        break
    if response.status_code in (401, 403):
        raise HubError(
            f"{file.ref}: the hub refused access (HTTP {response.status_code}); "
            f"set {TOKEN_FILE_ENV} or {TOKEN_ENV} to a token that may read it"
        )
    if response.status_code == 404:
        raise HubError(f"{file.ref}: not found on {endpoint} (repository, revision or path)")
    if not (response.is_success or response.is_redirect):
        raise HubError(f"{file.ref}: the hub answered HTTP {response.status_code}")
    etag = _normalize_etag(response.headers.get(HEADER_LINKED_ETAG) or response.headers.get("ETag"))
    if etag is None:
        raise HubError(f"{file.ref}: the hub gave no ETag, so the download cannot be verified")
    if len(etag) > MAX_ETAG_CHARS or not etag.isascii() or not etag.isprintable():
        raise HubError(f"{file.ref}: the hub gave an unusable ETag ({len(etag)} characters, {etag[:20]!r}…)")
    size_text = response.headers.get(HEADER_LINKED_SIZE) or response.headers.get("Content-Length")
    return _Metadata(url, response.headers.get(HEADER_REPO_COMMIT), etag, _size(file, size_text))


def _size(file: HubFile, text: str | None) -> int | None:
    """The announced size in bytes; None when not announced, ``HubError`` when it is not a size."""
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 15:
        raise HubError(f"{file.ref}: the hub announced an unusable size {text[:20]!r}")
    return int(text)


def _check_progress(file: HubFile, done: int, limit: int, started: float) -> None:
    """Stop a download past its size ``limit`` or slower than ``MIN_RATE_BYTES_S`` after its grace."""
    if done > limit:
        raise HubError(f"{file.ref}: the hub sent more than the {limit} bytes it announced; nothing was kept")
    elapsed = time.monotonic() - started
    if elapsed > RATE_GRACE_S and done < MIN_RATE_BYTES_S * elapsed:
        raise HubError(
            f"{file.ref}: the download ran slower than {MIN_RATE_BYTES_S // 1024} KiB/s "
            f"({done} bytes in {elapsed:.0f} s) and was stopped; nothing was kept"
        )


def _download(
    client: httpx.Client,
    meta: _Metadata,
    file: HubFile,
    blob: Path,
    headers: dict[str, str],
    on_progress: Progress | None,
) -> str:
    """Stream the file to ``blob`` (through a partial file); returns its SHA-256.

    The body is taken as sent (``identity`` was asked for: any other encoding is refused, never
    decoded), at most the announced size (else ``MAX_UNANNOUNCED_BYTES``), at ``MIN_RATE_BYTES_S``.
    """
    partial = blob.with_name(f".{blob.name}.partial")
    digest = hashlib.sha256()
    done = 0
    limit = meta.size if meta.size is not None else MAX_UNANNOUNCED_BYTES
    started = time.monotonic()
    try:
        with client.stream("GET", meta.url, headers=headers, follow_redirects=True) as response:
            if not response.is_success:
                raise HubError(f"{file.ref}: the download answered HTTP {response.status_code}")
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding != "identity":
                raise HubError(
                    f"{file.ref}: the hub sent a {encoding[:20]!r}-encoded body though none was asked for"
                )
            with partial.open("wb") as out:
                for chunk in response.iter_raw():
                    done += len(chunk)
                    _check_progress(file, done, limit, started)
                    out.write(chunk)
                    digest.update(chunk)
                    if on_progress is not None:
                        on_progress(done, meta.size)
        sha256 = digest.hexdigest()
        expected = [value for value in (file.sha256, meta.etag) if value and _SHA256.match(value)]
        if any(sha256 != value for value in expected) or (meta.size is not None and done != meta.size):
            raise HubChecksumMismatch(
                f"{file.ref}: the download does not match the hub's checksum "
                f"(got {done} bytes with SHA-256 {sha256[:12]}…, expected "
                f"{meta.size if meta.size is not None else '?'} bytes with {(expected or ['?'])[0][:12]}…); "
                "nothing was kept"
            )
        os.replace(partial, blob)
        return sha256
    finally:
        partial.unlink(missing_ok=True)


def _remember(cache_dir: Path, file: HubFile, meta: _Metadata, sha256: str) -> None:
    ref = _ref_path(cache_dir, file)
    entry = {"commit": meta.commit, "etag": meta.etag, "sha256": sha256, "size": meta.size, "at": time.time()}
    write_atomically(ref, json.dumps(entry).encode("utf-8"))


def fetch(
    file: HubFile,
    *,
    cache_dir: Path,
    endpoint: str | None = None,
    token: str | None = None,
    on_progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> CachedFile:
    """``file`` in the cache, downloaded when the hub has a version the cache lacks.

    Raises :class:`HubUnreachable` when the hub cannot be reached and nothing is cached,
    :class:`HubChecksumMismatch` when the bytes do not match, :class:`HubError` for any other refusal.
    """
    endpoint = endpoint or hub_endpoint()
    if offline():
        found = cached(file, cache_dir)
        if found is None:
            raise HubUnreachable(
                f"{file.ref}: {OFFLINE_ENV} is set and the file is not in {cache_dir}; unset it to fetch "
                f"from the hub or from a mirror ({ENDPOINT_ENV})"
            )
        return found
    headers = {"Accept-Encoding": "identity", "User-Agent": "perflab"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    try:
        with httpx.Client(timeout=timeout, transport=transport) as client:
            meta = _metadata(client, file, endpoint, headers)
            blob = _blob_path(cache_dir, file, meta.etag)
            found = cached(file, cache_dir)
            if found is not None and found.path == blob:
                _remember(cache_dir, file, meta, found.sha256)
                return found
            if blob.is_file():
                sha256 = file_sha256(blob)
                _remember(cache_dir, file, meta, sha256)
                return CachedFile(blob, meta.commit, sha256, blob.stat().st_size, downloaded=False)
            blob.parent.mkdir(parents=True, exist_ok=True)
            sha256 = _download(client, meta, file, blob, headers, on_progress)
            _remember(cache_dir, file, meta, sha256)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError) as error:
        found = cached(file, cache_dir)
        if found is not None:
            return found
        raise HubUnreachable(
            f"{file.ref}: the hub at {endpoint} cannot be reached ({_describe(error)}); "
            f"set {ENDPOINT_ENV} to a hub mirror this machine can reach"
        ) from None
    except httpx.HTTPError as error:
        raise HubError(f"{file.ref}: {_describe(error)}") from None
    except OSError as error:
        raise HubError(f"{file.ref}: cannot write the cache in {cache_dir}: {_describe(error)}") from None
    return CachedFile(blob, meta.commit, sha256, blob.stat().st_size, downloaded=True)
