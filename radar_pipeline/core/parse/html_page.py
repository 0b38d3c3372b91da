"""Parse stage for `collectionMethod: html`: a changelog or news page -> ParsedFeed.

The items are the elements `itemSelector` matches; title, link, date and summary come from the
Source's selectors, relative to each item (CSS, through lxml and cssselect: one HTML stack with
page extraction). Every field records the selector that produced it (`FieldEvidence`); a field
whose selector matched nothing is absent, never guessed: a date exists only when its selector
matched an element whose `datetime` attribute or text is a date (core/parse/dates.py).
Relative links resolve against the page's URL. A page on which the selectors find nothing
(no item; or no item with a title, or with a link) has changed its markup: that is the
`extraction` failure, never "0 items, passed".

lxml's HTML parser reads no DTD, expands no external entity and fetches nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import lxml.html
from lxml import etree

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
from radar_pipeline.core.parse.spec import HtmlSpec, compile_selector
from radar_pipeline.core.text import one_line

_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def parse_html(
    source_id: str,
    body: bytes,
    *,
    spec: HtmlSpec,
    base_url: str,
    content_type: str | None,
    now: datetime,
    window_from: datetime | None,
) -> ParsedFeed:
    """The page's items as candidates, items outside the window and rejections.

    Raises ParseError("not-html") for a body that is not markup, and ParseError("extraction")
    when the selectors find no item, or no item with a title or a link.
    """
    root = _document(body, content_type)
    selectors = _Selectors(spec)
    elements = selectors.item(root)
    if not elements:
        raise ParseError(
            "extraction",
            f"itemSelector {spec.item_selector!r} matched nothing on the page: its markup "
            "changed; update the Source's selectors",
        )
    items = [_raw_item(position, el, selectors) for position, el in enumerate(elements)]
    _require_field(items, "title", "titleSelector", spec.title_selector)
    _require_field(items, "link", "linkSelector", spec.link_selector)
    titles = root.xpath("//title")
    page_title = one_line(titles[0].text_content(), TITLE_MAX, html=False) if titles else None
    return build_parsed(
        source_id,
        items,
        base_url=base_url,
        now=now,
        window_from=window_from,
        feed_title=page_title or None,
    )


class _Selectors:
    """A Source's selectors compiled once per page (XPath objects do not pickle)."""

    def __init__(self, spec: HtmlSpec) -> None:
        self.spec = spec
        self.item = compile_selector(spec.item_selector)
        self.title = compile_selector(spec.title_selector)
        self.link = compile_selector(spec.link_selector)
        self.date = compile_selector(spec.date_selector) if spec.date_selector else None
        self.summary = compile_selector(spec.summary_selector) if spec.summary_selector else None


def _document(body: bytes, content_type: str | None) -> Any:
    """The parsed page; ParseError("not-html") when the body is not markup at all."""
    head = body[:1024]
    for bom in _BOMS:
        head = head.removeprefix(bom)
    if not head.replace(b"\x00", b"").lstrip().startswith(b"<"):  # NULs: UTF-16 text
        raise ParseError("not-html", "the body does not start with markup: not an HTML page")
    parser = lxml.html.HTMLParser(encoding=_charset(content_type), no_network=True)
    try:
        root = lxml.html.document_fromstring(body, parser=parser)
    except (etree.ParserError, ValueError, LookupError) as exc:
        raise ParseError("not-html", f"the page cannot be parsed as HTML ({exc})") from exc
    if root is None:
        raise ParseError("not-html", "the page holds no HTML document")
    return root


def _charset(content_type: str | None) -> str | None:
    """The charset the server declared, if Python knows it (else lxml reads the page's own
    <meta charset>)."""
    for part in (content_type or "").split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip("\"'")
            try:
                "".encode(charset)
            except LookupError:
                return None
            return charset
    return None


def _raw_item(position: int, element: Any, selectors: _Selectors) -> RawItem | Rejection:
    """One matched element's fields, each with the selector that produced it."""
    try:
        spec = selectors.spec
        evidence: list[FieldEvidence] = []
        title = _first(selectors.title, element)
        if title is not None:
            evidence.append(FieldEvidence("title", spec.title_selector, "text"))
        href = _href(_first(selectors.link, element))
        if href is not None:
            evidence.append(FieldEvidence("link", spec.link_selector, href[1]))
        observed_at, date_origin = _date(selectors, element)
        if observed_at is not None and spec.date_selector:
            evidence.append(FieldEvidence("date", spec.date_selector, date_origin))
        summary = _first(selectors.summary, element) if selectors.summary else None
        if summary is not None and spec.summary_selector:
            evidence.append(FieldEvidence("summary", spec.summary_selector, "text"))
        return RawItem(
            position=position,
            item_id="",  # a page gives its items no id: the canonical link is the identity
            links=(href[0],) if href else (),
            title=RawText(_markup(title)) if title is not None else None,
            summary=RawText(_markup(summary)) if summary is not None else None,
            observed_at=observed_at,
            observed_field="date" if observed_at is not None else None,
            evidence=tuple(evidence),
        )
    except Exception as exc:  # one odd element never sinks the page
        return invalid_item(position, exc)


def _first(selector: etree.XPath, element: Any) -> Any | None:
    matches = [m for m in selector(element) if isinstance(getattr(m, "tag", None), str)]
    return matches[0] if matches else None


def _href(element: Any | None) -> tuple[str, str] | None:
    """The matched element's href, or that of its first `a` with one: (href, origin)."""
    if element is None:
        return None
    own = element.get("href")
    if own and own.strip():
        return own, "attr:href"
    for anchor in element.iterdescendants("a"):
        href = anchor.get("href")
        if href and href.strip():
            return href, "a[href]"
    return None


def _date(selectors: _Selectors, element: Any) -> tuple[datetime | None, str]:
    """The item's date from its `datetime` attribute or its text, or None; never guessed."""
    if selectors.date is None:
        return None, ""
    found = _first(selectors.date, element)
    if found is None:
        return None, ""
    attribute = found.get("datetime")
    if attribute:
        parsed = parse_date(attribute)
        if parsed is not None:
            return parsed, "attr:datetime"
    parsed = parse_date(found.text_content())
    return (parsed, "text") if parsed is not None else (None, "")


def _markup(element: Any) -> str:
    """The element as markup: core/text.py turns it into plain text as it does feed HTML."""
    return str(lxml.html.tostring(element, encoding="unicode", with_tail=False))


def _require_field(
    items: Sequence[RawItem | Rejection], field: str, key: str, selector: str
) -> None:
    """`extraction` when a required selector matched on none of the items."""
    read = [item for item in items if isinstance(item, RawItem)]
    if read and not any(e.field == field for item in read for e in item.evidence):
        raise ParseError(
            "extraction",
            f"{key} {selector!r} matched nothing in any of the {len(read)} items: the page's "
            "markup changed; update the Source's selectors",
        )
