"""Frozen value types passed between the stages of one Source check.

fetch -> FetchResult -> parse -> ParsedFeed (ItemCandidate / Rejection) -> dedupe -> materialize.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

FetchOutcome = Literal["ok", "not-modified", "failed", "skipped"]
# What a request fetches: a Source's feed, an item's page (page extraction) or a robots.txt.
FetchPurpose = Literal["feed", "page", "robots"]


@dataclass(frozen=True)
class FetchRequest:
    """Everything the fetch stage needs for one Source check."""

    source_id: str
    url: str  # absolute http(s) URL, or for fixtures a vault-relative path
    collection_method: str  # rss | atom | jsonfeed | html | json | fixture (the parser to use)
    etag: str | None = None  # sent as If-None-Match when `conditional`
    last_modified: str | None = None  # sent as If-Modified-Since when `conditional`
    conditional: bool = True  # False forces the daily unconditional fetch
    auth_token: str | None = None  # bearer token value; never logged or stored
    previous_body_sha256: str | None = None  # a 200 with this hash counts as unchanged
    from_vault: bool = False  # a fixture Source: `url` is a vault-relative file, read offline
    purpose: FetchPurpose = "feed"  # decides the Accept header and what a 2xx body must be


@dataclass(frozen=True)
class FetchResult:
    """What one bounded request produced. `body` is None unless outcome is "ok"."""

    source_id: str
    requested_url: str
    final_url: str
    outcome: FetchOutcome
    fetched_at: datetime
    status: int | None = None
    body: bytes | None = None
    content_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    body_sha256: str | None = None
    bytes_received: int = 0
    duration_s: float = 0.0
    redirects: int = 0
    conditional: bool = False  # whether validators were sent
    unchanged_body: bool = False  # 200 whose body hash equals the previous one
    error_class: str | None = None  # one of errors.FETCH_ERROR_CLASSES when failed
    error_message: str | None = None  # redacted, one line
    retry_after_s: float | None = None
    # From sending the last hop's request to its answer's headers: what per-origin pacing
    # reads as the origin's latency (core/acquire/pacing.py); None when no answer came.
    response_wait_s: float | None = None
    # Feed manners (docs/obsidian.md and docs/operations.md say what acts on them):
    cache_max_age_s: int | None = None  # Cache-Control: max-age of the final response
    feed_ttl_s: int | None = None  # RSS <ttl> (minutes in the feed), in seconds
    permanent_redirect: str | None = None  # where 301/308 from the Source's URL lead
    permanently_gone: bool = False  # 410: the publisher says the feed is gone for good


@dataclass(frozen=True)
class FieldEvidence:
    """Which selector or path produced one field of an item (html, json and jsonfeed Sources):
    recorded in DuckDB beside the observation, so no field's origin is ever a guess."""

    field: str  # title | link | id | date | summary | content
    expression: str  # the CSS selector or JMESPath expression that matched
    origin: str  # what of the match was read: text, attr:href, attr:datetime, value; for a
    # feed's date: text, feedparser (its reading alone) or unreadable
    raw: str | None = None  # the text as written, where it explains the value (a feed's date)


@dataclass(frozen=True)
class ItemCandidate:
    """One feed item that can be identified, ready for dedupe."""

    source_item_id: str
    title: str  # plain text, sanitised
    link: str  # as given by the feed, resolved to absolute
    canonical_url: str  # canonicalised (identity input)
    identity: str  # 16 hex: hash(source id, canonical URL, source item id)
    observed_at: datetime | None  # the feed's own date, UTC; None if missing/unparseable
    observed_field: str | None  # "published" | "updated" | "date" (html/json) | None
    future_dated: bool  # observed_at lies beyond the tolerance in the future
    summary: str  # plain text, sanitised and bounded
    content: str | None  # full text from the feed (only used under Temporary Content)
    content_hash: str  # sha256 hex of the normalised summary/content
    title_key: str  # normalised title (for title + day secondary key)
    simhash: int  # 64-bit simhash of title + summary
    position: int  # index of the item in the feed
    evidence: tuple[FieldEvidence, ...] = ()  # html/json/jsonfeed: each field's selector or path
    categories: tuple[str, ...] = ()  # the feed's own categories or tags (include/exclude rules)
    # The identity the rule before ids were read as written gave this item (None: the same),
    # looked up beside `identity` so an item already in a vault keeps its Signal
    # (core/identity/legacy.py computes its key).
    earlier_identity: str | None = None
    earlier_item_id: str | None = None  # its item id under that rule, when it differs


@dataclass(frozen=True)
class Rejection:
    """A feed item that was not accepted, with the reason (never dropped silently)."""

    reason: str  # e.g. "unidentifiable", "no-link", "invalid-item"
    detail: str
    source_item_id: str | None = None
    position: int | None = None


@dataclass(frozen=True)
class FilteredItem:
    """A candidate a Source's include/exclude rule dropped: counted `filtered`, with the rule."""

    candidate: ItemCandidate
    rule: str  # e.g. "exclude: sponsored" or "include: no rule matched"


@dataclass(frozen=True)
class ParsedFeed:
    """The result of parsing one FetchResult body."""

    source_id: str
    candidates: tuple[ItemCandidate, ...] = ()
    rejections: tuple[Rejection, ...] = ()
    feed_title: str | None = None
    bozo: str | None = None  # feedparser's complaint, if the feed was ill-formed but usable
    warnings: tuple[str, ...] = field(default_factory=tuple)
    # Identifiable items dated before the recovery cap: counted and recorded, never decided
    # (their text is not extracted: only identity, link and date are filled in).
    outside_window: tuple[ItemCandidate, ...] = ()
    # Candidates a Source's include/exclude rule dropped before dedupe (collect/filtering.py).
    filtered: tuple[FilteredItem, ...] = ()


@dataclass(frozen=True)
class CleanupResult:
    """What one close did: files (links included) deleted, their bytes, files left after."""

    deleted: int
    bytes: int
    retained: int
    refused: tuple[str, ...] = ()  # "<path in Temporary Content>: <reason>" for entries kept
