"""The fetch stage: one bounded HTTP request (or fixture read) per Source check.

This is the trust boundary between the internet and the vault. Every problem a publisher, the
network or the address policy can cause becomes a ``FetchResult`` with ``outcome="failed"``, an
``error_class`` from ``errors.FETCH_ERROR_CLASSES`` and a redacted one-line message such as
``fetch: rate-limited (429), retry after 120 s``; nothing of that kind is raised.

Bounds: connect/read timeouts, an overall deadline enforced on every socket operation (see
``netpolicy.deadline_at``), a body cap counted while streaming *after* decompression (the body
is inflated here with a bounded zlib call, so a gzip bomb is never inflated past the cap), and
manual redirects, each hop re-checked against the address policy.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import mimetypes
import re
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import httpx

from radar_pipeline import __version__
from radar_pipeline.core.acquire.address_policy import (
    PolicyTransport,
    check_url,
    deadline_at,
    normalise_host,
    redact,
    resolve_checked,
)
from radar_pipeline.core.acquire.challenge import CHALLENGE_MARKERS, is_challenge
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import FetchError
from radar_pipeline.core.models import FetchRequest, FetchResult

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
FEED_MEDIA_TYPES = frozenset(
    {
        "application/rss+xml",
        "application/atom+xml",
        "application/rdf+xml",
        "application/x-rss+xml",
        "application/x-atom+xml",
        "application/xml",
        "text/xml",
        "application/feed+json",
        "application/json",
    }
)
HTML_MEDIA_TYPES = frozenset({"text/html", "application/xhtml+xml"})
JSON_MEDIA_TYPES = frozenset({"application/json", "text/json", "application/feed+json"})
# What a Source's check asks for, by its collectionMethod. Feeds: RSS, Atom and RDF (an
# rss/atom Source that turns out to be a JSON Feed passes this stage, and feedparser's verdict
# stands); the others: what their parser reads.
ACCEPT = (
    "application/rss+xml, application/atom+xml, application/xml;q=0.8, text/xml;q=0.8, */*;q=0.5"
)
ACCEPT_BY_METHOD = {
    "html": "text/html, application/xhtml+xml;q=0.9, */*;q=0.5",
    "json": "application/json, */*;q=0.5",
    "jsonfeed": "application/feed+json, application/json;q=0.9, */*;q=0.5",
}
# What the page stage asks for: an article page, or a host's robots.txt.
ACCEPT_BY_PURPOSE = {
    "page": "text/html, application/xhtml+xml;q=0.9, */*;q=0.1",
    "robots": "text/plain, */*;q=0.5",
}
PERMANENT_REDIRECTS = frozenset({301, 308})
# The longest a publisher's Cache-Control max-age or RSS <ttl> may hold the next check back:
# a day, so the daily unconditional fetch (docs/architecture.md, invariant 6) still happens.
POLITE_DELAY_CAP_S = 86_400
PROJECT_URL = "https://github.com/radar-pipeline/radar-pipeline"
ERROR_BODY_PEEK = 64 * 1024  # enough of an error page to spot a challenge and quote it
MESSAGE_MAX = 300

log = logging.getLogger(__name__)
# One INFO record per Source fetched, carrying `radar_progress = ("fetch", None, total)` (None:
# one more done); silent unless a handler listens (the CLI's progress bar on a terminal).
progress_log = logging.getLogger("radar_pipeline.progress")


@dataclass(frozen=True)
class FetchSettings:
    """Limits and identity of the fetch stage."""

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 10.0
    deadline_s: float = 20.0  # overall per check, includes drip-feeding servers
    max_bytes: int = 2_000_000  # counted while streaming, AFTER decompression
    max_redirects: int = 5
    user_agent: str = f"RadarPipeline/{__version__} (+{PROJECT_URL})"
    allowed_private_hosts: frozenset[str] = frozenset()
    max_retry_after_s: float = 6 * 3600

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FetchSettings:
        """Defaults plus RADAR_ALLOWED_PRIVATE_HOSTS (comma list of hosts or IPs)."""
        settings = Settings.from_env(environ)
        hosts = frozenset(normalise_host(h) for h in settings.allowed_private_hosts)
        return cls(
            allowed_private_hosts=hosts,
            user_agent=user_agent(settings.user_agent_contact),
        )


def user_agent(contact: str) -> str:
    """Our User-Agent, naming `contact` (RADAR_USER_AGENT_CONTACT: an e-mail address or URL a
    publisher can reach the vault's owner at) when given. Anything but printable ASCII, and the
    parentheses and semicolons that structure the header, become spaces; at most 200 characters."""
    cleaned = "".join(ch if " " <= ch <= "~" and ch not in "();\\" else " " for ch in contact)
    cleaned = " ".join(cleaned.split())[:200]
    base = f"RadarPipeline/{__version__} (+{PROJECT_URL}"
    return f"{base}; contact: {cleaned})" if cleaned else f"{base})"


@dataclass
class _Progress:
    """How far one check got; mutable because it is filled in as the exchange advances,
    so that a failure can still report the last URL, status and validators."""

    final_url: str
    started: float
    status: int | None = None
    redirects: int = 0
    conditional: bool = False
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    bytes_received: int = 0
    cache_max_age_s: int | None = None
    permanent_redirect: str | None = None  # the last hop of the unbroken 301/308 chain
    permanent_chain: bool = True  # every hop so far was permanent


class Fetcher:
    """Runs bounded fetches; one httpx.Client shared by all threads. A context manager."""

    def __init__(
        self,
        settings: FetchSettings,
        vault_root: Path,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.vault_root = vault_root
        # Only our own transport pins connections to checked addresses; with an injected one
        # the fetcher checks each hop's name itself (see the TOCTOU note in netpolicy).
        self._precheck_dns = transport is not None
        timeout = httpx.Timeout(
            connect=settings.connect_timeout_s,
            read=settings.read_timeout_s,
            write=settings.read_timeout_s,
            pool=settings.connect_timeout_s,
        )
        self._client = httpx.Client(
            transport=transport or PolicyTransport(settings.allowed_private_hosts),
            timeout=timeout,
            follow_redirects=False,
            trust_env=False,  # no env proxies (would bypass the address policy), no .netrc
        )

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the shared HTTP client and its connections."""
        self._client.close()

    def fetch(self, request: FetchRequest, now: datetime) -> FetchResult:
        """Fetch one Source; never raises for publisher, network or policy problems."""
        progress = _Progress(final_url=request.url, started=time.monotonic())
        try:
            if request.from_vault or request.collection_method == "fixture":
                return self._fetch_fixture(request, now, progress)
            with deadline_at(progress.started + self.settings.deadline_s):
                return self._fetch_http(request, now, progress)
        except FetchError as exc:
            return _failed(request, now, progress, exc)
        except httpx.TimeoutException as exc:
            detail = f"{type(exc).__name__}, deadline {self.settings.deadline_s:g} s"
            return _failed(request, now, progress, FetchError("timeout", detail))
        except httpx.HTTPError as exc:
            detail = f"{type(exc).__name__}: {exc}"
            return _failed(request, now, progress, FetchError("network", detail))

    # -- fixtures ---------------------------------------------------------------------------

    def _fetch_fixture(
        self, request: FetchRequest, now: datetime, progress: _Progress
    ) -> FetchResult:
        path = _fixture_path(self.vault_root, request.url)
        cap = self.settings.max_bytes
        try:
            with path.open("rb") as handle:
                body = handle.read(cap + 1)
        except OSError as exc:
            raise FetchError("network", f"fixture unreadable: {exc.strerror}") from exc
        progress.bytes_received = len(body)
        if len(body) > cap:
            raise FetchError("too-large", f"fixture larger than {cap} bytes")
        progress.status = 200
        progress.content_type = mimetypes.guess_type(path.name)[0]
        # A file has no media type of its own: its bytes decide (a .xml that is no feed fails).
        _validate_body(request.collection_method, None, None, body)
        return _success(request, now, progress, body)

    # -- HTTP -------------------------------------------------------------------------------

    def _fetch_http(self, request: FetchRequest, now: datetime, progress: _Progress) -> FetchResult:
        allowed = self.settings.allowed_private_hosts
        url = check_url(request.url, allowed)
        origin = _origin(url)
        headers = self._headers(request)
        progress.conditional = "If-None-Match" in headers or "If-Modified-Since" in headers
        while True:
            progress.final_url = str(url)
            url = check_url(url, allowed)
            if self._precheck_dns:
                resolve_checked(url.host, url.port or _default_port(url), allowed)
            hop_headers = dict(headers)
            # The token belongs to the Source's own origin: never hand it to another host.
            if request.auth_token and _origin(url) == origin:
                hop_headers["Authorization"] = f"Bearer {request.auth_token}"
            response = self._client.send(
                self._client.build_request("GET", url, headers=hop_headers), stream=True
            )
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    progress.redirects += 1
                    if progress.redirects > self.settings.max_redirects:
                        limit = self.settings.max_redirects
                        raise FetchError("policy", f"too many redirects (more than {limit})")
                    url = _join(url, location)
                    # Only a chain of permanent hops from the Source's own URL says "update the
                    # URL"; a temporary hop in between makes what follows temporary too.
                    progress.permanent_chain &= response.status_code in PERMANENT_REDIRECTS
                    if progress.permanent_chain:
                        progress.permanent_redirect = str(url)
                    continue
                return self._conclude(request, now, progress, response)
            finally:
                response.close()

    def _headers(self, request: FetchRequest) -> dict[str, str]:
        headers = {
            "User-Agent": self.settings.user_agent,
            "Accept": _accept(request),
            # Only codings _Inflater can bound; httpx would otherwise also offer br/zstd.
            "Accept-Encoding": "gzip, deflate",
        }
        if request.conditional and request.etag:
            headers["If-None-Match"] = request.etag
        if request.conditional and request.last_modified:
            headers["If-Modified-Since"] = request.last_modified
        return headers

    def _conclude(
        self, request: FetchRequest, now: datetime, progress: _Progress, response: httpx.Response
    ) -> FetchResult:
        status = response.status_code
        progress.status = status
        progress.content_type = response.headers.get("content-type")
        progress.etag = response.headers.get("etag")
        progress.last_modified = response.headers.get("last-modified")
        progress.cache_max_age_s = cache_max_age(response.headers.get_list("cache-control"))
        if status == 304 and progress.conditional:
            return _not_modified(request, now, progress)
        if not 200 <= status < 300:
            peek = self._read(response, progress, ERROR_BODY_PEEK, truncate=True)
            raise _classify_status(response, peek, now, self.settings.max_retry_after_s)
        body = self._read(response, progress, self.settings.max_bytes, truncate=False)
        cf_mitigated = response.headers.get("cf-mitigated")
        if request.purpose == "feed":
            _validate_body(request.collection_method, cf_mitigated, progress.content_type, body)
        elif request.purpose == "page":
            _validate_page(status, cf_mitigated, progress.content_type, body)
        return _success(request, now, progress, body)

    def _read(
        self, response: httpx.Response, progress: _Progress, cap: int, *, truncate: bool
    ) -> bytes:
        """Stream the body, inflating it here with a bound, and stop at `cap` bytes."""
        declared = response.headers.get("content-length", "")
        if not truncate and declared.isdigit() and int(declared) > cap:
            raise FetchError("too-large", f"Content-Length {declared} exceeds {cap} bytes")
        encoding = response.headers.get("content-encoding")
        try:
            return _stream_body(response.iter_raw(), encoding, cap, progress, truncate)
        except (FetchError, httpx.HTTPError):
            if truncate:  # an unreadable error page does not change the status' verdict
                return b""
            raise


def _stream_body(
    chunks: Iterator[bytes], encoding: str | None, cap: int, progress: _Progress, truncate: bool
) -> bytes:
    """Join the inflated body; past `cap` either cut it (truncate) or fail with too-large."""
    inflater = _Inflater(encoding)
    raw_cap = cap + cap // 64 + 1024  # incompressible data grows slightly when gzipped
    parts: list[bytes] = []
    raw = total = 0
    for chunk in chunks:
        raw += len(chunk)
        data = inflater.feed(chunk, cap - total)
        total += len(data)
        progress.bytes_received = total
        if total > cap or raw > raw_cap:
            if truncate:
                return b"".join([*parts, data])[:cap]
            raise FetchError("too-large", f"body exceeds {cap} bytes after decompression")
        parts.append(data)
    parts.append(inflater.flush())
    total += len(parts[-1])
    progress.bytes_received = total
    if total > cap:
        raise FetchError("too-large", f"body exceeds {cap} bytes after decompression")
    return b"".join(parts)


class _Inflater:
    """Content-Encoding decoder that never produces more than the remaining budget + 1."""

    def __init__(self, header: str | None) -> None:
        codings = [c.strip().lower() for c in (header or "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        if len(codings) > 1:
            raise FetchError("network", f"stacked content-encodings not supported: {header}")
        self._coding = codings[0] if codings else None
        self._first = True
        if self._coding in ("gzip", "x-gzip"):
            self._z: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self._coding == "deflate":
            self._z = zlib.decompressobj()
        elif self._coding is None:
            self._z = None
        else:
            raise FetchError("network", f"unsupported content-encoding {self._coding}")

    def feed(self, data: bytes, budget: int) -> bytes:
        if self._z is None:
            return data[: max(budget, 0) + 1]
        first, self._first = self._first, False
        try:
            return self._z.decompress(data, max(budget, 0) + 1)
        except zlib.error as exc:
            if first and self._coding == "deflate":  # servers send raw deflate without header
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.feed(data, budget)
            raise FetchError("network", f"corrupt {self._coding} body") from exc

    def flush(self) -> bytes:
        return self._z.flush() if self._z is not None else b""


def _classify_status(
    response: httpx.Response, peek: bytes, now: datetime, max_retry_after_s: float
) -> FetchError:
    """Turn a non-2xx, non-redirect response into the FetchError that names its class."""
    status = response.status_code
    retry_header = response.headers.get("retry-after")
    excerpt = _excerpt(peek)
    detail = f"{status}: {excerpt}" if excerpt else str(status)
    cf_mitigated = response.headers.get("cf-mitigated")
    if (cf_mitigated or "").strip().lower() == "challenge":
        return FetchError("challenge", f"{status}, cf-mitigated: challenge")
    if status == 429 or (status == 503 and retry_header is not None):
        retry = parse_retry_after(retry_header, now, max_retry_after_s)
        return FetchError("rate-limited", str(status), retry_after_s=retry)
    if is_challenge(status, cf_mitigated, peek):
        return FetchError("challenge", f"{status}, challenge page")
    if status in (404, 410):
        return FetchError("gone", str(status))
    if 500 <= status < 600:
        return FetchError("http-5xx", detail)
    # 4xx, and the statuses with no class of their own (1xx, a 3xx without Location, a 304
    # to an unconditional request) are the publisher answering something we did not ask for.
    return FetchError("http-4xx", detail)


def _validate_body(
    method: str, cf_mitigated: str | None, content_type: str | None, body: bytes
) -> None:
    """Refuse a 2xx body the Source's parser cannot be meant to read: a challenge page, or
    (by media type and first bytes) not a feed, not HTML, not JSON."""
    if (cf_mitigated or "").strip().lower() == "challenge":
        raise FetchError("challenge", "2xx with cf-mitigated: challenge")
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    shown = media_type or "no content type"
    peek = body[:ERROR_BODY_PEEK]
    if method == "html":
        if is_challenge(200, None, peek):
            raise FetchError("challenge", f"challenge page served as {shown}")
        if media_type in HTML_MEDIA_TYPES or (
            media_type not in JSON_MEDIA_TYPES and _as_utf8_head(body).lstrip()[:1] == b"<"
        ):
            return
        raise FetchError("not-html", f"{shown} body is not an HTML page")
    if method == "json":
        if _is_json_type(media_type) or _as_utf8_head(body).lstrip()[:1] in (b"{", b"["):
            return
        if _has_challenge_marker(peek):
            raise FetchError("challenge", f"challenge page served as {shown}")
        raise FetchError("not-json", f"{shown} body is not JSON")
    if media_type in FEED_MEDIA_TYPES or looks_like_feed(body):
        return
    if _has_challenge_marker(peek):
        raise FetchError("challenge", f"challenge page served as {shown}")
    raise FetchError("not-a-feed", f"{shown} body is not a feed")


def _accept(request: FetchRequest) -> str:
    if request.purpose == "feed":
        return ACCEPT_BY_METHOD.get(request.collection_method, ACCEPT)
    return ACCEPT_BY_PURPOSE[request.purpose]


def _is_json_type(media_type: str) -> bool:
    return media_type in JSON_MEDIA_TYPES or media_type.endswith("+json")


def _validate_page(
    status: int, cf_mitigated: str | None, content_type: str | None, body: bytes
) -> None:
    """A page must be HTML and no challenge page (a 2xx challenge exists too)."""
    if is_challenge(status, cf_mitigated, body[:ERROR_BODY_PEEK]):
        raise FetchError("challenge", f"{status}, challenge page instead of the article")
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type not in HTML_MEDIA_TYPES:
        raise FetchError("not-a-page", f"{media_type or 'no content type'} is not an HTML page")


_XML_PROLOGUE = re.compile(
    rb"""\s*(?:<\?[^>]*\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>)""",
    re.DOTALL | re.IGNORECASE,
)
_FEED_ROOT = re.compile(rb"\s*<(?:[A-Za-z_][\w.-]*:)?(rss|feed|RDF)[\s>/]", re.IGNORECASE)


def looks_like_feed(body: bytes) -> bool:
    """True when the body's root is <rss>, <feed>, <rdf:RDF> or a JSON Feed object."""
    head = _as_utf8_head(body)
    position = 0
    while match := _XML_PROLOGUE.match(head, position):
        position = match.end()
    if _FEED_ROOT.match(head, position):
        return True
    return head.lstrip().startswith(b"{") and _is_json_feed(body)


def _as_utf8_head(body: bytes) -> bytes:
    head = body[: 64 * 1024]
    for bom, codec in ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be")):
        if head.startswith(bom):
            return head[2:].decode(codec, errors="ignore").encode("utf-8")
    return head.removeprefix(b"\xef\xbb\xbf")


def _is_json_feed(body: bytes) -> bool:
    try:
        document = json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return False
    version = document.get("version") if isinstance(document, dict) else None
    return isinstance(version, str) and "jsonfeed.org/version" in version


def _has_challenge_marker(body: bytes) -> bool:
    lowered = body.lower()
    return any(marker in lowered for marker in CHALLENGE_MARKERS)


def parse_retry_after(value: str | None, now: datetime, cap_s: float) -> float | None:
    """Retry-After as seconds (delta-seconds or HTTP-date relative to `now`), capped."""
    if value is None:
        return None
    text = value.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = (_aware(when) - _aware(now)).total_seconds()
    return min(max(seconds, 0.0), cap_s)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _excerpt(body: bytes) -> str:
    text = body[:2048].decode("utf-8", errors="replace")
    text = re.sub(r"<[^>]*>", " ", text)  # an HTML error page reads better without tags
    return " ".join(text.split())[:120]


def _fixture_path(vault_root: Path, relative: str) -> Path:
    root = vault_root.resolve()
    candidate = Path(relative)
    if candidate.is_absolute() or not relative.strip():
        raise FetchError("policy", "fixture path must be relative to the vault root")
    try:
        target = (root / candidate).resolve()  # follows symlinks: a link out is an escape too
    except (OSError, ValueError) as exc:  # e.g. an embedded NUL byte, a symlink loop
        raise FetchError("policy", "fixture path cannot be resolved") from exc
    if not target.is_relative_to(root):
        raise FetchError("policy", "fixture path escapes the vault root")
    return target


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    return url.scheme, normalise_host(url.host), url.port or _default_port(url)


def _default_port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


def _join(base: httpx.URL, location: str) -> httpx.URL:
    try:
        return base.join(location)
    except (httpx.InvalidURL, ValueError) as exc:
        raise FetchError("policy", "redirect to an invalid URL") from exc


def cache_max_age(values: Sequence[str]) -> int | None:
    """Cache-Control's max-age in seconds (None when absent or malformed). `no-store` and
    `no-cache` ask for no delay at all: 0."""
    directives = [d.strip().lower() for v in values for d in v.split(",") if d.strip()]
    if any(d in ("no-store", "no-cache") for d in directives):
        return 0
    for directive in directives:
        name, _, value = directive.partition("=")
        if name.strip() == "max-age":
            value = value.strip().strip('"')
            return int(value) if value.isdigit() else None
    return None


_TTL = re.compile(rb"<ttl>\s*(\d{1,7})\s*</ttl>")


def feed_ttl(body: bytes) -> int | None:
    """An RSS channel's <ttl> (minutes) in seconds, from the head of the body, or None."""
    match = _TTL.search(body[:ERROR_BODY_PEEK])
    return int(match.group(1)) * 60 if match else None


def polite_delay_s(result: FetchResult) -> int | None:
    """How long the publisher asked us to wait before the next check (the larger of max-age
    and <ttl>), capped at POLITE_DELAY_CAP_S; None when it said nothing. A lower bound on the
    next check, never a reason to check sooner than the cadence."""
    asked = [s for s in (result.cache_max_age_s, result.feed_ttl_s) if s is not None]
    return min(max(asked), POLITE_DELAY_CAP_S) if asked else None


def _base(request: FetchRequest, now: datetime, progress: _Progress) -> FetchResult:
    return FetchResult(
        source_id=request.source_id,
        requested_url=request.url,
        final_url=progress.final_url,
        outcome="failed",
        fetched_at=now,
        status=progress.status,
        content_type=progress.content_type,
        etag=progress.etag,
        last_modified=progress.last_modified,
        bytes_received=progress.bytes_received,
        duration_s=round(time.monotonic() - progress.started, 4),
        redirects=progress.redirects,
        conditional=progress.conditional,
        cache_max_age_s=progress.cache_max_age_s,
        permanent_redirect=progress.permanent_redirect,
        permanently_gone=progress.status == 410,
    )


def _success(request: FetchRequest, now: datetime, progress: _Progress, body: bytes) -> FetchResult:
    digest = hashlib.sha256(body).hexdigest()
    ttl = feed_ttl(body) if request.purpose == "feed" else None
    result = replace(_base(request, now, progress), body_sha256=digest, feed_ttl_s=ttl)
    if request.previous_body_sha256 and digest == request.previous_body_sha256.lower():
        return replace(result, outcome="not-modified", unchanged_body=True)
    return replace(result, outcome="ok", body=body)


def _not_modified(request: FetchRequest, now: datetime, progress: _Progress) -> FetchResult:
    result = _base(request, now, progress)
    return replace(
        result,
        outcome="not-modified",
        etag=progress.etag or request.etag,
        last_modified=progress.last_modified or request.last_modified,
    )


def _failed(
    request: FetchRequest, now: datetime, progress: _Progress, error: FetchError
) -> FetchResult:
    return replace(
        _base(request, now, progress),
        error_class=error.error_class,
        error_message=render_error(error, [request.auth_token or ""]),
        retry_after_s=error.retry_after_s,
    )


def render_error(error: FetchError, secrets: Sequence[str]) -> str:
    """One redacted line: "fetch: <class> (<detail>)[, retry after N s]"."""
    line = f"fetch: {error.error_class} ({error.message})"
    if error.retry_after_s is not None:
        line += f", retry after {error.retry_after_s:g} s"
    line = " ".join(redact(line, secrets).split())
    return line if len(line) <= MESSAGE_MAX else line[: MESSAGE_MAX - 1] + "…"


def fetch_many(
    fetcher: Fetcher,
    requests: Sequence[FetchRequest],
    now: datetime,
    max_workers: int = 8,
    on_result: Callable[[FetchResult], None] | None = None,
) -> list[FetchResult]:
    """Fetch concurrently; results in input order; one failure never affects the others.

    `on_result` sees each result as soon as it is in (in a fetch thread), e.g. to start
    parsing it while the others are still being fetched.
    """
    if not requests:
        return []
    workers = max(1, min(max_workers, len(requests)))

    total = len(requests)

    def one(request: FetchRequest) -> FetchResult:
        result = _fetch_guarded(fetcher, request, now)
        # A structured event per Source fetched: `radar` turns these into its progress bar.
        progress_log.info(
            "fetched %s: %s",
            request.source_id,
            result.outcome,
            extra={"radar_progress": ("fetch", None, total)},
        )
        if on_result is not None:
            try:
                on_result(result)
            except Exception:  # a hook never costs the fetch its result
                log.exception("fetch result hook failed for %s", request.source_id)
        return result

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="radar-fetch") as pool:
        futures = [pool.submit(one, request) for request in requests]
        return [future.result() for future in futures]


def _fetch_guarded(fetcher: Fetcher, request: FetchRequest, now: datetime) -> FetchResult:
    try:
        return fetcher.fetch(request, now)
    except Exception as exc:  # a bug or library surprise in one worker must not sink the batch
        progress = _Progress(final_url=request.url, started=time.monotonic())
        error = FetchError("network", f"internal error {type(exc).__name__}: {exc}")
        return _failed(request, now, progress, error)
