"""One clock per run: a collection launched with one time writes that time, and no other
"now", into every record it makes: the Signal notes, the Source notes' health keys and the
store's rows. Through the real `radar` entry point, a real vault, DuckDB file, Dagster
instance and loopback feed server; the time is years away from the wall clock, so a single
`datetime.now` anywhere on the path shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from radar_pipeline.cli import main
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

T = datetime(2031, 3, 4, 5, 6, 7, tzinfo=UTC)
# Times the collection computed from its clock: the recovery window's start (the clock less
# the 7-day cap, with its margin) and a failed Source's backoff end (the clock plus the backoff).
FROM_THE_CLOCK = {
    "check_accounting.coverage_from": lambda v: T - timedelta(days=8) < v < T,
    "check_accounting.window_from": lambda v: T - timedelta(days=8) < v < T,
    "feed_state.backoff_until": lambda v: T < v <= T + timedelta(hours=1),
    "fetch_attempts.backoff_until": lambda v: T < v <= T + timedelta(hours=1),
}
# Not the collection's: when the store's schema was made (the store's set-up), and when the
# store wrote the collection's row (core/store/collections.py: `now()` in SQL orders the
# collections as they happened; left to the store's owner, not a decision of the run).
NOT_THE_RUN = {"schema_migrations.applied_at", "collections.finished_at"}
# Columns that hold what a feed or a person said (an item's own date, a validator the
# publisher sent), not a time the collection took.
NOT_THE_CLOCK = {"observed_at", "observed_day", "last_modified", "published_at"}
ITEMS = [
    {"title": "One", "guid": "1", "link": "https://example.com/1"},
    {"title": "Two", "guid": "2", "link": "https://example.com/2"},
]


def _timestamps(store: Store) -> dict[str, set[object]]:
    """table.column -> the distinct values of every time column of the store that holds any."""
    with store.transaction() as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE data_type LIKE 'TIMESTAMP%' OR data_type = 'DATE'"
        ).fetchall()
        found: dict[str, set[object]] = {}
        for table, column, _type in columns:
            if column in NOT_THE_CLOCK:
                continue
            values = con.execute(
                f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL'
            ).fetchall()
            if values:
                found[f"{table}.{column}"] = {v for (v,) in values}
    return found


@pytest.mark.slow
def test_one_time_for_a_whole_collection_is_in_every_record(
    radar_env: dict[str, Path],
    feed_server: FeedServer,
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(vault, "fixture", rss(ITEMS[:1]))
    write_source(vault, "served", feed_server.add("/served.xml", rss(ITEMS)))
    write_source(vault, "broken", feed_server.add("/broken.xml", b"down", status=500))

    assert main(["collect", "--all", "--as-of", format_utc(T), "--json"]) == 2
    capsys.readouterr()

    stamp = format_utc(T)
    files = signal_files(vault)
    assert len(files) == 3
    for path in files:
        fm = read_signal_frontmatter(path)
        assert (fm["fetchedAt"], fm["collectedOn"]) == (stamp, T.date().isoformat()), path.name
        assert path.name.startswith(T.strftime("%Y%m%dT%H%M%SZ"))
    for source in ("fixture", "served", "broken"):
        fm, _ = split_frontmatter((vault / f"Radar/Sources/{source}.md").read_text())
        assert fm["lastAttemptAt"] == stamp, source
        assert fm.get("lastSuccessAt") in ({"broken": ""}.get(source, stamp), None), source
    found = _timestamps(store)
    assert found, "the collection wrote no time into the store"
    derived = {where: found.pop(where) for where in FROM_THE_CLOCK.keys() & found.keys()}
    assert all(FROM_THE_CLOCK[w](v) for w, values in derived.items() for v in values), derived
    wrong = {
        where: values
        for where, values in found.items()
        if where not in NOT_THE_RUN and values - {T, T.date()}
    }
    assert wrong == {}, wrong
    assert {"fetch_attempts.fetched_at", "collections.as_of"} <= found.keys()
