"""Parse stage: feed bytes -> ParsedFeed of ItemCandidates and Rejections (never a silent drop).

feedparser does the format work; parse/items.py turns its entries into candidates, as it does
for pages and JSON answers. Where feedparser guesses, the bytes decide (docs/architecture.md,
"Faithful to the bytes"): the item's id and its link texts are read as written
(feed_bytes.py), a guid feedparser copied into `link` is no link, and a date is taken only as
dates.py reads its text. feedparser only ever gets bytes in a BytesIO (a bare bytes/str
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
from radar_pipeline.core.models import FieldEvidence, ParsedFeed, Rejection
from radar_pipeline.core.parse.dates import parse_date
from radar_pipeline.core.parse.feed_bytes import FeedBytes, read_feed_bytes
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
    utf8 = _refuse_entity_declarations(body, headers)
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
    entries = result.get("entries", [])
    written = read_feed_bytes(utf8, len(entries))
    items = [_raw_item(position, raw, written) for position, raw in enumerate(entries)]
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


def _refuse_entity_declarations(body: bytes, headers: dict[str, str]) -> bytes:
    """Raise invalid-xml if the body declares any entity, in whatever encoding it comes; else
    return the UTF-8 bytes feedparser reads."""
    try:
        decoded = convert_to_utf8(dict(headers), body, {})  # the bytes feedparser will read
    except UnicodeDecodeError as exc:
        # feedparser itself raises on an XML declaration whose encoding name is not UTF-8
        # (found by the fault suite's fuzzing); such a body is not a usable feed.
        raise ParseError(
            "invalid-xml", f"the XML declaration's encoding name is not text ({exc.reason})"
        ) from exc
    # Each distinct view once: for a UTF-8 body without NUL bytes the three are the same bytes.
    for view in dict.fromkeys((body, body.replace(b"\x00", b""), bytes(decoded))):
        if _ENTITY_DECL.search(_INERT_SECTIONS.sub(b"", view)):
            raise ParseError(
                "invalid-xml",
                "the feed declares XML entities (<!ENTITY>); refused to prevent entity "
                "expansion and external entity reads",
            )
    return bytes(decoded)


def _bozo(result: Mapping[str, Any]) -> str | None:
    if not result.get("bozo"):
        return None
    exc = result.get("bozo_exception")
    text = f"{type(exc).__name__}: {exc}" if exc is not None else "ill-formed feed"
    return one_line(text, 300, html=False)


def _raw_item(position: int, raw: Mapping[str, Any], written: FeedBytes) -> RawItem | Rejection:
    """One feedparser entry as the shared item shape (its text still raw), its id and links
    as the bytes wrote them; `resolved_*` keep what feedparser made of them, the inputs of the
    identity rule Signals already in a vault were made under."""
    try:
        links = [lnk for lnk in raw.get("links", []) if isinstance(lnk, Mapping)]
        hrefs = [
            str(lnk.get("href", "")) for lnk in links if lnk.get("rel", "alternate") == "alternate"
        ]
        resolved_id = str(raw.get("id") or "")
        link = str(raw.get("link") or "")
        # feedparser copies a permalink guid into `link` (resolved against the base): that is
        # the id again, not a link the publisher wrote.
        copied = bool(raw.get("guidislink")) and link == resolved_id
        observed_at, observed_field, evidence = _observed(raw)
        return RawItem(
            position=position,
            item_id=written.id_as_written(position, resolved_id),
            # rel=alternate first, then `link`, then each <link> element's own text (it wins
            # over an attribute that is no http(s) URL: `<link uri="at://...">`)
            links=(*hrefs, "" if copied else link, *written.link_texts(position)),
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
            evidence=evidence,
            resolved_id=resolved_id,
            resolved_links=(*hrefs, link),
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


def _observed(
    raw: Mapping[str, Any],
) -> tuple[datetime | None, str | None, tuple[FieldEvidence, ...]]:
    """The feed's own date (published, else updated) in UTC, read without guessing.

    The text as written decides: dates.py reads it strictly (an RFC 5322 weekday in any
    language is ignored, an AM/PM marker is read), and its reading wins over feedparser's.
    feedparser's reading alone counts only where the text's own numbers agree with it (a form
    dates.py does not read, such as a Greek month name), never for a 12-hour clock or a
    partial date it completed. A text neither reads leaves the date empty; it is kept as
    field evidence (with what feedparser made of it) so a person can see why the item is
    undated."""
    evidence: list[FieldEvidence] = []
    tried: set[str] = set()
    for field in ("published", "updated"):
        text = str(raw.get(field) or "").strip()
        if not text or text in tried:  # feedparser gives an RSS pubDate as both fields
            continue
        tried.add(text)
        strict = parse_date(text)
        if strict is not None:  # whole seconds, as feedparser's reading and the vault's format
            strict = strict.replace(microsecond=0)
        guessed = _feedparser_date(raw.get(f"{field}_parsed"))
        if strict is not None:
            if guessed is not None and guessed != strict:
                note = f"feedparser read {guessed.isoformat()}"
                evidence.append(FieldEvidence("date", field, "text", f"{text} ({note})"))
            return strict, field, tuple(evidence)
        if guessed is not None and _agrees(text, guessed):
            evidence.append(FieldEvidence("date", field, "feedparser", text))
            return guessed, field, tuple(evidence)
        read = f"feedparser read {guessed.isoformat()}" if guessed else "feedparser: none"
        evidence.append(FieldEvidence("date", field, "unreadable", f"{text} ({read})"))
    return None, None, tuple(evidence)


_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_NUMBER = re.compile(r"\d+")
_OFFSET = re.compile(r"[+-]\d{2}:?\d{2}\s*$")
_MERIDIEM = re.compile(r"(?<![^\W\d_])[AaPp]\.?[Mm]\.?(?![^\W\d_])")


def _agrees(text: str, reading: datetime) -> bool:
    """Whether feedparser's `reading` (UTC) is what `text` states, as far as the text's own
    numbers show without knowing its zone: its year and day of month (or the next or previous
    day) are numbers of the text, and its time's minutes (up to a zone's quarter hours) and
    seconds are the text's; no 12-hour clock (feedparser drops the marker). feedparser fills
    what a text lacks (a W3DTF "2003-12" is December 1st, a time it cannot read is 00:00):
    such a reading never agrees."""
    stated = _OFFSET.sub("", text)
    clock = _CLOCK.findall(stated)
    if not clock or _MERIDIEM.search(stated):
        return False
    numbers = {int(n) for n in _NUMBER.findall(stated)}
    if reading.year not in numbers or not numbers & {reading.day - 1, reading.day, reading.day + 1}:
        return False
    _, minute, second = clock[-1]
    return (int(minute), int(second or 0)) == (reading.minute, reading.second)


def _feedparser_date(parsed: Any) -> datetime | None:
    if parsed is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(v) for v in tuple(parsed)[:6])
        return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except (TypeError, ValueError, OverflowError):
        return None
