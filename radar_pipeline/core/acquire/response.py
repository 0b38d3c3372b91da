"""The response side of a fetch: what an answer means, and the ``FetchResult`` it becomes.

A 304 to a conditional request ends the check; a non-2xx status names its error class (a 429,
or a 503 with Retry-After, is ``rate-limited`` with the publisher's wait, capped; a 403 or any
status carrying a challenge page is ``challenge``); a 2xx body must be what the Source's parser
can read (a feed, HTML, JSON, an article page). Every problem is raised as a ``FetchError``,
which ``fetch.Fetcher`` turns into a failed ``FetchResult`` with a redacted one-line message.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import httpx

from radar_pipeline.core.acquire.address_policy import redact
from radar_pipeline.core.acquire.challenge import CHALLENGE_MARKERS, is_challenge
from radar_pipeline.core.acquire.request import CheckProgress, FetchSettings, read_body
from radar_pipeline.core.errors import FetchError
from radar_pipeline.core.models import FetchRequest, FetchResult

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
# The longest a publisher's Cache-Control max-age or RSS <ttl> may hold the next check back:
# a day, so the daily unconditional fetch (docs/architecture.md, invariant 6) still happens.
POLITE_DELAY_CAP_S = 86_400
ERROR_BODY_PEEK = 64 * 1024  # enough of an error page to spot a challenge and quote it
MESSAGE_MAX = 300


def conclude(
    request: FetchRequest,
    now: datetime,
    progress: CheckProgress,
    response: httpx.Response,
    settings: FetchSettings,
) -> FetchResult:
    """The result of the answer after the redirects, or the FetchError that names its class."""
    status = response.status_code
    progress.status = status
    progress.content_type = response.headers.get("content-type")
    progress.etag = response.headers.get("etag")
    progress.last_modified = response.headers.get("last-modified")
    progress.cache_max_age_s = cache_max_age(response.headers.get_list("cache-control"))
    if status == 304 and progress.conditional:
        # Read to its end (a 304 has no body): only then is the connection kept for the next
        # request to the host, instead of closed with the answer.
        read_body(response, progress, ERROR_BODY_PEEK, truncate=True)
        return not_modified(request, now, progress)
    if not 200 <= status < 300:
        peek = read_body(response, progress, ERROR_BODY_PEEK, truncate=True)
        raise classify_status(response, peek, now, settings.max_retry_after_s)
    body = read_body(response, progress, settings.max_bytes, truncate=False)
    cf_mitigated = response.headers.get("cf-mitigated")
    if request.purpose == "feed":
        validate_body(request.collection_method, cf_mitigated, progress.content_type, body)
    elif request.purpose == "page":
        _validate_page(status, cf_mitigated, progress.content_type, body)
    return success(request, now, progress, body)


def classify_status(
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


def validate_body(
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


def feed_root(body: bytes) -> str | None:
    """The feed's root: `rss`, `feed` (Atom), `rdf` (RSS 1.0) or `json` (a JSON Feed object);
    None when the body is no feed."""
    head = _as_utf8_head(body)
    position = 0
    while match := _XML_PROLOGUE.match(head, position):
        position = match.end()
    if root := _FEED_ROOT.match(head, position):
        return root[1].decode("ascii").lower()
    return "json" if head.lstrip().startswith(b"{") and _is_json_feed(body) else None


def looks_like_feed(body: bytes) -> bool:
    """True when the body's root is <rss>, <feed>, <rdf:RDF> or a JSON Feed object."""
    return feed_root(body) is not None


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


def _base(request: FetchRequest, now: datetime, progress: CheckProgress) -> FetchResult:
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
        response_wait_s=None if progress.wait_s is None else round(progress.wait_s, 4),
    )


def success(
    request: FetchRequest, now: datetime, progress: CheckProgress, body: bytes
) -> FetchResult:
    """A 2xx body: `ok` with the body, or `not-modified` when its hash is the last one's."""
    digest = hashlib.sha256(body).hexdigest()
    ttl = feed_ttl(body) if request.purpose == "feed" else None
    result = replace(_base(request, now, progress), body_sha256=digest, feed_ttl_s=ttl)
    if request.previous_body_sha256 and digest == request.previous_body_sha256.lower():
        return replace(result, outcome="not-modified", unchanged_body=True)
    return replace(result, outcome="ok", body=body)


def not_modified(request: FetchRequest, now: datetime, progress: CheckProgress) -> FetchResult:
    """A 304: the validators the publisher sent, else the ones we asked with."""
    result = _base(request, now, progress)
    return replace(
        result,
        outcome="not-modified",
        etag=progress.etag or request.etag,
        last_modified=progress.last_modified or request.last_modified,
    )


def failed(
    request: FetchRequest, now: datetime, progress: CheckProgress, error: FetchError
) -> FetchResult:
    """The failed result of `error`, as far as the check got."""
    return replace(
        _base(request, now, progress),
        error_class=error.error_class,
        error_message=render_error(error, [request.auth_token or ""]),
        retry_after_s=error.retry_after_s,
    )


def deferred(request: FetchRequest, now: datetime, reason: str) -> FetchResult:
    """A request not sent because its origin asked us to wait (pacing's Retry-After):
    `skipped`, its reason in `error_message`; the next collection checks it."""
    return FetchResult(
        source_id=request.source_id,
        requested_url=request.url,
        final_url=request.url,
        outcome="skipped",
        fetched_at=now,
        error_message=reason,
    )


def render_error(error: FetchError, secrets: Sequence[str]) -> str:
    """One redacted line: "fetch: <class> (<detail>)[, retry after N s]"."""
    line = f"fetch: {error.error_class} ({error.message})"
    if error.retry_after_s is not None:
        line += f", retry after {error.retry_after_s:g} s"
    line = " ".join(redact(line, secrets).split())
    return line if len(line) <= MESSAGE_MAX else line[: MESSAGE_MAX - 1] + "…"
