"""Parse stage for `collectionMethod: jsonfeed`: a JSON Feed (1.0 or 1.1) -> ParsedFeed.

JSON Feed's fields are fixed by its spec (https://jsonfeed.org/version/1.1), so no paths are
configured; each field still records which JSON Feed key produced it. `id` is the item id
(1.0 allowed numbers), `url` the permalink (`external_url` only when there is none),
`date_published` then `date_modified` the date (RFC 3339), `summary` the summary, and
`content_html` / `content_text` the full text (which, as for feeds, only ever reaches
Temporary Content under `fullText: feed-content`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import FieldEvidence, ParsedFeed, Rejection
from radar_pipeline.core.parse.dates import parse_date
from radar_pipeline.core.parse.items import (
    TITLE_MAX,
    RawItem,
    RawText,
    build_parsed,
    invalid_item,
)
from radar_pipeline.core.parse.json_api import load_json
from radar_pipeline.core.text import one_line

VERSION_PREFIX = "https://jsonfeed.org/version/1"


def parse_json_feed(
    source_id: str,
    body: bytes,
    *,
    base_url: str,
    now: datetime,
    window_from: datetime | None,
) -> ParsedFeed:
    """The feed's items as candidates, items outside the window and rejections.

    Raises ParseError("not-a-feed") for a body that is not a JSON Feed (not JSON, no JSON Feed
    `version`, or no `items` list).
    """
    try:
        document = load_json(body)
    except ParseError as exc:
        raise ParseError("not-a-feed", f"not a JSON Feed: {exc.message}") from exc
    version = document.get("version") if isinstance(document, Mapping) else None
    if not isinstance(version, str) or not version.startswith(VERSION_PREFIX):
        raise ParseError("not-a-feed", "no JSON Feed `version` (https://jsonfeed.org/version/1.1)")
    entries = document.get("items")
    if not isinstance(entries, list):
        raise ParseError("not-a-feed", "the JSON Feed has no `items` list")
    items = [_raw_item(position, entry) for position, entry in enumerate(entries)]
    title = document.get("title")
    feed_title = one_line(title, TITLE_MAX) if isinstance(title, str) else None
    return build_parsed(
        source_id,
        items,
        base_url=base_url,
        now=now,
        window_from=window_from,
        feed_title=feed_title or None,
    )


def _raw_item(position: int, entry: Any) -> RawItem | Rejection:
    try:
        if not isinstance(entry, Mapping):
            raise ValueError("a JSON Feed item must be an object")
        evidence: list[FieldEvidence] = []

        def text(key: str, field: str) -> str | None:
            value = entry.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and key == "id":
                value = str(value)
            if not isinstance(value, str) or not value.strip():
                return None
            evidence.append(FieldEvidence(field, key, "value"))
            return value

        item_id = text("id", "id") or ""
        link = text("url", "link") or text("external_url", "link")
        title = text("title", "title")
        summary = text("summary", "summary")
        content: RawText | None = None
        if (html := text("content_html", "content")) is not None:
            content = RawText(html, html=True)
        elif (plain := text("content_text", "content")) is not None:
            content = RawText(plain, html=False)
        observed_at, observed_field = _date(entry, evidence)
        return RawItem(
            position=position,
            item_id=item_id,
            links=(link,) if link else (),
            title=RawText(title) if title is not None else None,
            summary=RawText(summary) if summary is not None else content,
            content=content,
            observed_at=observed_at,
            observed_field=observed_field,
            evidence=tuple(evidence),
            categories=tuple(t for t in _list(entry.get("tags")) if isinstance(t, str)),
        )
    except Exception as exc:  # one odd item never sinks the feed
        return invalid_item(position, exc)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _date(
    entry: Mapping[str, Any], evidence: list[FieldEvidence]
) -> tuple[datetime | None, str | None]:
    """`date_published`, else `date_modified`, when it is a date; never an invented one."""
    for key, field in (("date_published", "published"), ("date_modified", "updated")):
        value = entry.get(key)
        parsed = parse_date(value) if isinstance(value, str) else None
        if parsed is not None:
            evidence.append(FieldEvidence("date", key, "value"))
            return parsed, field
    return None, None
