"""From the items a parser found to a ParsedFeed: one path for feeds, pages and JSON answers.

Every parser (feed.py, html_page.py, json_api.py, json_feed.py) only reads its format into
`RawItem`s (the item's own id, its links, raw title/summary/content, its own date, and the
evidence of which selector or path produced each field). What makes an item a Signal candidate
is decided here, the same way for every format: identity (Source id, canonical URL, item id),
repeated ids, sanitising the text (core/text.py is the one boundary), the recovery cap
(`outside_window`) and the future-date flag. So a Signal reads the same whatever the method.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from radar_pipeline.core.identity.keys import (
    canonicalize_url,
    content_hash,
    identity_hash,
    normalize_title,
    simhash64,
)
from radar_pipeline.core.identity.legacy import legacy_keys
from radar_pipeline.core.identity.links import DocumentLinks, ItemKey, unique_item_id
from radar_pipeline.core.models import FieldEvidence, ItemCandidate, ParsedFeed, Rejection
from radar_pipeline.core.text import one_line, plain_text

FUTURE_TOLERANCE = timedelta(days=1)
TITLE_MAX = 300
SUMMARY_MAX = 2_000
CONTENT_MAX = 200_000
UNTITLED = "(untitled)"
CATEGORIES_MAX = 20  # categories kept per item (what include/exclude rules read)
CATEGORY_MAX = 100


@dataclass(frozen=True)
class RawText:
    """Text as the Source gave it; `html` says whether it is markup (unknown: treat as HTML, so
    no markup can slip through as text)."""

    value: str
    html: bool = True


@dataclass(frozen=True)
class RawItem:
    """One item as a parser found it, before identity and sanitising."""

    position: int  # index of the item in the feed, page or answer
    item_id: str  # the Source's own id for it (guid, idPath), "" when it has none
    links: tuple[str, ...]  # candidate links in order of preference; relative ones allowed
    title: RawText | None = None
    summary: RawText | None = None
    content: RawText | None = None
    observed_at: datetime | None = None  # the Source's own date, UTC; never an invented one
    observed_field: str | None = None
    evidence: tuple[FieldEvidence, ...] = ()
    categories: tuple[str, ...] = ()  # the item's own categories or tags, as written
    # What the parser library made of the id and links (feedparser resolves ids against the
    # feed's URL and copies a permalink guid into the links); None: the same as `item_id` /
    # `links`. Only the identity rule before ids were read as written reads them.
    resolved_id: str | None = None
    resolved_links: tuple[str, ...] | None = None

    @property
    def as_resolved(self) -> tuple[str, tuple[str, ...]]:
        """The id and links as the parser library resolved them."""
        return (
            self.item_id if self.resolved_id is None else self.resolved_id,
            self.links if self.resolved_links is None else self.resolved_links,
        )


@dataclass(frozen=True)
class _Entry:
    """One identifiable item before the recovery cap is applied."""

    source_item_id: str
    link: str
    canonical_url: str
    raw: RawItem
    earlier: ItemKey | None = None  # its key under the identity rule before (identity/legacy)


def build_parsed(
    source_id: str,
    items: Iterable[RawItem | Rejection],
    *,
    base_url: str,
    now: datetime,
    window_from: datetime | None,
    feed_title: str | None = None,
    bozo: str | None = None,
) -> ParsedFeed:
    """Candidates, items outside the window and reasoned rejections, in the Source's order:
    every item ends in exactly one of the three.

    Every identifiable item dated at or after `window_from` (the recovery cap), or undated, is
    a candidate; no count limit applies here (the per-check cap is the dedupe stage's, since
    only identity says which items still need work). Older items go to `outside_window`.
    """
    entries: list[_Entry] = []
    listed = list(items)
    rejections = [item for item in listed if isinstance(item, Rejection)]
    raws = [item for item in listed if not isinstance(item, Rejection)]
    urls = DocumentLinks(base_url)
    seen: dict[str, int] = {}
    earlier_keys = legacy_keys([raw.as_resolved for raw in raws], urls)
    for item, earlier in zip(raws, earlier_keys, strict=True):
        try:
            entry = _identify(item, urls)
        except Exception as exc:  # one bad item never sinks the check
            entry = invalid_item(item.position, exc)
        if isinstance(entry, Rejection):
            rejections.append(entry)
            continue
        entries.append(replace(_disambiguate(entry, seen), earlier=earlier))
    candidates, outside, more = _select(source_id, entries, now, window_from, urls)
    rejections.extend(more)
    rejections.sort(key=lambda r: -1 if r.position is None else r.position)
    return ParsedFeed(
        source_id=source_id,
        candidates=tuple(candidates),
        rejections=tuple(rejections),
        feed_title=feed_title,
        bozo=bozo,
        outside_window=tuple(outside),
    )


def invalid_item(position: int, exc: BaseException) -> Rejection:
    """The rejection of an item a parser could not even read (one never sinks the check)."""
    return Rejection("invalid-item", one_line(repr(exc), 300, html=False), None, position)


def _identify(item: RawItem, urls: DocumentLinks) -> _Entry | Rejection:
    """Give the item an id and canonical link, or a reason why it has none.

    The id is the item's own, as written; only an absolute http(s) id may stand in for a
    missing link (never one resolved against the feed's URL). An item without an id is known
    by its canonical link; a second one on the same page (links differing only by fragment)
    takes a suffix like any repeated id, and the fragment keeps the two apart in dedupe
    (docs/architecture.md, "Fragments")."""
    guid = item.item_id.strip()
    link = next((a for h in item.links if (a := urls.absolute_http(h)) is not None), None)
    if link is None and urls.canonical(guid) is not None:
        link = urls.absolute_http(guid)  # an id that is a permalink (an RSS guid)
    if link is None:
        reason = "no-link" if guid else "unidentifiable"
        detail = "no http(s) link and no absolute http(s) id"
        return Rejection(reason, detail, guid or None, item.position)
    canonical = urls.link(link)
    return _Entry(guid or canonical, link, canonical, item)


def is_absolute_http(value: str) -> bool:
    """Whether `value` is, as written, an absolute http(s) URL with a host."""
    try:
        canonicalize_url(value)
    except ValueError:
        return False
    return True


def _disambiguate(entry: _Entry, seen: dict[str, int]) -> _Entry:
    """Give a repeated id a deterministic suffix: `id#canonical_url`, then `#n`."""
    unique = unique_item_id(entry.source_item_id, entry.canonical_url, seen)
    return entry if unique == entry.source_item_id else replace(entry, source_item_id=unique)


def _select(
    source_id: str,
    entries: Sequence[_Entry],
    now: datetime,
    window_from: datetime | None,
    urls: DocumentLinks,
) -> tuple[list[ItemCandidate], list[ItemCandidate], list[Rejection]]:
    """Split the entries by the recovery cap, in order: candidates, outside the window, and
    those whose text could not be read."""
    candidates: list[ItemCandidate] = []
    outside: list[ItemCandidate] = []
    rejections: list[Rejection] = []
    for entry in entries:
        observed = entry.raw.observed_at
        try:
            if window_from is not None and observed is not None and observed < window_from:
                outside.append(_outside_candidate(source_id, entry, urls))
            else:  # text extraction only for items that are decided
                candidates.append(_candidate(source_id, entry, now, urls))
        except Exception as exc:  # one bad item never sinks the check
            detail = one_line(repr(exc), 300, html=False)
            rejections.append(
                Rejection("invalid-item", detail, entry.source_item_id, entry.raw.position)
            )
    return candidates, outside, rejections


def _identities(
    source_id: str, entry: _Entry, urls: DocumentLinks
) -> tuple[str, str | None, str | None]:
    """The item's identity, and its earlier identity and item id (under the identity rule
    before) where they differ."""
    identity = identity_hash(
        source_id, entry.canonical_url, entry.source_item_id, canonicalize=urls.link
    )
    if entry.earlier is None or entry.earlier == (entry.canonical_url, entry.source_item_id):
        return identity, None, None  # the same inputs: the same hash
    earlier = identity_hash(source_id, *entry.earlier, canonicalize=urls.link)
    if earlier == identity:
        return identity, None, None
    old_id = entry.earlier[1]
    return identity, earlier, old_id if old_id != entry.source_item_id else None


def _outside_candidate(source_id: str, entry: _Entry, urls: DocumentLinks) -> ItemCandidate:
    """An item older than the cap: its identity, link and date, to be counted and recorded.

    Its text is never read (it is never decided or written), so the text keys stay empty."""
    raw = entry.raw
    identity, earlier, earlier_item_id = _identities(source_id, entry, urls)
    return ItemCandidate(
        source_item_id=entry.source_item_id,
        title="",
        link=entry.link,
        canonical_url=entry.canonical_url,
        identity=identity,
        observed_at=raw.observed_at,
        observed_field=raw.observed_field,
        future_dated=False,
        summary="",
        content=None,
        content_hash="",
        title_key="",
        simhash=0,
        position=raw.position,
        evidence=raw.evidence,
        earlier_identity=earlier,
        earlier_item_id=earlier_item_id,
    )


def _candidate(source_id: str, entry: _Entry, now: datetime, urls: DocumentLinks) -> ItemCandidate:
    raw = entry.raw
    title = _text(raw.title, TITLE_MAX, single_line=True) or UNTITLED
    summary = _text(raw.summary, SUMMARY_MAX, single_line=False)
    content = _text(raw.content, CONTENT_MAX, single_line=False) or None
    observed_at = raw.observed_at
    identity, earlier, earlier_item_id = _identities(source_id, entry, urls)
    return ItemCandidate(
        source_item_id=entry.source_item_id,
        title=title,
        link=entry.link,
        canonical_url=entry.canonical_url,
        identity=identity,
        observed_at=observed_at,
        observed_field=raw.observed_field,
        future_dated=observed_at is not None and observed_at > now + FUTURE_TOLERANCE,
        summary=summary,
        content=content,
        content_hash=content_hash(content or summary or title),
        title_key=normalize_title(title),
        simhash=simhash64(f"{title} {summary}"),
        position=raw.position,
        evidence=raw.evidence,
        categories=tuple(
            text
            for value in raw.categories[:CATEGORIES_MAX]
            if (text := one_line(value, CATEGORY_MAX, html=False))
        ),
        earlier_identity=earlier,
        earlier_item_id=earlier_item_id,
    )


def _text(raw: RawText | None, max_len: int, *, single_line: bool) -> str:
    if raw is None or not raw.value:
        return ""
    if single_line:
        return one_line(raw.value, max_len, html=raw.html)
    return plain_text(raw.value, max_len, html=raw.html)
