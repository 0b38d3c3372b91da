"""The request side of a fetch: the client, the headers, the redirects and the body stream.

Everything here bounds what one check may cost us: connect/read timeouts, an overall deadline
enforced on every socket operation (``address_policy.deadline_at``, entered by the caller),
manual redirects with each hop re-checked against the address policy, and a body cap counted
while streaming *after* decompression (the body is inflated here with a bounded zlib call, so a
gzip bomb is never inflated past the cap). What the answer means is ``response.py``'s job.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from radar_pipeline import __version__
from radar_pipeline.core.acquire.address_policy import (
    PolicyTransport,
    check_url,
    normalise_host,
    resolve_checked,
)
from radar_pipeline.core.acquire.pacing import HostCeilings
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import FetchError
from radar_pipeline.core.models import FetchRequest

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
PERMANENT_REDIRECTS = frozenset({301, 308})
# What a Source's check asks for, by its collectionMethod. Feeds: RSS, Atom and RDF (an
# rss/atom Source that turns out to be a JSON Feed passes this stage, and the parse stage reads
# it as one: parse/dispatch.is_json_body); the others: what their parser reads.
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
PROJECT_URL = "https://github.com/radar-pipeline/radar-pipeline"


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
    # The most requests in flight per host within one collection (core/acquire/pacing.py;
    # RADAR_HOST_MAX_IN_FLIGHT): the adaptive limit grows up to it.
    host_ceilings: HostCeilings = field(default_factory=HostCeilings)

    @classmethod
    def of(cls, settings: Settings) -> FetchSettings:
        """Defaults plus the settings' RADAR_ALLOWED_PRIVATE_HOSTS (comma list of hosts or IPs),
        RADAR_USER_AGENT_CONTACT and RADAR_HOST_MAX_IN_FLIGHT (the ceilings per host)."""
        hosts = frozenset(normalise_host(h) for h in settings.allowed_private_hosts)
        default, per_host = settings.host_max_in_flight
        return cls(
            allowed_private_hosts=hosts,
            user_agent=user_agent(settings.user_agent_contact),
            host_ceilings=HostCeilings(default, tuple((normalise_host(h), n) for h, n in per_host)),
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
class CheckProgress:
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
    wait_s: float | None = None  # the last hop's wait for its answer's headers


class BoundedClient:
    """One httpx.Client shared by all fetch threads, sending only what the policy allows."""

    def __init__(self, settings: FetchSettings, transport: httpx.BaseTransport | None) -> None:
        self.settings = settings
        # Only our own transport pins connections to checked addresses; with an injected one
        # we check each hop's name ourselves (see the TOCTOU note in address_policy).
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

    def close(self) -> None:
        """Close the shared HTTP client and its connections."""
        self._client.close()

    @contextmanager
    def open(self, request: FetchRequest, progress: CheckProgress) -> Iterator[httpx.Response]:
        """The streamed answer after the redirects, each hop checked again; closed on exit."""
        allowed = self.settings.allowed_private_hosts
        url = check_url(request.url, allowed)
        origin = _origin(url)
        headers = request_headers(self.settings, request)
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
            sent = time.monotonic()
            response = self._client.send(
                self._client.build_request("GET", url, headers=hop_headers), stream=True
            )
            progress.wait_s = time.monotonic() - sent
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
                yield response
                return
            finally:
                response.close()


def request_headers(settings: FetchSettings, request: FetchRequest) -> dict[str, str]:
    """Identity, Accept by purpose, the codings we can bound, and the conditional headers."""
    headers = {
        "User-Agent": settings.user_agent,
        "Accept": _accept(request),
        # Only codings _Inflater can bound; httpx would otherwise also offer br/zstd.
        "Accept-Encoding": "gzip, deflate",
    }
    if request.conditional and request.etag:
        headers["If-None-Match"] = request.etag
    if request.conditional and request.last_modified:
        headers["If-Modified-Since"] = request.last_modified
    return headers


def _accept(request: FetchRequest) -> str:
    if request.purpose == "feed":
        return ACCEPT_BY_METHOD.get(request.collection_method, ACCEPT)
    return ACCEPT_BY_PURPOSE[request.purpose]


def read_body(
    response: httpx.Response, progress: CheckProgress, cap: int, *, truncate: bool
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
    chunks: Iterator[bytes], encoding: str | None, cap: int, progress: CheckProgress, truncate: bool
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


def _origin(url: httpx.URL) -> tuple[str, str, int]:
    return url.scheme, normalise_host(url.host), url.port or _default_port(url)


def _default_port(url: httpx.URL) -> int:
    return 443 if url.scheme == "https" else 80


def _join(base: httpx.URL, location: str) -> httpx.URL:
    try:
        return base.join(location)
    except (httpx.InvalidURL, ValueError) as exc:
        raise FetchError("policy", "redirect to an invalid URL") from exc
