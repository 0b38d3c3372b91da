"""The one place that picks a parser by the Source's `collectionMethod`.

Every parser returns the same ParsedFeed (through parse/items.py), so what follows the parse
stage (dedupe, Signal files, commit, accounting) never asks which method a Source uses.
"""

from __future__ import annotations

from datetime import datetime

from radar_pipeline.core.models import ParsedFeed
from radar_pipeline.core.parse.feed import parse_feed
from radar_pipeline.core.parse.html_page import parse_html
from radar_pipeline.core.parse.json_api import parse_json
from radar_pipeline.core.parse.json_feed import parse_json_feed
from radar_pipeline.core.parse.spec import ExtractionSpec, HtmlSpec, JsonSpec

FEED_METHODS = frozenset({"rss", "atom", "fixture"})  # `fixture`: a feed file in the vault
_BOM = b"\xef\xbb\xbf"


def parse_body(
    source_id: str,
    body: bytes,
    *,
    method: str,
    spec: ExtractionSpec | None,
    base_url: str,
    content_type: str | None,
    now: datetime,
    window_from: datetime | None,
) -> ParsedFeed:
    """Parse one fetched body with the parser its Source's method names.

    Raises ParseError (a classified failure of this Source) and ValueError for a method or spec
    the registry should have refused (a bug: the collector reports it as a crash).
    """
    if method == "jsonfeed" or (method in FEED_METHODS and is_json_body(body)):
        # A feed URL may answer a JSON Feed (publishers offer both under one name, and feed
        # readers list JSON Feeds as rss outlines: NetNewsWire): its bytes, which no XML feed
        # starts with, decide.
        return parse_json_feed(source_id, body, base_url=base_url, now=now, window_from=window_from)
    if method in FEED_METHODS:
        return parse_feed(
            source_id,
            body,
            base_url=base_url,
            content_type=content_type,
            now=now,
            window_from=window_from,
        )
    if method == "html" and isinstance(spec, HtmlSpec):
        return parse_html(
            source_id,
            body,
            spec=spec,
            base_url=base_url,
            content_type=content_type,
            now=now,
            window_from=window_from,
        )
    if method == "json" and isinstance(spec, JsonSpec):
        return parse_json(
            source_id, body, spec=spec, base_url=base_url, now=now, window_from=window_from
        )
    raise ValueError(f"no parser for collectionMethod {method!r} with spec {spec!r}")


def is_json_body(body: bytes) -> bool:
    """Whether the body is a JSON object (its first character, after a BOM and whitespace, is
    `{`); no XML document starts so."""
    return body.removeprefix(_BOM).lstrip()[:1] == b"{"
