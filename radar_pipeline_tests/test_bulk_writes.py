"""The one-statement writes behind a collection's commit keep ON CONFLICT / upsert semantics."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.store.feed_state import FeedState, load_states, save_state, save_states
from radar_pipeline.core.store.fetch_attempts import planning_state, record_fetches
from radar_pipeline.core.vault.index import insert_signal_rows
from radar_pipeline_tests.conftest import fresh_store

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _row(
    signal_id: str, identity: str, source: str, url: str, fragment: str = ""
) -> tuple[Any, ...]:
    return (
        signal_id,
        identity,
        1,
        source,
        f"item-{signal_id}",
        url,
        "t",
        NOW.date(),
        "h",
        7,
        NOW,
        None,
        f"Radar/Signals/{signal_id}.md",
        fragment,  # link_fragment
    )


def test_insert_signal_rows_skips_every_kind_of_conflict(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    with store.transaction() as con:
        insert_signal_rows(con, [_row("s1", "i1", "a", "https://x/1")])
    with store.transaction() as con:
        insert_signal_rows(
            con,
            [
                _row("s1", "i9", "a", "https://x/9"),  # signal id taken
                _row("s2", "i1", "a", "https://x/2"),  # identity taken
                _row("s3", "i3", "a", "https://x/1"),  # (Source, canonical URL) taken
                _row("s4", "i4", "b", "https://x/1"),  # same URL, other Source: new
                _row("s5", "i5", "b", "https://x/5"),
                _row("s6", "i5", "b", "https://x/6"),  # repeats s5's identity in the batch
                _row("s7", "i7", "a", "https://x/1", "entry-2"),  # another fragment: new
                _row("s8", "i8", "a", "https://x/1", "entry-2"),  # repeats s7's link key
            ],
        )
        rows = con.execute("SELECT signal_id, identity, simhash FROM signals ORDER BY 1").fetchall()
    assert rows == [("s1", "i1", 7), ("s4", "i4", 7), ("s5", "i5", 7), ("s7", "i7", 7)]


def test_save_states_upserts_and_last_state_wins(tmp_path: Path) -> None:
    store = fresh_store(tmp_path)
    with store.transaction() as con:
        save_state(con, FeedState("a", etag='"1"', consecutive_failures=2))
    with store.transaction() as con:
        save_states(
            con,
            [
                FeedState("a", etag='"2"', last_success_at=NOW, last_status=304),
                FeedState("b", error_state="network", consecutive_failures=1, backoff_until=NOW),
                FeedState("b", error_state="http-5xx", consecutive_failures=2),
            ],
        )
        states = load_states(con)
    assert states["a"] == FeedState("a", etag='"2"', last_success_at=NOW, last_status=304)
    assert states["b"] == FeedState("b", error_state="http-5xx", consecutive_failures=2)
    assert len(states) == 2


def test_planning_state_of_some_sources_reads_only_theirs(tmp_path: Path) -> None:
    """A slice plans on its own Sources' states: with ids, `planning_state` gives those
    Sources' states (a fetch no commit recorded still counts for them) and no other Source's;
    without, every Source's."""
    store = fresh_store(tmp_path)
    with store.transaction() as con:
        save_states(con, [FeedState(s, etag=f'"{s}"') for s in "abc"])
    # Fetches of a and c whose collection never committed (check_outcome stays NULL).
    url = "https://example.com/feed.xml"
    record_fetches(store, "killed", [FetchResult(s, url, url, "ok", NOW, status=200) for s in "ac"])
    some, _ = planning_state(store, {"a", "b"})
    assert some == {
        "a": FeedState("a", etag='"a"', last_fetch_at=NOW),
        "b": FeedState("b", etag='"b"'),
    }
    every, _ = planning_state(store)
    assert every == {**some, "c": FeedState("c", etag='"c"', last_fetch_at=NOW)}
    with store.transaction() as con:
        assert load_states(con, ["b", "gone"]) == {"b": FeedState("b", etag='"b"')}
