"""Coverage by identity, bounded by the 7-day cap (docs/architecture.md, invariants 2,
8 and 14): a loopback publisher serves feeds that behave as real ones do, the Collector (or the
real `radar` command) checks them, and the reports, vault files and store rows are compared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.identity.keys import identity_hash
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store
from radar_pipeline_tests.conftest import (
    collect_stages,
    new_collection_id,
    store_rows,
    store_url_under_test,
)
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

RADAR = str(Path(sys.executable).parent / "radar")
T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RSS_TYPE = {"Content-Type": "application/rss+xml; charset=utf-8"}
BODY = (
    "A substantive paragraph about release {n}: what changed, why it matters, and how to upgrade."
)


def collect(env: dict[str, Path], as_of: datetime, *sources: str) -> dict[str, Any]:
    mode = "explicit" if sources else "all"
    with Collector(Settings.from_env()) as collector:
        return collect_stages(
            collector, CollectionSpec(new_collection_id(), mode, as_of, sources)
        ).json_object()


def radar_collect(as_of: datetime) -> dict[str, Any]:
    proc = subprocess.run(
        [RADAR, "collect", "--as-of", format_utc(as_of), "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def source(report: dict[str, Any], source_id: str) -> dict[str, Any]:
    [found] = [s for s in report["sources"] if s["id"] == source_id]
    return found


def item(n: int, at: datetime | None, **fields: str) -> dict[str, str]:
    out = {
        "title": f"Release {n}",
        "guid": f"g{n}",
        "link": f"https://example.com/posts/{n}",
        "description": BODY.format(n=n),
    }
    if at is not None:
        out["pubDate"] = format_datetime(at, usegmt=True)
    out.update(fields)
    return out


def balanced(src: dict[str, Any]) -> bool:
    outcomes = ("created", "reused", "updated", "duplicates", "rejected", "deferred")
    return bool(src["itemsParsed"] == sum(src[k] for k in outcomes) + src["outsideWindow"])


# -- late items ---------------------------------------------------------------------------------


def test_backdated_item_is_created_and_counted_late(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Seed 002: a publisher adds an item dated three days back after our check. The next
    check takes it (inside the 7-day cap) although it is older than lastSuccessAt."""
    vault = radar_env["vault"]
    first_items = [item(1, T - timedelta(hours=2))]
    write_source(vault, "blog", feed_server.add("/blog.xml", rss(first_items)))
    first = source(radar_collect(T), "blog")
    assert first["created"] == 1

    feed_server.add("/blog.xml", rss([*first_items, item(2, T - timedelta(days=3))]))
    later = T + timedelta(hours=6)
    report = radar_collect(later)
    second = source(report, "blog")
    assert second["coverageFrom"] == format_utc(T - timedelta(hours=1))
    assert (second["created"], second["reused"]) == (1, 1)
    assert (first["late"], second["late"]) == (0, 1)
    assert (second["itemsParsed"], second["outsideWindow"], second["deferred"]) == (2, 0, 0)
    assert report["late"] == 1 and balanced(second)
    assert len(signal_files(vault)) == 2
    [(parsed, created, late)] = store_rows(
        "SELECT items_parsed, created, late FROM check_accounting "
        "WHERE source_id = 'blog' AND as_of = $1",
        [later],
    )
    assert (parsed, created, late) == (2, 1, 1)
    # The same figures in the Source's materialization metadata (the partition "blog").
    with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME is the temp home
        [meta] = [
            e.asset_materialization.metadata
            for e in instance.all_logs(
                report["collectionId"], of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
            )
            if e.asset_materialization is not None and e.asset_materialization.partition == "blog"
        ]
    figures = {k: meta[k].value for k in ("items_parsed", "created", "reused", "late")}
    assert figures == {"items_parsed": 2, "created": 1, "reused": 1, "late": 1}
    assert (meta["deferred"].value, meta["outside_window"].value) == (0, 0)


class LyingPublisher:
    """Answers 304 to any conditional request, whatever changed (a stale CDN)."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __call__(self, req: RequestHandler) -> None:
        if req.headers.get("If-None-Match") or req.headers.get("If-Modified-Since"):
            req.send_simple(304, b"", {})
            return
        headers = {**RSS_TYPE, "ETag": '"same"', "Last-Modified": "Mon, 02 Nov 2026 10:00:00 GMT"}
        req.send_simple(200, self.body, headers)


def test_item_hidden_by_a_lying_304_is_recovered_once_by_the_daily_unconditional_fetch(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    publisher = LyingPublisher(rss([item(1, T - timedelta(hours=1))]))
    write_source(vault, "cdn", feed_server.add("/cdn.xml", handler=publisher))
    assert source(collect(radar_env, T), "cdn")["created"] == 1
    # Published two hours after our check; the CDN keeps answering 304.
    publisher.body = rss([item(2, T + timedelta(hours=2)), item(1, T - timedelta(hours=1))])
    hidden = source(collect(radar_env, T + timedelta(hours=7)), "cdn")
    assert (hidden["outcome"], hidden["itemsParsed"], hidden["created"]) == ("not-modified", 0, 0)

    # lastSuccessAt is now T + 7 h: the item (T + 2 h) is older than the period covered.
    daily = source(collect(radar_env, T + timedelta(hours=25)), "cdn")
    assert (daily["outcome"], daily["conditional"]) == ("passed", False)
    assert (daily["created"], daily["reused"]) == (1, 1)
    assert daily["late"] == 1
    assert len(signal_files(vault)) == 2
    again = source(collect(radar_env, T + timedelta(hours=50)), "cdn")  # unchanged body
    assert (again["outcome"], again["created"]) == ("not-modified", 0)
    assert len(signal_files(vault)) == 2


# -- duplicates only on strong evidence -------------------------------------------------------


def atom(entries: list[tuple[str, str, str, str]]) -> bytes:
    """(id, title, link, summary) entries, all updated an hour before T."""
    at = format_utc(T - timedelta(hours=1))
    body = "".join(
        f"<entry><id>{i}</id><title>{t}</title><link rel='alternate' href='{link}'/>"
        f"<updated>{at}</updated><summary>{s}</summary></entry>"
        for i, t, link, s in entries
    )
    return (
        "<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'>"
        f"<title>t</title><id>urn:feed</id><updated>{at}</updated>{body}</feed>"
    ).encode()


def test_identical_boilerplate_summaries_are_three_signals(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    entries = [
        (f"urn:post:{n}", f"Post {n}", f"https://example.com/p/{n}", "Read more…") for n in range(3)
    ]
    url = feed_server.add(
        "/atom.xml", atom(entries), headers={"Content-Type": "application/atom+xml"}
    )
    write_source(vault, "atom", url, collectionMethod="atom")
    first = source(collect(radar_env, T), "atom")
    assert (first["created"], first["duplicates"], first["itemsParsed"]) == (3, 0, 3)
    # A longer template shared by every entry (a footer) is no evidence either, now or later.
    footer = "This post first appeared on the Example engineering blog; subscribe for more news."
    more = [
        (f"urn:post:{n}", f"Post {n}", f"https://example.com/p/{n}", footer) for n in range(3, 6)
    ]
    feed_server.add(
        "/atom.xml", atom(entries + more), headers={"Content-Type": "application/atom+xml"}
    )
    second = source(collect(radar_env, T + timedelta(hours=6)), "atom")
    assert (second["created"], second["reused"], second["duplicates"]) == (3, 3, 0)
    assert len(signal_files(vault)) == 6


def test_republication_under_a_new_guid_is_one_duplicate_of_the_first_signal(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    original = item(1, T - timedelta(hours=2))
    write_source(vault, "news", feed_server.add("/news.xml", rss([original])))
    assert source(collect(radar_env, T), "news")["created"] == 1
    [first_signal] = [p.stem for p in signal_files(vault)]

    # A day later the publisher re-issues it under a new guid, keeping its date (before
    # lastSuccessAt), and re-posts the same text under a new URL; an old post (10 days) too.
    again = {**original, "guid": "g1-republished"}
    moved = {**original, "guid": "g1-moved", "link": "https://example.com/moved/1"}
    old = item(9, T - timedelta(days=10), link="https://example.com/posts/1", guid="g1-old")
    others = [item(n, T - timedelta(hours=n)) for n in range(2, 6)]
    feed_server.add("/news.xml", rss([again, moved, original, *others, old]))
    later = T + timedelta(days=1)
    report = source(collect(radar_env, later), "news")
    assert (report["duplicates"], report["reused"], report["created"]) == (2, 1, 4)
    assert (report["outsideWindow"], report["itemsParsed"]) == (1, 8) and balanced(report)
    assert len(signal_files(vault)) == 5
    rows = store_rows(
        "SELECT source_item_id, outcome, signal_id FROM item_observations "
        "WHERE source_id = 'news' AND observed_in_run_at = $1 AND source_item_id LIKE 'g1%' "
        "ORDER BY source_item_id",
        [later],
    )
    assert rows == [
        ("g1", "reused", first_signal),
        ("g1-moved", "duplicate", first_signal),
        ("g1-old", "outside-window", None),
        ("g1-republished", "duplicate", first_signal),
    ]
    recorded = store_rows("SELECT identity, signal_id FROM duplicate_items")
    assert {sid for _, sid in recorded} == {first_signal} and len(recorded) == 2
    # Seen again, they stay duplicates of the same Signal.
    third = source(collect(radar_env, later + timedelta(hours=6)), "news")
    assert (third["outcome"], third["created"]) == ("not-modified", 0)  # same bytes
    feed_server.add("/news.xml", rss([again, moved, original, *others]))
    fourth = source(collect(radar_env, later + timedelta(hours=12)), "news")
    assert (fourth["duplicates"], fourth["reused"], fourth["created"]) == (2, 5, 0)


# -- the per-check cap and the recovery cap -------------------------------------------------------


def test_eighty_items_are_fifty_created_thirty_deferred_then_thirty_created(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    items = [item(n, T - timedelta(hours=1 + n)) for n in range(80)]  # newest first
    write_source(vault, "busy", feed_server.add("/busy.xml", rss(items)))
    first = source(collect(radar_env, T), "busy")
    assert (first["created"], first["itemsParsed"], first["rejected"]) == (50, 80, 0)
    assert first["deferred"] == 30 and balanced(first)
    titles = {
        p.read_text(encoding="utf-8").split("\ntitle: ")[1].split("\n")[0]
        for p in signal_files(vault)
    }
    assert titles == {f"Release {n}" for n in range(50)}  # the newest 50
    deferred = store_rows("SELECT count(*) FROM item_observations WHERE outcome = 'deferred'")
    assert deferred == [(30,)]

    second = source(collect(radar_env, T + timedelta(hours=6)), "busy")
    assert (second["created"], second["reused"], second["deferred"]) == (30, 50, 0)
    assert len(signal_files(vault)) == 80


def test_thirty_day_feed_is_mostly_outside_the_window(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """One item a day, half an hour before each day mark: days 0..7 are inside the cap
    (T - 7 d - 1 h), days 8..29 outside."""
    vault = radar_env["vault"]
    items = [item(n, T - timedelta(days=n, minutes=30)) for n in range(30)]
    items.append(item(99, None))  # undated: always eligible
    write_source(vault, "monthly", feed_server.add("/monthly.xml", rss(items)))
    report = collect(radar_env, T)
    src = source(report, "monthly")
    assert (src["itemsParsed"], src["created"]) == (31, 9)
    assert src["itemsParsed"] == src["created"] + src.get("outsideWindow", 0)
    assert src["outsideWindow"] == 22
    assert report["outsideWindow"] == 22 and report["deferred"] == 0 and balanced(src)
    outcomes = dict(
        store_rows(
            "SELECT outcome, count(*) FROM item_observations WHERE source_id = 'monthly' "
            "GROUP BY outcome",
        )
    )
    assert outcomes == {"created": 9, "outside-window": 22}
    [row] = store_rows(
        "SELECT items_parsed, created, outside_window, window_from FROM check_accounting",
    )
    assert row == (31, 9, 22, T - timedelta(days=7, hours=1))


# -- the index survives the rule change ----------------------------------------------------------


def test_duplicates_decided_under_the_old_rules_stay_duplicates_after_migration_7(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Under the earlier secondary-key rule a boilerplate summary made a second item a
    duplicate. Migration 7 keeps that decision (duplicate_items, seeded from the observations),
    so the new rules never turn the known item into a new Signal; a known Signal stays
    `reused`, never `updated`."""
    if store_url_under_test():  # PostgreSQL schemas start at version 11 (migrations.py)
        pytest.skip("a migration of the DuckDB file")
    vault = radar_env["vault"]
    a = item(1, T - timedelta(hours=1), description="Read more…")
    b = item(2, T - timedelta(hours=1), description="Read more…")
    url = feed_server.add("/old.xml", rss([a]))
    write_source(vault, "old", url)
    assert source(collect(radar_env, T), "old")["created"] == 1
    [signal] = [p.stem for p in signal_files(vault)]
    # The database as the previous version left it: schema 6, B recorded a duplicate of A.
    b_identity = identity_hash("old", "https://example.com/posts/2", "g2")
    with Store(radar_env["db"]).transaction() as con:
        con.execute(
            "INSERT INTO item_observations VALUES ('old-run', 'old', $1, $2, 'g2', "
            "'https://example.com/posts/2', $3, 'x', 'duplicate', $4, NULL)",
            [T, b_identity, T - timedelta(hours=1), signal],
        )
        con.execute("DROP TABLE check_accounting; DROP TABLE duplicate_items")
        con.execute("DROP TABLE source_items")
        con.execute("ALTER TABLE feed_state DROP COLUMN polite_until")  # migration 8's
        con.execute("DROP TABLE field_evidence")  # migration 9's
        con.execute("DROP TABLE page_state; DROP TABLE robots_cache")  # migration 10's
        con.execute("DROP TABLE vault_folder_state")  # migration 11's
        con.execute(  # migration 13's: `signals` back to its shape before (no link_fragment)
            "CREATE TABLE signals_v11 AS SELECT * EXCLUDE (link_fragment) FROM signals; "
            "DROP TABLE signals; ALTER TABLE signals_v11 RENAME TO signals"
        )
        con.execute("ALTER TABLE audit_signal_files DROP COLUMN temporary_text")  # 14's
        con.execute("DROP TABLE collection_slices")  # 15's
        con.execute("DELETE FROM schema_migrations WHERE version >= 7")
    Store.forget_migrations()

    feed_server.add("/old.xml", rss([a, b]))
    report = source(collect(radar_env, T + timedelta(hours=6)), "old")
    assert (report["created"], report["duplicates"], report["reused"]) == (0, 1, 1)
    assert report["updated"] == 0 and len(signal_files(vault)) == 1
    assert store_rows("SELECT identity, signal_id FROM duplicate_items") == [(b_identity, signal)]


def test_wider_eligibility_adds_no_revisions_of_items_older_than_the_covered_period(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Every item inside the cap is looked at again on every check now; a known item dated
    before coverageFrom whose text changed stays `reused` (the rule before never saw it), while
    one inside the covered period is `updated` as before."""
    vault = radar_env["vault"]
    old, recent = item(1, T - timedelta(days=3)), item(2, T - timedelta(minutes=30))
    write_source(vault, "edits", feed_server.add("/edits.xml", rss([recent, old])))
    assert source(collect(radar_env, T), "edits")["created"] == 2
    edited = [
        {**recent, "description": "Recent, revised: " + BODY.format(n=2)},
        {**old, "description": "Old, revised: " + BODY.format(n=1)},
    ]
    feed_server.add("/edits.xml", rss(edited))
    second = source(collect(radar_env, T + timedelta(hours=6)), "edits")
    assert (second["updated"], second["reused"], second["created"]) == (1, 1, 0)
    assert store_rows("SELECT count(*) FROM signal_revisions") == [(1,)]
