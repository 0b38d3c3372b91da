"""The feed farm: N loopback feeds built from the real corpus, with validators and latency.

Every feed is a fresh RSS 2.0 or Atom document of `ITEMS_PER_FEED` items whose titles, links,
guids and text come from the real publisher feeds in `radar_pipeline_tests/corpus/real/` (so
parse cost is the real one), each item made unique per feed (its own link, guid and content, so
nothing dedupes across feeds or within one) and dated within the last days relative to the
farm's clock (so a never-checked Source's coverage window, now - 7 days - 1 h, keeps them all).

Every response waits `latency_s` first (a publisher's round trip), carries an ETag and a
Last-Modified, and is a body-less 304 when the request's validators match. The farm counts what
it answered, so a benchmark can prove a re-run parsed nothing (zero 200s).

The feeds are spread over `ORIGINS` origins (one loopback server each, on its own ephemeral
port), feed i on origin i mod `ORIGINS`, as a real registry's Sources spread over publishers;
`origins=1` puts every feed on one origin (a team's release feeds on one code host), where the
fetch stage's per-origin pacing (core/acquire/pacing.py) is what users wait for.

A `Strain` makes every origin behave as a host under pressure: a 429 with Retry-After once it
has answered K requests, or a wait that grows with the requests it is serving at once. The
farm records each request's arrival (time, status) and the TCP connections it accepted, so a
benchmark can plot requests per second and show connection reuse.
"""

from __future__ import annotations

import hashlib
import html
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import feedparser

CORPUS = Path(__file__).resolve().parents[1] / "radar_pipeline_tests" / "corpus" / "real"
ITEMS_PER_FEED = 20
MIN_FEED_BYTES = 50_000
MAX_FEED_BYTES = 300_000
ORIGINS = 32


@dataclass(frozen=True)
class CorpusItem:
    """One entry of a real feed, reduced to what a feed document needs."""

    title: str
    link: str
    guid: str
    summary: str  # HTML
    content: str  # HTML, may be empty


@dataclass(frozen=True)
class Feed:
    path: str
    body: bytes
    etag: str
    last_modified: str
    content_type: str


def load_corpus(folder: Path = CORPUS) -> list[CorpusItem]:
    """Every entry of the real feeds that has a title and a link, in a fixed order."""
    items: list[CorpusItem] = []
    for path in sorted(folder.glob("*.xml")):
        parsed = feedparser.parse(path.read_bytes(), sanitize_html=False)
        for entry in parsed.entries:
            link = str(entry.get("link") or "")
            title = str(entry.get("title") or "")
            if not link.startswith("http") or not title:
                continue
            blocks = entry.get("content") or []
            content = str(blocks[0].get("value") or "") if blocks else ""
            items.append(
                CorpusItem(
                    title=title,
                    link=link,
                    guid=str(entry.get("id") or link),
                    summary=str(entry.get("summary") or ""),
                    content=content,
                )
            )
    if not items:
        raise RuntimeError(f"no feed items found in {folder}")
    return items


def build_feed(
    index: int, pool: list[CorpusItem], now: datetime, fresh: Sequence[datetime] = ()
) -> tuple[bytes, str]:
    """Feed number `index`: (document bytes, content type). Deterministic for (index, now,
    fresh). `fresh`: the dates of the items it published since (`FeedFarm.publish`), oldest
    first; each pushes the oldest item out.

    Its size is drawn between MIN_FEED_BYTES and MAX_FEED_BYTES; the item text budget is
    corrected twice against the rendered size (markup and Atom's escaping vary by item).
    """
    rng = random.Random(index)
    target = rng.randint(MIN_FEED_BYTES, MAX_FEED_BYTES)
    order = list(range(len(pool)))
    rng.shuffle(order)
    per_item = target // ITEMS_PER_FEED
    doc = b""
    for _ in range(3):
        doc = _render(index, pool, order, now, per_item, fresh)
        if MIN_FEED_BYTES <= len(doc) <= MAX_FEED_BYTES:
            break
        per_item = max(200, per_item + (target - len(doc)) // ITEMS_PER_FEED)
    atom = index % 2 == 1
    return (
        doc,
        "application/atom+xml; charset=utf-8" if atom else "application/rss+xml; charset=utf-8",
    )


def _render(
    index: int,
    pool: list[CorpusItem],
    order: list[int],
    now: datetime,
    per_item: int,
    fresh: Sequence[datetime] = (),
) -> bytes:
    atom = index % 2 == 1
    now = now.replace(microsecond=0)
    entries: list[str] = []
    for position in range(ITEMS_PER_FEED):
        # Item j is the feed's j-th at the start; a published one is -1, -2, ... (newest first).
        j = position - len(fresh)
        src = pool[order[j % len(order)]]
        tag = f"f{index}i{j}"
        link = f"{src.link.split('#', 1)[0].rstrip('/')}/{tag}"
        guid = f"{src.guid.rstrip('/')}/{tag}"
        title = f"{src.title} ({tag})"
        # Unique text per item: identical content would be a same-Source duplicate.
        parts = [f"<p>Farm item {tag}.</p>", src.content or src.summary]
        extra = j
        while sum(map(len, parts)) < per_item and extra < j + len(pool):
            # Short items borrow more real text so the feed reaches its drawn size.
            extra += 1
            more = pool[order[extra % len(order)]]
            parts.append(more.content or more.summary)
        body_html = _fit("".join(parts), per_item)
        summary = _fit(src.summary, 2_000) or f"<p>{html.escape(title)}</p>"
        when = (
            fresh[-j - 1].replace(microsecond=0)
            if j < 0
            else now - timedelta(hours=5 * j + 1, minutes=index % 60)
        )
        entries.append(
            _atom_entry(title, link, guid, summary, body_html, when)
            if atom
            else _rss_item(title, link, guid, summary, body_html, when)
        )
    if atom:
        doc = (
            '<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>Farm feed {index}</title><id>tag:farm.test,2026:{index}</id>"
            f'<link rel="alternate" href="https://farm{index}.example.com/"/>'
            f"<updated>{now.isoformat()}</updated>" + "".join(entries) + "</feed>\n"
        )
    else:
        doc = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel>'
            f"<title>Farm feed {index}</title><link>https://farm{index}.example.com/</link>"
            f"<description>Feed {index} of the benchmark farm</description>"
            + "".join(entries)
            + "</channel></rss>\n"
        )
    return doc.encode()


def _fit(text: str, limit: int) -> str:
    """Cut HTML at a tag boundary near `limit` characters (feeds carry whole paragraphs)."""
    if len(text) <= limit:
        return text
    cut = text.rfind(">", 0, limit)
    return text[: cut + 1] if cut > 0 else text[:limit]


def _cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def _rss_item(title: str, link: str, guid: str, summary: str, body: str, when: datetime) -> str:
    return (
        f"<item><title>{_cdata(title)}</title><link>{html.escape(link)}</link>"
        f'<guid isPermaLink="false">{html.escape(guid)}</guid>'
        f"<pubDate>{format_datetime(when, usegmt=True)}</pubDate>"
        f"<description>{_cdata(summary)}</description>"
        f"<content:encoded>{_cdata(body)}</content:encoded></item>"
    )


def _atom_entry(title: str, link: str, guid: str, summary: str, body: str, when: datetime) -> str:
    stamp = when.isoformat()
    return (
        f'<entry><title type="html">{html.escape(title)}</title>'
        f'<link rel="alternate" href="{html.escape(link)}"/><id>{html.escape(guid)}</id>'
        f"<published>{stamp}</published><updated>{stamp}</updated>"
        f'<summary type="html">{html.escape(summary)}</summary>'
        f'<content type="html">{html.escape(body)}</content></entry>'
    )


@dataclass(frozen=True)
class Strain:
    """How the farm's origins answer under pressure (None fields: not at all)."""

    rate_limit_after: int | None = None  # answer 429 + Retry-After once an origin served this many
    retry_after_s: int = 120
    latency_per_busy_s: float | None = None  # wait = this x (requests being served at once)


class _Handler(BaseHTTPRequestHandler):
    server: _OriginServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        farm = self.server.farm
        served, busy = self.server.arrive()
        try:
            self._answer(farm, served, busy)
        finally:
            self.server.leave()

    def _answer(self, farm: FeedFarm, served: int, busy: int) -> None:
        strain = farm.strain
        if strain.latency_per_busy_s is not None:
            time.sleep(strain.latency_per_busy_s * busy)
        elif farm.latency_s:
            time.sleep(farm.latency_s)
        if strain.rate_limit_after is not None and served >= strain.rate_limit_after:
            farm.arrived(429)
            farm.count("429")
            self._send(429, b"slow down", {"Retry-After": str(strain.retry_after_s)})
            return
        feed = farm.feeds.get(self.path.split("?", 1)[0])
        if feed is None:
            farm.arrived(404)
            farm.count("404")
            self._send(404, b"not found", {"Content-Type": "text/plain"})
            return
        validators = {"ETag": feed.etag, "Last-Modified": feed.last_modified}
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        if inm is not None or ims is not None:
            farm.count("conditional")
        fresh = inm == feed.etag if inm is not None else ims == feed.last_modified
        if fresh:
            farm.arrived(304)
            farm.count("304")
            self._send(304, b"", validators)
            return
        farm.arrived(200)
        farm.count("200")
        farm.count("bytes", len(feed.body))
        self._send(200, feed.body, {"Content-Type": feed.content_type, **validators})

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if status != 304 and body:
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                return


class _OriginServer(ThreadingHTTPServer):
    """One origin of the farm: a loopback server answering from the farm's feeds."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # 16 concurrent fetchers must never see a refused SYN

    def __init__(self, farm: FeedFarm, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.farm = farm
        self._lock = threading.Lock()
        self.served = 0  # requests since the farm's last reset
        self.busy = 0
        self.most_busy = 0  # the most requests served at once since the last reset

    def arrive(self) -> tuple[int, int]:
        """A request arrived: (requests served before it, requests being served with it)."""
        with self._lock:
            served, self.served = self.served, self.served + 1
            self.busy += 1
            self.most_busy = max(self.most_busy, self.busy)
            return served, self.busy

    def leave(self) -> None:
        with self._lock:
            self.busy -= 1

    def reset(self) -> None:
        with self._lock:
            self.served = self.most_busy = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.farm.count("connections")  # one a TCP connection: keep-alive shows as fewer
        super().process_request(request, client_address)

    def url(self, path: str) -> str:
        host, port = self.server_address[0], self.server_address[1]
        return f"http://{host!s}:{port}{path}"


class FeedFarm:
    """`n` feeds at /feed/<i>.xml over `origins` loopback servers (`ORIGINS`, fewer when there
    are fewer feeds); start() serves each in a thread."""

    def __init__(
        self,
        n: int,
        latency_s: float = 0.1,
        now: datetime | None = None,
        port: int = 0,
        origins: int | None = None,
        strain: Strain | None = None,
    ) -> None:
        self.latency_s = latency_s
        self.strain = strain or Strain()
        self.arrivals: list[tuple[float, int]] = []  # (monotonic time, status) per request
        self.now = now or datetime.now(UTC)
        pool = self._pool = load_corpus()
        self._fresh: dict[int, list[datetime]] = {}
        stamp = format_datetime(self.now.replace(microsecond=0), usegmt=True)
        self.feeds: dict[str, Feed] = {}
        for i in range(n):
            body, ctype = build_feed(i, pool, self.now)
            etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
            self.feeds[f"/feed/{i}.xml"] = Feed(f"/feed/{i}.xml", body, etag, stamp, ctype)
        count = origins or max(1, min(n, ORIGINS))
        # `port` fixes the first origin's port (a hand-run farm); the others are ephemeral.
        self.servers = [_OriginServer(self, port if k == 0 else 0) for k in range(count)]
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def urls(self, n: int | None = None) -> list[str]:
        """The first `n` feed URLs (all by default), in feed order: feed i on origin i mod K."""
        paths = list(self.feeds)[:n]
        return [self.servers[i % len(self.servers)].url(p) for i, p in enumerate(paths)]

    def publish(self, index: int, when: datetime) -> None:
        """Feed `index` publishes one new item dated `when`: its document, ETag and
        Last-Modified change (its oldest item scrolls out)."""
        fresh = self._fresh.setdefault(index, [])
        fresh.append(when)
        body, ctype = build_feed(index, self._pool, self.now, fresh)
        path = f"/feed/{index}.xml"
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        stamp = format_datetime(when.replace(microsecond=0), usegmt=True)
        self.feeds[path] = Feed(path, body, etag, stamp, ctype)

    def published(self) -> int:
        """Items published since the farm started (`publish`)."""
        return sum(len(v) for v in self._fresh.values())

    def count(self, key: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[key] += amount

    def arrived(self, status: int) -> None:
        with self._lock:
            self.arrivals.append((time.monotonic(), status))

    def reset(self, strain: Strain | None = None) -> None:
        """Forget arrivals and what each origin served (a new run), with a new strain."""
        self.strain = strain or Strain()
        with self._lock:
            self.arrivals = []
        for server in self.servers:
            server.reset()

    def most_busy(self) -> int:
        """The most requests one origin served at once since the last reset."""
        return max(server.most_busy for server in self.servers)

    def take_counts(self) -> dict[str, int]:
        """What the farm answered since the last call (requests by status, bytes sent)."""
        with self._lock:
            counts = dict(self._counts)
            self._counts.clear()
        return counts

    def feed_sizes(self) -> list[int]:
        return [len(f.body) for f in self.feeds.values()]

    def start(self) -> FeedFarm:
        for server in self.servers:
            # A long poll interval: it only bounds how fast stop() returns, and K servers
            # waking 20 times a second would cost the benchmark CPU.
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.farm [N] [LATENCY_MS] [PORT]`: serve the farm until interrupted
    (for profiling a single `radar collect` by hand; PORT is the first origin's)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 50
    latency_ms = float(args[1]) if len(args) > 1 else 100.0
    port = int(args[2]) if len(args) > 2 else 0
    farm = FeedFarm(n, latency_s=latency_ms / 1000, port=port).start()
    sys.stdout.write("\n".join(farm.urls()) + "\n")
    sys.stdout.flush()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        farm.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
