"""The whole path on real parts, without Dagster: Collector stages over a temp vault and DuckDB."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import feedparser
import pytest

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.collect.results import FetchedChecks
from radar_pipeline.core.collect.workers import MIN_PARALLEL_BODIES
from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.vault.signals import PROVENANCE_FIELDS, read_signal_frontmatter
from radar_pipeline_tests.conftest import CORPUS_REAL, collect_stages, new_collection_id
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
REAL_FEEDS = {
    "openai-news": "openai-2.xml",
    "github-changelog": "github-changelog-1.xml",
    "cloudflare-blog": "cloudflare-1.xml",
}


def collect(
    env: dict[str, Path], mode: str = "all", as_of: datetime = AS_OF, sources: tuple[str, ...] = ()
) -> dict:
    collector = Collector(Settings.from_env())  # the vault and store of `env`
    spec = CollectionSpec(new_collection_id(), mode, as_of, sources)  # type: ignore[arg-type]
    return collect_stages(collector, spec).json_object()


def test_fixture_source_created_then_reused(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", rss([{"title": "Hello", "guid": "g-1", "link": "https://example.com/a"}])
    )
    first = collect(radar_env)
    assert (first["created"], first["reused"], first["failed"]) == (1, 0, 0)
    second = collect(radar_env)
    assert (second["created"], second["reused"]) == (0, 1)
    assert len(signal_files(vault)) == 1
    assert first["scopes"]["fixture"]["created"] == 1
    assert first["scopes"]["production"]["created"] == 0


def test_signal_round_trip_and_provenance(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault,
        "fixture",
        rss(
            [
                {
                    "title": "A: b # c",
                    "guid": "g-1",
                    "link": "https://example.com/a?utm_source=x",
                    "pubDate": "Sun, 29 Nov 2026 10:00:00 GMT",
                }
            ]
        ),
    )
    collect(radar_env)
    [path] = signal_files(vault)
    fm = read_signal_frontmatter(path)
    assert fm["id"] == path.stem
    assert fm["title"] == "A: b # c"
    assert fm["canonicalUrl"] == "https://example.com/a"
    assert fm["observedAt"] == "2026-11-29T10:00:00Z"
    assert fm["observationKind"] == "rss-observation"
    assert fm["publishedAt"] is None
    assert fm["sourceRecord"] == "Radar/Sources/fixture.md"
    for key in PROVENANCE_FIELDS:
        assert fm.get(key) not in (None, ""), key
    assert path.stem.endswith(fm["id"][-16:]) and path.stem.startswith("20261130T120000Z-")


@pytest.mark.parametrize("source_id", sorted(REAL_FEEDS))
def test_real_feed_over_http_every_item_one_signal(
    radar_env: dict[str, Path], feed_server: FeedServer, source_id: str
) -> None:
    vault = radar_env["vault"]
    body = (CORPUS_REAL / REAL_FEEDS[source_id]).read_bytes()
    url = feed_server.add(f"/{source_id}.xml", body)
    write_source(vault, source_id, url)
    # As of one hour after the feed's newest item: items older than the coverage window
    # (7 days + 1 h overlap) are recorded as outside coverage, every other item is a Signal.
    dates = [e.published_parsed for e in feedparser.parse(body).entries]
    stamps = [datetime(*d[:6], tzinfo=UTC) for d in dates]
    as_of = max(stamps) + timedelta(hours=1)
    inside = sum(1 for t in stamps if t >= as_of - timedelta(days=7, hours=1))
    first = collect(radar_env, as_of=as_of)
    report = first["sources"][0]
    assert report["outcome"] == "passed", report
    files = signal_files(vault)
    assert report["created"] == len(files) == inside > 0
    assert report["rejected"] == 0
    store = Store.of(Settings.from_env().paths)
    with store.transaction() as con:
        row = con.execute("SELECT count(*) FROM signals").fetchone()
    assert row is not None and row[0] == len(files)
    for path in files:
        fm = read_signal_frontmatter(path)
        assert fm["id"] == path.stem
        assert fm["requestedUrl"] == url
        assert fm["httpStatus"] == 200
        for key in PROVENANCE_FIELDS:
            assert fm.get(key) not in (None, ""), (path.name, key)
    second = collect(radar_env, as_of=as_of + timedelta(hours=6))
    assert second["created"] == 0
    assert len(signal_files(vault)) == len(files)


def test_failing_source_does_not_stop_others(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", rss([{"title": "x", "guid": "1", "link": "https://example.com/1"}])
    )
    write_source(
        vault,
        "broken",
        feed_server.add("/gone", b"no", status=500, headers={"Content-Type": "text/plain"}),
    )
    write_source(vault, "unresolvable", "https://nonexistent.invalid/feed.xml")
    report = collect(radar_env)
    outcomes = {s["id"]: (s["outcome"], s["errorClass"]) for s in report["sources"]}
    assert outcomes == {
        "fixture": ("passed", None),
        "broken": ("failed", "http-5xx"),
        "unresolvable": ("failed", "network"),
    }
    assert (report["passed"], report["failed"], report["created"]) == (1, 2, 1)
    store = Store.of(Settings.from_env().paths)
    with store.transaction() as con:
        rows = con.execute(
            "SELECT source_id, error_class FROM dead_letters ORDER BY source_id"
        ).fetchall()
    assert rows == [("broken", "http-5xx"), ("unresolvable", "network")]
    text = (vault / "Radar/Sources/broken.md").read_text()
    assert "errorState: http-5xx" in text


def test_crash_between_file_and_record_is_repaired(radar_env: dict[str, Path]) -> None:
    """A Signal file without an index row (killed after the file write) is indexed, not
    duplicated, by the next run."""
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", rss([{"title": "x", "guid": "1", "link": "https://example.com/1"}])
    )
    collect(radar_env)
    store = Store.of(Settings.from_env().paths)
    with store.transaction() as con:
        con.execute("DELETE FROM signals")
    again = collect(radar_env)
    assert (again["created"], again["reused"]) == (0, 1)
    assert len(signal_files(vault)) == 1


def test_the_fetch_stage_hands_its_started_parses_on_in_its_value(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """The overlap of fetch and parse travels in what the fetch stage returns (the `fetch`
    op's output): with enough bodies each parse starts as its fetch ends, and a Collector
    that did not fetch them parses that value alike, awaiting those parses."""
    ids = [f"feed-{n}" for n in range(MIN_PARALLEL_BODIES)]
    for sid in ids:
        item = {"title": sid, "guid": sid, "link": f"https://example.com/{sid}"}
        write_source(radar_env["vault"], sid, feed_server.add(f"/{sid}.xml", rss([item])))
    settings = Settings.from_env()
    spec = CollectionSpec(new_collection_id(), "all", AS_OF, ())
    with (
        Collector(settings, parse_workers=2) as fetching,
        Collector(settings, parse_workers=0) as other,
    ):
        plan = fetching.plan(spec)
        fetched = fetching.fetch(plan)
        assert sorted(fetched.parsing) == ids
        handed_over = other.parse(plan, fetched)
        assert all(future.done() for future in fetched.parsing.values())
        assert handed_over == other.parse(plan, FetchedChecks(fetched.results))
        assert sorted(r.plan.source_id for r in handed_over) == ids
        assert [len(r.parsed.candidates) if r.parsed else 0 for r in handed_over] == [1] * len(ids)


def test_a_collection_in_slices_records_each_slice_once_and_its_report_whole_at_the_end(
    radar_env: dict[str, Path],
) -> None:
    """Each slice's commit adds its report as a part of the collection's (the row's counts
    grow with it; the whole report is never read and written again mid-run): the report reads
    as every slice committed so far. The last step writes it whole, in plan order, and the
    parts go."""
    from radar_pipeline.core.collect.outline import outline_collection
    from radar_pipeline.core.collect.slices import check_step, finished_report
    from radar_pipeline.core.store.collections import report_for

    vault = radar_env["vault"]
    for n in range(3):
        items = [{"title": f"f{n}", "guid": f"f{n}", "link": f"https://e.x/{n}"}]
        write_fixture_source(vault, f"f{n}", rss(items))
    settings = Settings.from_env()
    store = Store.of(settings.paths)
    run = new_collection_id()
    spec = CollectionSpec(run, "all", AS_OF, dagster_run_id=run)
    outline = outline_collection(store, settings, spec, size=1, step_slices=2)
    assert [len(step) for step in outline.steps] == [2, 1]

    def recorded() -> tuple[list[str], tuple[int, ...], int]:
        with store.transaction() as con:
            [totals] = con.execute(
                "SELECT passed, created FROM collections WHERE collection_id = $1", [run]
            ).fetchall()
            [(parts,)] = con.execute(
                "SELECT count(*) FROM collection_slices WHERE collection_id = $1", [run]
            ).fetchall()
        report = report_for(store, run)
        assert report is not None
        assert (report.totals.passed, report.totals.created) == totals
        return [s.id for s in report.sources], totals, parts

    with Collector(settings, parse_workers=1) as collector:
        check_step(collector, outline, 0)
        assert recorded() == (list(outline.source_ids[:2]), (2, 2), 1)
        check_step(collector, outline, 1)
    assert recorded() == (list(outline.source_ids), (3, 3), 2)
    report = finished_report(store, outline)
    assert recorded() == (list(outline.source_ids), (3, 3), 0)
    assert report == report_for(store, run) and report.collection_ids is None


class _CountingStore(Store):
    """The DuckDB file, counting the transactions opened on it."""

    opened = 0

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        self.opened += 1
        with super().transaction() as con:
            yield con


def test_a_plan_on_the_duckdb_file_is_one_transaction_that_holds_it_through_the_locks(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Planning reads the states, then takes the locks of the Sources it checks. On the DuckDB
    file both happen in one transaction: while it is open no other process can commit a check
    of them, so the states need no second read under the locks (on PostgreSQL they get one)."""
    for source_id in ("feed-a", "feed-b"):
        url = feed_server.add(f"/{source_id}.xml", rss([{"title": "T", "guid": source_id}]))
        write_source(radar_env["vault"], source_id, url)
    settings = Settings.from_env()
    store = _CountingStore(settings.paths.db)
    assert store.excludes_other_writers
    with Collector(settings, store=store) as collector:
        spec = CollectionSpec(new_collection_id(), "all", AS_OF, ())
        plan = collector.plan(spec)
        try:
            assert [c.source_id for c in plan.source_plans if c.request] == ["feed-a", "feed-b"]
            assert store.opened == 1
        finally:
            collector.locks.release_all(spec.collection_id)
