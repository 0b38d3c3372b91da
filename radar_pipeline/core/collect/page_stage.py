"""The page stage of a collection: queue the pages of new Signals with the commit, then run the
page pass of every checked `fullText: page-extraction` Source and record what it did.

The queue is written in the commit's transaction, so a Signal's page is pending from the moment
its Signal exists; a crash before the pass leaves it pending for the next check. The pass runs
outside any transaction (it waits on publishers); its results, the robots.txt cache, the
backoff of a refused Source and the report's `pages` figures land in one transaction after it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings
from radar_pipeline.core.acquire.pacing import origin_of
from radar_pipeline.core.acquire.response import deferred
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.commit import SourceWrite
from radar_pipeline.core.collect.results import DedupedCheck
from radar_pipeline.core.contract.collection import CollectionReport, PageFigures
from radar_pipeline.core.contract.outcomes import Decision, ItemOutcome
from radar_pipeline.core.errors import PAGE_BLOCKED
from radar_pipeline.core.extract.pages import HostPacer, PageSettings, SourcePages, page_pass
from radar_pipeline.core.extract.robots import RobotsBook, RobotsVerdict
from radar_pipeline.core.models import FetchPurpose, FetchRequest, FetchResult
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.plan.schedule import next_backoff, window_from
from radar_pipeline.core.registry.sources import SourceRecord
from radar_pipeline.core.store.collections import replace_report
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.feed_state import FeedState, load_states, save_state
from radar_pipeline.core.store.pages import (
    PageRow,
    RobotsEntry,
    count_open,
    enqueue_pages,
    open_queues,
    read_robots,
    record_page_results,
    save_robots_entries,
)
from radar_pipeline.core.vault.health import HealthUpdate, write_health

log = logging.getLogger(__name__)

PAGE_EXTRACTION = "page-extraction"


def extracts_pages(rec: SourceRecord) -> bool:
    """The Source's own policy allows pages; a Source read from the vault never uses the
    network."""
    return rec.source.full_text == PAGE_EXTRACTION and not rec.source.reads_vault


def enqueue_new_pages(
    con: Connection,
    spec: CollectionSpec,
    deduped: Sequence[DedupedCheck],
    writes: Sequence[SourceWrite],
) -> None:
    """One pending page per Signal this commit created for a page-extraction Source."""
    rows: list[PageRow] = []
    for item, write in zip(deduped, writes, strict=True):
        rec = item.result.plan.record
        if rec is None or not extracts_pages(rec) or item.result.failed:
            continue
        for dec in item.decisions:
            if dec.decision != Decision.NEW or not dec.candidate.link.startswith(
                ("http://", "https://")
            ):
                continue
            signal_id, outcome = write.outcomes[dec.candidate.identity]
            if outcome == ItemOutcome.CREATED:
                cand = dec.candidate
                rows.append(
                    PageRow(
                        signal_id,
                        rec.source.id,
                        cand.link,
                        cand.title,
                        spec.as_of,
                        cand.observed_at,
                    )
                )
    enqueue_pages(con, rows)


def page_sources(deduped: Sequence[DedupedCheck]) -> list[SourceRecord]:
    """The Sources whose check passed in this collection and whose policy allows pages."""
    return [
        rec
        for item in deduped
        if (rec := item.result.plan.record) is not None
        and extracts_pages(rec)
        and item.result.plan.skip_reason is None
        and not item.result.failed
    ]


def run_pages(
    store: Store,
    vault: Path,
    fetch_settings: FetchSettings,
    settings: PageSettings,
    spec: CollectionSpec,
    records: Sequence[SourceRecord],
    report: CollectionReport,
) -> CollectionReport:
    """Run the page pass of each page-extraction Source this collection checked (`records`,
    whose locks the caller holds: no other check of them overlaps); the report with its
    `pages` object filled in for those Sources (the others keep None)."""
    if not records:
        return report
    now, floor = spec.as_of, window_from(spec.as_of)
    ids = [r.source.id for r in records]
    expired, queues = open_queues(store, ids, floor, spec.collection_id)

    def load(origin: str) -> RobotsEntry | None:
        return read_robots(store, origin, now)

    passes: list[SourcePages] = []
    robots_fetched: dict[str, int] = {}
    verdicts: dict[str, RobotsVerdict] = {}  # per origin, for the whole collection
    with Fetcher(fetch_settings, vault) as fetcher:
        pacer = HostPacer(settings.interval_s)
        for rec in records:
            sid = rec.source.id

            def fetch(url: str, purpose: FetchPurpose, sid: str = sid) -> FetchResult:
                request = FetchRequest(sid, url, "page", conditional=False, purpose=purpose)
                # robots.txt requests are paced like pages; a page also by its origin's
                # Crawl-delay (its verdict is known: page_pass asks robots.txt first).
                verdict = verdicts.get(origin_of(url)) if purpose == "page" else None
                if not pacer.wait(url, verdict.crawl_delay() if verdict else None):
                    return deferred(request, now, f"Crawl-delay of {origin_of(url)}")
                return fetcher.fetch(request, now)

            robots = RobotsBook(load, lambda url: fetch(url, "robots"), now, verdicts)
            try:
                result = page_pass(
                    vault,
                    queues[sid],
                    rec.source.pages_per_check,
                    lambda url: fetch(url, "page"),
                    robots,
                    now,
                    settings,
                )
            except Exception:  # a bug in one Source's pass never costs the collection
                log.exception("page pass of %s failed; its pages stay pending", sid)
                result = SourcePages(sid)
            passes.append(replace(result, source_id=sid))
            robots_fetched[sid] = robots.fetches
            _save_robots(store, robots)
    return _record(store, spec, records, passes, expired, robots_fetched, report)


def _save_robots(store: Store, robots: RobotsBook) -> None:
    save_robots_entries(store, robots.fresh)
    robots.fresh.clear()


def _record(
    store: Store,
    spec: CollectionSpec,
    records: Sequence[SourceRecord],
    passes: Sequence[SourcePages],
    expired: dict[str, int],
    robots_fetched: dict[str, int],
    report: CollectionReport,
) -> CollectionReport:
    """Page results, the backoff of refused Sources and the `pages` figures, in one transaction."""
    by_id = {src.id: src for src in report.sources}
    health: list[HealthUpdate] = []

    def record(con: Connection) -> CollectionReport:
        states = load_states(con)
        for rec, done in zip(records, passes, strict=True):
            sid = rec.source.id
            record_page_results(con, done.results, spec.as_of, spec.collection_id)
            blocked = done.blocked_by
            src = by_id[sid]
            if blocked is not None:
                state = _blocked_state(states.get(sid) or FeedState(sid), blocked, spec.as_of)
                save_state(con, state)
                src = src.model_copy(
                    update={
                        "consecutive_failures": state.consecutive_failures,
                        "backoff_until": (
                            format_utc(state.backoff_until) if state.backoff_until else None
                        ),
                    }
                )
                health.append(
                    HealthUpdate(sid, rec.path, rec.record_path, {"errorState": PAGE_BLOCKED})
                )
                log.warning("page extraction of %s stopped: %s", sid, blocked.error_message)
            pages = PageFigures(
                fetched=done.count("fetched"),
                pending=count_open(con, sid),
                disallowed=done.count("disallowed"),
                stopped=done.stopped,
                failed=done.count("failed"),
                expired=expired.get(sid, 0),
                requests=sum(1 for r in done.results if r.attempted),
                robots_fetched=robots_fetched.get(sid, 0),
                blocked=blocked.error_message if blocked is not None else None,
            )
            by_id[sid] = src.model_copy(update={"pages": pages})
        recorded = report.model_copy(
            update={"sources": tuple(by_id[src.id] for src in report.sources)}
        )
        replace_report(con, spec.collection_id, recorded)
        return recorded

    report = store.atomically(record)
    for failure in write_health(health):
        log.warning("health of %s not written: %s", failure.source_id, failure.error)
    return report


def _blocked_state(state: FeedState, blocked: FetchResult, now: datetime) -> FeedState:
    """The Source waits after a refused page like after a refused feed: a 429 for its
    Retry-After, a 403 or a challenge page at least the challenge backoff (6 h)."""
    failures = state.consecutive_failures + 1
    rate_limited = blocked.status == 429 or blocked.error_class == "rate-limited"
    error_class = "rate-limited" if rate_limited else "challenge"
    rng = random.Random(f"{state.source_id}:pages:{failures}:{now.isoformat()}")
    backoff = next_backoff(
        failures, now, error_class=error_class, retry_after_s=blocked.retry_after_s, rng=rng
    )
    return replace(
        state, error_state=PAGE_BLOCKED, consecutive_failures=failures, backoff_until=backoff
    )
