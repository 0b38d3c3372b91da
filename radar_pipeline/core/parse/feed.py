"""Parse stage: feed bytes -> ParsedFeed of ItemCandidates and Rejections (never a silent drop).

feedparser does the format work. It only ever gets bytes in a BytesIO (a bare bytes/str
argument may be opened as a file path or fetched as a URL), and any DOCTYPE that declares
entities is refused first, so no entity bomb expands and no external entity reads a local file.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

import feedparser
from feedparser.encodings import convert_to_utf8

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.identity.keys import (
    canonicalize_url,
    content_hash,
    identity_hash,
    normalize_title,
    simhash64,
)
from radar_pipeline.core.models import ItemCandidate, ParsedFeed, Rejection
from radar_pipeline.core.text import one_line, plain_text

FUTURE_TOLERANCE = timedelta(days=1)
TITLE_MAX = 300
SUMMARY_MAX = 2_000
CONTENT_MAX = 200_000
UNTITLED = "(untitled)"

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "html", "xhtml"})
# CDATA sections and comments may quote "<!ENTITY" as text (a post about XXE); they declare none.
_INERT_SECTIONS = re.compile(rb"<!\[CDATA\[.*?\]\]>|<!--.*?-->", re.DOTALL)
_ENTITY_DECL = re.compile(rb"<!\s*ENTITY", re.IGNORECASE)


@dataclass(frozen=True)
class _Entry:
    """One identifiable entry before the recovery cap is applied."""

    position: int
    source_item_id: str
    link: str
    canonical_url: str
    raw: Mapping[str, Any]


def parse_feed(
    source_id: str,
    body: bytes,
    *,
    base_url: str,
    content_type: str | None,
    now: datetime,
    window_from: datetime | None,
) -> ParsedFeed:
    """Parse one fetched body into candidates, items outside the window and reasoned
    rejections, in feed order: every entry ends in exactly one of the three.

    Every identifiable item dated at or after `window_from` (the recovery cap), or undated, is
    a candidate; no count limit applies here (the per-check cap is the dedupe stage's, since
    only identity says which items still need work). Older items go to `outside_window`.

    Raises ParseError("invalid-xml") for a DOCTYPE declaring entities (bombs, XXE) and
    ParseError("not-a-feed") when the bytes hold no feed at all (no version, no entries).
    """
    # Without HTTP metadata (fixture Sources) the XML declaration decides the encoding.
    headers = {"content-location": base_url, "content-type": content_type or "application/xml"}
    _refuse_entity_declarations(body, headers)
    # sanitize_html=False on purpose: no feedparser HTML ever leaves this module; text.plain_text
    # is the one boundary and is stricter than any sanitizer (no tag survives, script/style/
    # iframe content is dropped). The sanitizer would only cost time (8x: 1.6 s of 2.3 MB) and
    # keep iframe fallback text. resolve_relative_uris=False: links in HTML go with the tags.
    try:
        result = feedparser.parse(
            io.BytesIO(body),
            response_headers=headers,
            sanitize_html=False,
            resolve_relative_uris=False,
        )
    except Exception as exc:
        # feedparser's fallback parser for ill-formed XML has bugs of its own: a stray
        # `</height>` made it raise TypeError (found by the fault suite's fuzzing). Broken
        # markup is the feed's fault; say so as for any other unusable body.
        raise ParseError(
            "invalid-xml",
            one_line(
                f"the feed's markup broke the parser ({type(exc).__name__}: {exc})", 300, html=False
            ),
        ) from exc
    if not result.get("version") and not result.get("entries"):
        raise ParseError("not-a-feed", f"no RSS/Atom feed found ({_bozo(result) or 'no items'})")
    entries, rejections = _identify(result.get("entries", []), base_url)
    candidates, outside, more = _select(source_id, entries, now, window_from)
    rejections.extend(more)
    rejections.sort(key=lambda r: -1 if r.position is None else r.position)
    feed_title = one_line(str(result.get("feed", {}).get("title", "")), TITLE_MAX) or None
    return ParsedFeed(
        source_id=source_id,
        candidates=tuple(candidates),
        rejections=tuple(rejections),
        feed_title=feed_title,
        bozo=_bozo(result),
        outside_window=tuple(outside),
    )


def _refuse_entity_declarations(body: bytes, headers: dict[str, str]) -> None:
    """Raise invalid-xml if the body declares any entity, in whatever encoding it comes."""
    try:
        decoded = convert_to_utf8(dict(headers), body, {})  # the bytes feedparser will read
    except UnicodeDecodeError as exc:
        # feedparser itself raises on an XML declaration whose encoding name is not UTF-8
        # (found by the fault suite's fuzzing); such a body is not a usable feed.
        raise ParseError(
            "invalid-xml", f"the XML declaration's encoding name is not text ({exc.reason})"
        ) from exc
    for view in (body, body.replace(b"\x00", b""), decoded):
        if _ENTITY_DECL.search(_INERT_SECTIONS.sub(b"", view)):
            raise ParseError(
                "invalid-xml",
                "the feed declares XML entities (<!ENTITY>); refused to prevent entity "
                "expansion and external entity reads",
            )


def _bozo(result: Mapping[str, Any]) -> str | None:
    if not result.get("bozo"):
        return None
    exc = result.get("bozo_exception")
    text = f"{type(exc).__name__}: {exc}" if exc is not None else "ill-formed feed"
    return one_line(text, 300, html=False)


def _identify(
    raw_entries: list[Mapping[str, Any]], base_url: str
) -> tuple[list[_Entry], list[Rejection]]:
    """Give every entry an id and canonical link, or a reason why it has none."""
    entries: list[_Entry] = []
    rejections: list[Rejection] = []
    seen: dict[str, int] = {}
    for position, raw in enumerate(raw_entries):
        try:
            entry = _identify_one(position, raw, base_url)
        except Exception as exc:  # one bad item never sinks the feed
            entry = Rejection("invalid-item", one_line(repr(exc), 300, html=False), None, position)
        if isinstance(entry, Rejection):
            rejections.append(entry)
            continue
        entries.append(_disambiguate(entry, seen))
    return entries, rejections


def _identify_one(position: int, raw: Mapping[str, Any], base_url: str) -> _Entry | Rejection:
    guid = str(raw.get("id") or "").strip()
    link = _entry_link(raw, base_url)
    if link is None and urlsplit(guid).scheme.lower() in ("http", "https"):
        link = _absolute_http(guid, base_url)  # an RSS guid that is a permalink
    if link is None:
        reason = "no-link" if guid else "unidentifiable"
        return Rejection(reason, "no http(s) link and no URL guid", guid or None, position)
    canonical = canonicalize_url(link)
    return _Entry(position, guid or canonical, link, canonical, raw)


def _entry_link(raw: Mapping[str, Any], base_url: str) -> str | None:
    """Return the absolute alternate link (rel=alternate first, then `link`)."""
    links = [lnk for lnk in raw.get("links", []) if isinstance(lnk, Mapping)]
    hrefs = [
        str(lnk.get("href", "")) for lnk in links if lnk.get("rel", "alternate") == "alternate"
    ]
    for href in [*hrefs, str(raw.get("link") or "")]:
        absolute = _absolute_http(href, base_url)
        if absolute is not None:
            return absolute
    return None


def _absolute_http(href: str, base_url: str) -> str | None:
    href = href.strip()
    if not href:
        return None
    try:
        canonicalize_url(href, base_url)  # validates scheme and host
    except ValueError:
        return None
    return urljoin(base_url, href)


def _disambiguate(entry: _Entry, seen: dict[str, int]) -> _Entry:
    """Give a repeated id a deterministic suffix: `id#canonical_url`, then `#n`."""
    base = entry.source_item_id
    count = seen.get(base, 0) + 1
    seen[base] = count
    if count == 1:
        return entry
    candidate = f"{base}#{entry.canonical_url}"
    counter = 2
    while candidate in seen:
        counter += 1
        candidate = f"{base}#{entry.canonical_url}#{counter}"
    seen[candidate] = 1
    return _Entry(entry.position, candidate, entry.link, entry.canonical_url, entry.raw)


def _select(
    source_id: str, entries: list[_Entry], now: datetime, window_from: datetime | None
) -> tuple[list[ItemCandidate], list[ItemCandidate], list[Rejection]]:
    """Split the entries by the recovery cap, in feed order: candidates, outside the window,
    and those whose text could not be read."""
    candidates: list[ItemCandidate] = []
    outside: list[ItemCandidate] = []
    rejections: list[Rejection] = []
    for entry in entries:
        observed, observed_field = _observed(entry.raw)
        try:
            if window_from is not None and observed is not None and observed < window_from:
                outside.append(_outside_candidate(source_id, entry, observed, observed_field))
            else:  # text extraction only for items that are decided
                candidates.append(_candidate(source_id, entry, now))
        except Exception as exc:  # one bad item never sinks the feed
            detail = one_line(repr(exc), 300, html=False)
            rejections.append(
                Rejection("invalid-item", detail, entry.source_item_id, entry.position)
            )
    return candidates, outside, rejections


def _outside_candidate(
    source_id: str, entry: _Entry, observed: datetime, observed_field: str | None
) -> ItemCandidate:
    """An item older than the cap: its identity, link and date, to be counted and recorded.

    Its text is never read (it is never decided or written), so the text keys stay empty."""
    return ItemCandidate(
        source_item_id=entry.source_item_id,
        title="",
        link=entry.link,
        canonical_url=entry.canonical_url,
        identity=identity_hash(source_id, entry.canonical_url, entry.source_item_id),
        observed_at=observed,
        observed_field=observed_field,
        future_dated=False,
        summary="",
        content=None,
        content_hash="",
        title_key="",
        simhash=0,
        position=entry.position,
    )


def _candidate(source_id: str, entry: _Entry, now: datetime) -> ItemCandidate:
    raw = entry.raw
    title = _text_field(raw, "title", TITLE_MAX, single_line=True) or UNTITLED
    summary = _text_field(raw, "summary", SUMMARY_MAX, single_line=False)
    content = _content(raw)
    observed_at, observed_field = _observed(raw)
    return ItemCandidate(
        source_item_id=entry.source_item_id,
        title=title,
        link=entry.link,
        canonical_url=entry.canonical_url,
        identity=identity_hash(source_id, entry.canonical_url, entry.source_item_id),
        observed_at=observed_at,
        observed_field=observed_field,
        future_dated=observed_at is not None and observed_at > now + FUTURE_TOLERANCE,
        summary=summary,
        content=content,
        content_hash=content_hash(content or summary or title),
        title_key=normalize_title(title),
        simhash=simhash64(f"{title} {summary}"),
        position=entry.position,
    )


def _is_html(detail: object) -> bool:
    if not isinstance(detail, Mapping):
        return True  # unknown: treat as HTML so no markup can slip through as text
    return str(detail.get("type", "text/html")).lower() in _HTML_TYPES


def _text_field(raw: Mapping[str, Any], key: str, max_len: int, *, single_line: bool) -> str:
    value = str(raw.get(key) or "")
    html = _is_html(raw.get(f"{key}_detail"))
    if single_line:
        return one_line(value, max_len, html=html)
    return plain_text(value, max_len, html=html)


def _content(raw: Mapping[str, Any]) -> str | None:
    blocks = [c for c in raw.get("content", []) if isinstance(c, Mapping) and c.get("value")]
    if not blocks:
        return None
    text = plain_text(str(blocks[0]["value"]), CONTENT_MAX, html=_is_html(blocks[0]))
    return text or None


def _observed(raw: Mapping[str, Any]) -> tuple[datetime | None, str | None]:
    """Return the feed's own date (published, else updated) in UTC; never an invented one."""
    for field in ("published", "updated"):
        parsed = raw.get(f"{field}_parsed")
        if parsed is None:
            continue
        try:
            year, month, day, hour, minute, second = tuple(parsed)[:6]
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC), field
        except (TypeError, ValueError, OverflowError):
            continue
    return None, None
