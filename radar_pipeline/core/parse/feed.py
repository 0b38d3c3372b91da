"""Parse stage: feed bytes -> ParsedFeed of ItemCandidates and Rejections (never a silent drop).

feedparser does the format work; parse/items.py turns its entries into candidates, as it does
for pages and JSON answers. It only ever gets bytes in a BytesIO (a bare bytes/str
argument may be opened as a file path or fetched as a URL), and any DOCTYPE that declares
entities is refused first, so no entity bomb expands and no external entity reads a local file.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import feedparser
from feedparser.encodings import convert_to_utf8

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import ParsedFeed, Rejection
from radar_pipeline.core.parse.items import (  # the bounds, re-exported where callers find them
    FUTURE_TOLERANCE as FUTURE_TOLERANCE,
)
from radar_pipeline.core.parse.items import SUMMARY_MAX as SUMMARY_MAX
from radar_pipeline.core.parse.items import TITLE_MAX, RawItem, RawText, build_parsed, invalid_item
from radar_pipeline.core.text import one_line

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "html", "xhtml"})
# CDATA sections and comments may quote "<!ENTITY" as text (a post about XXE); they declare none.
_INERT_SECTIONS = re.compile(rb"<!\[CDATA\[.*?\]\]>|<!--.*?-->", re.DOTALL)
_ENTITY_DECL = re.compile(rb"<!\s*ENTITY", re.IGNORECASE)


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
    items = [_raw_item(position, raw) for position, raw in enumerate(result.get("entries", []))]
    feed_title = one_line(str(result.get("feed", {}).get("title", "")), TITLE_MAX) or None
    return build_parsed(
        source_id,
        items,
        base_url=base_url,
        now=now,
        window_from=window_from,
        feed_title=feed_title,
        bozo=_bozo(result),
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


def _raw_item(position: int, raw: Mapping[str, Any]) -> RawItem | Rejection:
    """One feedparser entry as the shared item shape (its text still raw)."""
    try:
        links = [lnk for lnk in raw.get("links", []) if isinstance(lnk, Mapping)]
        hrefs = [
            str(lnk.get("href", "")) for lnk in links if lnk.get("rel", "alternate") == "alternate"
        ]
        observed_at, observed_field = _observed(raw)
        return RawItem(
            position=position,
            item_id=str(raw.get("id") or ""),
            links=(*hrefs, str(raw.get("link") or "")),  # rel=alternate first, then `link`
            title=_raw_text(raw, "title"),
            summary=_raw_text(raw, "summary"),
            content=_content(raw),
            observed_at=observed_at,
            observed_field=observed_field,
            categories=tuple(
                str(tag.get("term") or "")
                for tag in raw.get("tags") or ()
                if isinstance(tag, Mapping)
            ),
        )
    except Exception as exc:  # one bad item never sinks the feed
        return invalid_item(position, exc)


def _is_html(detail: object) -> bool:
    if not isinstance(detail, Mapping):
        return True  # unknown: treat as HTML so no markup can slip through as text
    return str(detail.get("type", "text/html")).lower() in _HTML_TYPES


def _raw_text(raw: Mapping[str, Any], key: str) -> RawText:
    return RawText(str(raw.get(key) or ""), _is_html(raw.get(f"{key}_detail")))


def _content(raw: Mapping[str, Any]) -> RawText | None:
    blocks = [c for c in raw.get("content", []) if isinstance(c, Mapping) and c.get("value")]
    if not blocks:
        return None
    return RawText(str(blocks[0]["value"]), _is_html(blocks[0]))


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
