"""The page pass of one Source in one check: its open pages, oldest Signal first, fetched
within the Source's `pageBudget` and extracted into Temporary Content.

The rules (docs/operations.md, "Page extraction"; docs/architecture.md, invariant 15):
- only Sources whose own policy says `fullText: page-extraction`, never as a fallback;
- the budget counts page requests; robots.txt requests are counted apart (`robotsFetched`);
- robots.txt decides first: a disallowed page is settled without a request;
- at least `interval_s` between two requests to one host in the collection, or the
  origin's robots.txt `Crawl-delay` when longer; a page that would wait more than
  MAX_CRAWL_WAIT_S for it is left pending for a later collection, not sent;
- the first 403, 429 or challenge page stops the pass; the rest stays pending;
- a page's text goes to Temporary Content only, never to the Signal, never to DuckDB.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import httpx

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.extract.robots import RobotsBook, is_blocking
from radar_pipeline.core.extract.text import EXTRACTOR, extract_main_text
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.store.pages import PageResult, PageRow
from radar_pipeline.core.vault.temporary import write_temporary_text

DEFAULT_INTERVAL_S = 1.0
# The longest a collection waits for a host's Crawl-delay; a longer delay defers the page to a
# later collection (hourly, so even a host asking for an hour between requests is served).
MAX_CRAWL_WAIT_S = 30.0
MAX_ATTEMPTS = 3  # a page failing this often for a passing reason is given up (failed)
# Failures worth another try by a later check; any other failure settles the page.
TRANSIENT = frozenset({"timeout", "network", "http-5xx"})


@dataclass(frozen=True)
class PageSettings:
    """Limits of page extraction that a caller may set (tests lower the interval)."""

    interval_s: float = DEFAULT_INTERVAL_S  # between two requests to one host
    max_attempts: int = MAX_ATTEMPTS


@dataclass
class HostPacer:
    """Keeps `interval_s` between requests to one host for one collection, and the host's
    robots.txt `Crawl-delay` between its page requests when that is longer (mutable state)."""

    interval_s: float
    last: dict[str, float] = field(default_factory=dict)  # host -> its last request's start
    last_page: dict[str, float] = field(default_factory=dict)  # host -> its last page's

    def wait(self, url: str, crawl_delay: float | None = None) -> bool:
        """Sleep until a request to the url's host may start, and count it as started; False,
        without sleeping, when the host's Crawl-delay (given for a page) would hold the
        collection longer than MAX_CRAWL_WAIT_S: the page is left for a later collection."""
        host = httpx.URL(url).host
        now = time.monotonic()
        ready = self.last[host] + self.interval_s if host in self.last else now
        if crawl_delay is not None and host in self.last_page:
            ready = max(ready, self.last_page[host] + crawl_delay)
        if ready - now > MAX_CRAWL_WAIT_S:
            return False
        if ready > now:
            time.sleep(ready - now)
        self.last[host] = time.monotonic()
        if crawl_delay is not None:
            self.last_page[host] = self.last[host]
        return True


@dataclass(frozen=True)
class SourcePages:
    """What the page pass did for one Source."""

    source_id: str
    results: tuple[PageResult, ...] = ()
    blocked_by: FetchResult | None = None  # the answer that stopped the pass, if any
    stopped: int = 0  # pages not fetched because the pass stopped (the blocking one included)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


def page_pass(
    vault: Path,
    pages: Sequence[PageRow],
    budget: int,
    fetch_page: Callable[[str], FetchResult],
    robots: RobotsBook,
    now: datetime,
    settings: PageSettings,
) -> SourcePages:
    """Fetch and extract `pages` (oldest first) until the budget is spent or a publisher
    refuses us; every page looked at gets a result, the others stay as they were."""
    source_id = pages[0].source_id if pages else ""
    results: list[PageResult] = []
    requests = 0
    for position, page in enumerate(pages):
        if requests >= budget:  # before robots.txt too: a spent budget contacts no one
            break
        verdict = robots.verdict(page.page_url)
        if verdict.state == "blocked":
            return _stopped(source_id, results, pages[position:], verdict.blocked_by)
        if verdict.state == "unreachable":
            continue  # robots.txt unknown: the page waits for a later check
        if not verdict.allows(page.page_url):
            results.append(
                PageResult(page.signal_id, "disallowed", f"robots.txt of {verdict.origin}")
            )
            continue
        fetched = fetch_page(page.page_url)
        if fetched.outcome == "skipped":  # not sent (the host's Crawl-delay): later, untouched
            break
        requests += 1
        if is_blocking(fetched):
            return _stopped(source_id, results, pages[position:], fetched)
        results.append(_settle(vault, page, fetched, now, settings))
    return SourcePages(source_id, tuple(results))


def _stopped(
    source_id: str,
    results: list[PageResult],
    rest: Sequence[PageRow],
    blocked_by: FetchResult | None,
) -> SourcePages:
    """The pass ends: the page that met the refusal is `stopped` (taken again after the
    backoff); the pages after it stay pending untouched."""
    first = rest[0]
    reason = _reason(blocked_by) if blocked_by else "refused"
    attempted = blocked_by is not None and blocked_by.requested_url == first.page_url
    results.append(
        PageResult(
            first.signal_id,
            "stopped",
            reason,
            attempted=attempted,
            final_url=blocked_by.final_url if blocked_by and attempted else None,
            http_status=blocked_by.status if blocked_by and attempted else None,
        )
    )
    return SourcePages(source_id, tuple(results), blocked_by, stopped=len(rest))


def _settle(
    vault: Path, page: PageRow, fetched: FetchResult, now: datetime, settings: PageSettings
) -> PageResult:
    """One answered page: its text into Temporary Content, or why not."""
    answered = PageResult(
        page.signal_id,
        "pending",
        attempted=True,
        final_url=fetched.final_url,
        http_status=fetched.status,
        bytes=fetched.bytes_received,
    )
    if fetched.outcome != "ok" or fetched.body is None:
        transient = fetched.error_class in TRANSIENT
        retry = transient and page.attempts + 1 < settings.max_attempts
        return replace(answered, status="pending" if retry else "failed", reason=_reason(fetched))
    text = extract_main_text(fetched.body, fetched.final_url)
    if text is None:
        return replace(answered, status="failed", reason="no main text found")
    header = {
        "pageUrl": fetched.final_url,
        "requestedUrl": page.page_url,
        "fetchedAt": format_utc(now),
        "extractor": EXTRACTOR,
    }
    try:
        written = write_temporary_text(vault, page.signal_id, page.title, text, header)
    except (VaultError, OSError) as exc:  # the page waits; a later check writes it
        return replace(answered, reason=f"vault: {exc}")
    return replace(answered, status="fetched", text_bytes=written, extractor=EXTRACTOR)


def _reason(result: FetchResult) -> str:
    return result.error_message or f"{result.outcome} ({result.status})"
