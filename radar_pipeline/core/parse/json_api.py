"""Parse stage for `collectionMethod: json`: a JSON API answer -> ParsedFeed.

`itemsPath` (JMESPath) finds the list of items; `titlePath`, `linkPath`, `idPath`, `datePath`
and `summaryPath` are evaluated on each item (a WordPress REST `/wp-json/wp/v2/posts` answer:
`@`, `title.rendered`, `link`, `guid.rendered`, `date_gmt`, `excerpt.rendered`). A field is a
string (or a number, for ids); anything else (null, an object, a list) means the path did not
produce that field, and it stays absent. Each field records the path that produced it. String
values are read as HTML (REST APIs send rendered markup and entities), so core/text.py makes
them plain text as it does feed text. A date is read only from a string (a number could be
seconds or milliseconds: that would be a guess).

`itemsPath` yielding no list (the answer's structure changed), or no item yielding a title or
a link, is the `extraction` failure. An empty list is an answer with no items: 0 items, passed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jmespath.exceptions import JMESPathError

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import FieldEvidence, ParsedFeed, Rejection
from radar_pipeline.core.parse.dates import parse_date
from radar_pipeline.core.parse.items import RawItem, RawText, build_parsed, invalid_item
from radar_pipeline.core.parse.spec import JsonSpec, compile_path


def load_json(body: bytes) -> Any:
    """The decoded JSON document; ParseError("not-json") when the body is not JSON."""
    try:
        return json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        detail = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
        raise ParseError("not-json", f"the body is not JSON ({detail[:200]})") from exc


def parse_json(
    source_id: str,
    body: bytes,
    *,
    spec: JsonSpec,
    base_url: str,
    now: datetime,
    window_from: datetime | None,
) -> ParsedFeed:
    """The answer's items as candidates, items outside the window and rejections.

    Raises ParseError("not-json") for a body that is not JSON, and ParseError("extraction")
    when `itemsPath` yields no list, or no item yields a title or a link.
    """
    document = load_json(body)
    paths = _Paths(spec)
    try:
        found = paths.items.search(document)
    except JMESPathError as exc:  # e.g. a function given the wrong type by a changed answer
        raise ParseError(
            "extraction", f"itemsPath {spec.items_path!r} fails on this answer ({exc})"
        ) from exc
    if not isinstance(found, list):
        raise ParseError(
            "extraction",
            f"itemsPath {spec.items_path!r} yields {_kind(found)}, not a list of items: the "
            "answer's structure changed; update the Source's paths",
        )
    items = [_raw_item(position, value, paths) for position, value in enumerate(found)]
    _require_field(items, "title", "titlePath", spec.title_path)
    _require_field(items, "link", "linkPath", spec.link_path)
    return build_parsed(source_id, items, base_url=base_url, now=now, window_from=window_from)


class _Paths:
    """A Source's paths compiled once per answer."""

    def __init__(self, spec: JsonSpec) -> None:
        self.spec = spec
        self.items = compile_path(spec.items_path)
        self.fields: list[tuple[str, str, Any]] = [
            (field, path, compile_path(path))
            for field, path in (
                ("title", spec.title_path),
                ("link", spec.link_path),
                ("id", spec.id_path),
                ("date", spec.date_path),
                ("summary", spec.summary_path),
            )
            if path
        ]


def _raw_item(position: int, value: Any, paths: _Paths) -> RawItem | Rejection:
    """One item's fields, each with the path that produced it."""
    try:
        found: dict[str, str] = {}
        evidence: list[FieldEvidence] = []
        for field, path, compiled in paths.fields:
            text = _scalar(compiled.search(value), numbers=field == "id")
            if text is None:
                continue
            if field == "date":
                observed = parse_date(text)
                if observed is None:
                    continue
            found[field] = text
            evidence.append(FieldEvidence(field, path, "value"))
        observed_at = parse_date(found["date"]) if "date" in found else None
        return RawItem(
            position=position,
            item_id=found.get("id", ""),
            links=(found["link"],) if "link" in found else (),
            title=RawText(found["title"]) if "title" in found else None,
            summary=RawText(found["summary"]) if "summary" in found else None,
            observed_at=observed_at,
            observed_field="date" if observed_at is not None else None,
            evidence=tuple(evidence),
        )
    except Exception as exc:  # one odd item never sinks the answer
        return invalid_item(position, exc)


def _scalar(value: Any, *, numbers: bool) -> str | None:
    """A field's text: a non-empty string, or (for ids) a whole number; else None."""
    if isinstance(value, str):
        return value if value.strip() else None
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"a {type(value).__name__}"


def _require_field(items: Sequence[RawItem | Rejection], field: str, key: str, path: str) -> None:
    """`extraction` when a required path produced its field for none of the items."""
    read = [item for item in items if isinstance(item, RawItem)]
    if read and not any(e.field == field for item in read for e in item.evidence):
        raise ParseError(
            "extraction",
            f"{key} {path!r} yields nothing in any of the {len(read)} items: the answer's "
            "structure changed; update the Source's paths",
        )
