"""The dedupe stage's reads of the Signal index (`signals`, `identity_aliases`,
`duplicate_items`, `simhash_bands`): each a batch of keys on one indexed column.

Every lookup is on one column (migration 3 indexes each): a short IN list becomes an ART index
scan; a collection's whole batch of keys is one semi-join against the column (one scan and a
hash table). DuckDB scans the whole table for a conjunction, a composite index or an OR, so
further conditions are applied by the caller, in Python, on the few rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from radar_pipeline.core.store.connection import Connection

_IN_CHUNK = 50  # up to this many values: an IN list (index scans); more: a semi-join


def signals_by_identity(con: Connection, identities: Sequence[str]) -> list[tuple[str, str, str]]:
    """(identity, Signal id, content hash) of the Signals holding one of `identities`."""
    return _select_in(con, "identity, signal_id, content_hash", "signals", "identity", identities)


def aliases_by_identity(con: Connection, identities: Sequence[str]) -> list[tuple[str, str]]:
    """(identity, Signal id) of the re-key aliases holding one of `identities`."""
    return _select_in(con, "identity, signal_id", "identity_aliases", "identity", identities)


def content_hashes(con: Connection, signal_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(Signal id, current content hash) of these Signals."""
    return _select_in(con, "signal_id, content_hash", "signals", "signal_id", signal_ids)


def duplicates_by_identity(con: Connection, identities: Sequence[str]) -> list[tuple[str, str]]:
    """(identity, Signal id) of items an earlier check recorded as a duplicate of that Signal."""
    return _select_in(con, "identity, signal_id", "duplicate_items", "identity", identities)


def signals_by_url(
    con: Connection, urls: Sequence[str]
) -> list[tuple[str, str, str, datetime, str]]:
    """(canonical URL, Signal id, Source id, first seen, distinguishing fragment) of the
    Signals at these URLs."""
    cols = "canonical_url, signal_id, source_id, first_seen_at, link_fragment"
    return _select_in(con, cols, "signals", "canonical_url", urls)


def link_fragments(con: Connection, signal_ids: Sequence[str]) -> list[tuple[str, str]]:
    """(Signal id, distinguishing fragment) of these Signals."""
    return _select_in(con, "signal_id, link_fragment", "signals", "signal_id", signal_ids)


def aliases_by_url(con: Connection, urls: Sequence[str]) -> list[tuple[str, str, str, datetime]]:
    """(canonical URL, Signal id, Source id, recorded at) of the re-key aliases at these URLs
    (a re-key may have re-canonicalised an older Signal's URL: that form is the alias's)."""
    cols = "canonical_url, signal_id, source_id, recorded_at"
    return _select_in(con, cols, "identity_aliases", "canonical_url", urls)


def signals_by_content(
    con: Connection, hashes: Sequence[str]
) -> list[tuple[str, str, str, datetime]]:
    """(content hash, Signal id, Source id, first seen) of the Signals with these hashes."""
    cols = "content_hash, signal_id, source_id, first_seen_at"
    return _select_in(con, cols, "signals", "content_hash", hashes)


def signals_by_title(
    con: Connection, title_keys: Sequence[str]
) -> list[tuple[str, date | None, str, str | None, datetime]]:
    """(title key, observed day, Signal id, duplicate-candidate flag, first seen)."""
    cols = "title_key, observed_day, signal_id, duplicate_candidate_of, first_seen_at"
    return _select_in(con, cols, "signals", "title_key", title_keys)


def bands_by_key(con: Connection, band_keys: Sequence[int]) -> list[tuple[int, str, int, datetime]]:
    """(band key, Signal id, simhash, first seen) of the simhash bands with these keys."""
    cols = "band_key, signal_id, simhash, first_seen_at"
    return _select_in(con, cols, "simhash_bands", "band_key", band_keys)


def candidate_flags(con: Connection, signal_ids: Sequence[str]) -> list[tuple[str, str | None]]:
    """(Signal id, the Signal it is flagged a duplicate candidate of, if any)."""
    return _select_in(con, "signal_id, duplicate_candidate_of", "signals", "signal_id", signal_ids)


def _select_in(
    con: Connection, columns: str, table: str, key: str, values: Sequence[Any]
) -> list[Any]:
    """Rows of `table` whose `key` is one of `values` (str or int), in one query.

    A few values: an IN list, which DuckDB answers from the column's ART index. More: one
    semi-join on the unnested list. Index scans cost per value and grow with the table (a
    collection's 4,000 simhash band keys in IN lists of 50 took 0.7 s against 100,000
    Signals); the semi-join scans the column once (20-30 ms there, 3-5 ms on an empty index).
    """
    unique = list(dict.fromkeys(values))
    if not unique:
        return []
    if len(unique) <= _IN_CHUNK:
        marks = ", ".join(f"${i}" for i in range(1, len(unique) + 1))
        sql = f"SELECT {columns} FROM {table} WHERE {key} IN ({marks})"
        return con.execute(sql, unique).fetchall()
    kind = "BIGINT" if isinstance(unique[0], int) else "VARCHAR"
    sql = f"SELECT {columns} FROM {table} WHERE {key} IN (SELECT unnest($1::{kind}[]))"
    return con.execute(sql, [unique]).fetchall()
