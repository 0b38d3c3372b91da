"""Feed discovery for `radar sources add URL`: from a site page or a feed URL to the feeds it
offers, each verified by the parser its Source would use.

Where the candidates come from, in order:
1. the URL itself, when it answers with a feed (RSS, Atom or JSON Feed);
2. the page's head: `<link rel="alternate">` of type RSS, Atom or JSON Feed, and WordPress's
   `<link rel="https://api.w.org/">` (its REST API: the posts at `wp/v2/posts` become a `json`
   Source with the WordPress paths);
3. only when the head advertises nothing: the common feed paths on the page's origin
   (COMMON_PATHS), stopping at the first that answers with a feed.

Bounds: every request is the pipeline's own bounded fetch (timeouts, size cap, the address
policy on every hop and redirect, so a page cannot point discovery at a private address); the
page's markup is parsed up to the end of its head and no further (at most HEAD_MAX_BYTES: the
response itself arrives within the fetch's body cap, and nothing of its body is read, so no
link in it is followed); and beyond the URL itself at most MAX_CANDIDATE_FETCHES candidate
URLs are requested.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from radar_pipeline.core.acquire.fetch import Fetcher
from radar_pipeline.core.acquire.response import feed_root
from radar_pipeline.core.contract.sources import FeedCandidate as Candidate
from radar_pipeline.core.contract.sources import FeedKind as Kind
from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import FetchRequest, FetchResult, ParsedFeed
from radar_pipeline.core.parse.dispatch import parse_body
from radar_pipeline.core.parse.spec import JsonSpec
from radar_pipeline.core.text import one_line

# Requests for candidate URLs after the URL itself: a handful, never a crawl.
MAX_CANDIDATE_FETCHES = 6
HEAD_MAX_BYTES = 512 * 1024  # a head past this is not read (its links would be too)
COMMON_PATHS: tuple[tuple[str, Kind], ...] = (
    ("/feed", "rss"),
    ("/rss.xml", "rss"),
    ("/atom.xml", "atom"),
    ("/index.xml", "rss"),
    ("/feed.xml", "rss"),
    ("/feed.json", "jsonfeed"),
)
ALTERNATE_TYPES: dict[str, Kind] = {
    "application/rss+xml": "rss",
    "application/atom+xml": "atom",
    "application/feed+json": "jsonfeed",
    "application/json": "jsonfeed",  # JSON Feed 1.0 advertised itself so
}
WORDPRESS_REL = "https://api.w.org/"
WORDPRESS_POSTS = "wp/v2/posts"
# The documented WordPress REST paths (the same as the shipped wordpress fixture Source).
WORDPRESS_SPEC = JsonSpec(
    items_path="@",
    title_path="title.rendered",
    link_path="link",
    id_path="guid.rendered",
    date_path="date_gmt",
    summary_path="excerpt.rendered",
)


@dataclass(frozen=True)
class Discovery:
    """What one URL offers: the verified candidates, and why there are none when so."""

    candidates: tuple[Candidate, ...]
    problem: str | None = None  # the page itself could not be fetched: the fetch's error
    requests: int = 0  # requests made, the URL itself included


def discover(fetcher: Fetcher, url: str, now: datetime) -> Discovery:
    """The feeds `url` is or advertises (see the module for the order and the bounds)."""
    first = fetcher.fetch(_request(url, "html"), now)
    requests = 1
    if first.outcome == "failed" and first.error_class in ("not-html", "not-a-feed"):
        first = fetcher.fetch(_request(url, "jsonfeed"), now)  # a JSON Feed is no page
        requests += 1
    if first.outcome != "ok" or first.body is None:
        return Discovery((), first.error_message or f"fetch: {first.outcome}", requests)
    itself = _verified(first, feed_kind(first.body), now)
    if itself is not None:
        return Discovery((itself,), None, requests)
    head = read_head(first.body)
    leads = list(head.leads(first.final_url))
    advertised = bool(leads)
    if not advertised:
        origin = urljoin(first.final_url, "/")
        leads = [(urljoin(origin, path), kind) for path, kind in COMMON_PATHS]
    found: list[Candidate] = []
    for lead_url, kind in leads[:MAX_CANDIDATE_FETCHES]:
        if any(c.url == lead_url for c in found):
            continue
        result = fetcher.fetch(_request(lead_url, kind), now)
        requests += 1
        candidate = _verified(result, kind, now, head.title)
        if candidate is not None:
            found.append(candidate)
            if not advertised:
                break  # probing: the first feed that answers is enough
    return Discovery(tuple(found), None, requests)


def _request(url: str, method: str) -> FetchRequest:
    return FetchRequest(source_id="discovery", url=url, collection_method=method, conditional=False)


# A feed's root element (or JSON object) to the kind of Source that reads it.
_KIND_OF_ROOT: dict[str, Kind] = {"rss": "rss", "rdf": "rss", "feed": "atom", "json": "jsonfeed"}


def feed_kind(body: bytes) -> Kind | None:
    """rss, atom or jsonfeed when the body is a feed (by its root element), else None."""
    root = feed_root(body)
    return _KIND_OF_ROOT[root] if root is not None else None


def _verified(
    result: FetchResult, kind: Kind | None, now: datetime, fallback_title: str = ""
) -> Candidate | None:
    """The candidate `result` is, when its body parses as `kind` (None: no feed)."""
    if result.outcome != "ok" or result.body is None or kind is None:
        return None
    if kind != "json":  # what the body is decides, whatever the link said
        kind = feed_kind(result.body)
        if kind is None:
            return None
    try:
        parsed = parse_body(
            "discovery",
            result.body,
            method=kind,
            spec=WORDPRESS_SPEC if kind == "json" else None,
            base_url=result.final_url,
            content_type=result.content_type,
            now=now,
            window_from=None,
        )
    except (ParseError, ValueError):
        return None
    title = one_line(parsed.feed_title or fallback_title or "", 200, html=False)
    return Candidate(url=result.requested_url, kind=kind, title=title, items=_count(parsed))


def _count(parsed: ParsedFeed) -> int:
    return len(parsed.candidates) + len(parsed.outside_window) + len(parsed.rejections)


@dataclass
class PageHead:
    """What discovery reads of a page: its title and the links of its head."""

    title: str = ""
    links: tuple[tuple[str, str, str], ...] = ()  # (rel, type, href)

    def leads(self, base_url: str) -> Iterator[tuple[str, Kind]]:
        """Advertised feeds in the page's order, then the WordPress posts of its REST API."""
        wordpress: list[tuple[str, Kind]] = []
        for rel, media_type, href in self.links:
            target = urljoin(base_url, href.strip())
            if urlsplit(target).scheme not in ("http", "https"):
                continue
            rels = rel.lower().split()
            if "alternate" in rels and media_type in ALTERNATE_TYPES:
                yield target, ALTERNATE_TYPES[media_type]
            elif WORDPRESS_REL in rels:
                api = target if target.endswith("/") else target + "/"
                wordpress.append((urljoin(api, WORDPRESS_POSTS), "json"))
        yield from wordpress[:1]


class _HeadReader(HTMLParser):
    """Collects `<title>` and `<link>` until the head ends (stdlib parser: no network)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.head = PageHead()
        self.done = False
        self._in_title = False
        self._title: list[str] = []
        self._links: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag == "body":
            self.done = True
        elif tag == "title":
            self._in_title = True
        elif tag == "link":
            values = {k.lower(): (v or "") for k, v in attrs}
            media_type = values.get("type", "").split(";")[0].strip().lower()
            self._links.append((values.get("rel", ""), media_type, values.get("href", "")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self.done = True
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title and not self.done:
            self._title.append(data)

    def result(self) -> PageHead:
        title = one_line("".join(self._title), 200, html=False)
        return PageHead(title, tuple(self._links))


def read_head(body: bytes) -> PageHead:
    """The head of an HTML page: read in chunks, and not a byte past its end."""
    reader = _HeadReader()
    text = body[:HEAD_MAX_BYTES].decode("utf-8", errors="replace")
    for start in range(0, len(text), 8192):
        reader.feed(text[start : start + 8192])
        if reader.done:
            break
    return reader.result()
