"""The paths that keep a collection's cost flat as the index grows give the plain answers: the
semi-join lookups of a whole batch of keys, and the paused garbage collector."""

from __future__ import annotations

import gc
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core import dedupe, index
from radar_pipeline.core.store import Store, gc_paused

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _rows(count: int, rng: random.Random) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(count):
        identity = f"{i:016x}"
        signal_id = f"20261130T120000Z-{identity}"
        rows.append(
            (
                signal_id,
                identity,
                1,
                f"src-{i % 7}",
                f"item-{i}",
                f"https://example.com/{i % 90}/{i}",
                f"title {i % 40}",
                None,
                f"hash-{i % 60}",
                rng.getrandbits(64),
                NOW + timedelta(seconds=i),
                None,
                f"Radar/Signals/{signal_id}.md",
            )
        )
    return rows


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "radar.duckdb")
    with store.transaction() as con:
        index.insert_signals(con, _rows(300, random.Random(3)))
    return store


@pytest.mark.parametrize("count", [1, 50, 51, 400])
def test_batched_lookup_equals_a_filter_of_the_whole_table(store: Store, count: int) -> None:
    """Up to 50 keys take the IN list, more the semi-join: both are a plain filter."""
    rng = random.Random(count)
    with store.transaction() as con:
        everything = con.execute("SELECT identity, signal_id FROM signals").fetchall()
        bands = con.execute("SELECT band_key, signal_id FROM simhash_bands").fetchall()
        # Keys that exist and keys that do not, with repeats.
        wanted = [f"absent-{i}" if i % 3 == 2 else rng.choice(everything)[0] for i in range(count)]
        keys = [rng.choice(bands)[0] if i % 2 else 3 * 65536 + i for i in range(count)]
        got = dedupe._select_in(con, "identity, signal_id", "signals", "identity", wanted)
        got_bands = dedupe._select_in(con, "band_key, signal_id", "simhash_bands", "band_key", keys)
    assert sorted(got) == sorted(r for r in everything if r[0] in set(wanted))
    assert sorted(got_bands) == sorted(r for r in bands if r[0] in set(keys))
    assert got, "some wanted keys exist: the filter must find them"


def test_lookup_identities_answers_a_large_batch(store: Store) -> None:
    with store.transaction() as con:
        known = dict(con.execute("SELECT identity, content_hash FROM signals").fetchall())
        asked = list(known)[:120] + [f"new-{i}" for i in range(80)]
        found = dedupe.lookup_identities(con, asked)
    assert set(found) == set(list(known)[:120])
    assert all(found[i][1] == known[i] for i in found)


def test_insert_signals_bands_only_new_rows_in_a_large_batch(store: Store) -> None:
    more = _rows(420, random.Random(4))  # the first 300 are indexed already
    with store.transaction() as con:
        index.insert_signals(con, more)
        signals = con.execute("SELECT count(*) FROM signals").fetchone()
        bands = con.execute(
            "SELECT count(*), count(DISTINCT (band_key, signal_id)) FROM simhash_bands"
        ).fetchone()
    assert signals == (420,)
    assert bands == (420 * dedupe.BANDS, 420 * dedupe.BANDS)


def test_gc_paused_restores_the_collector_state() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block does not re-enable it early
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
