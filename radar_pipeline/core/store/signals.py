"""The Signal index (`signals`, `simhash_bands`, `identity_aliases`, `signal_revisions`):
a derived copy of the vault, written by the commit, `radar index rebuild` and the re-key.

The dedupe stage's reads of these tables are in `lookups.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from radar_pipeline.core.store.connection import Connection, insert_rows, unnested

# The signals table's columns in order, with their types (migration 1).
SIGNAL_COLUMN_TYPES = (
    "VARCHAR",  # signal_id
    "VARCHAR",  # identity
    "INTEGER",  # identity_version
    "VARCHAR",  # source_id
    "VARCHAR",  # source_item_id
    "VARCHAR",  # canonical_url
    "VARCHAR",  # title_key
    "DATE",  # observed_day
    "VARCHAR",  # content_hash
    "NUMERIC(20)",  # simhash
    "TIMESTAMPTZ",  # first_seen_at
    "VARCHAR",  # duplicate_candidate_of
    "VARCHAR",  # file_path
    "VARCHAR",  # link_fragment (migration 13)
)
# The simhash_bands key: BANDS slices of BAND_BITS bits of a 64-bit simhash.
BANDS = 4
BAND_BITS = 16
# Skip rows whose unique keys are already indexed: ON CONFLICT DO NOTHING, without its cost.
# The link key is (Source, canonical URL, distinguishing fragment): links differing only by
# fragment are two Signals (docs/architecture.md, "Fragments").
_NOT_INDEXED = (
    "WHERE NOT EXISTS (SELECT 1 FROM signals s WHERE s.signal_id = n.c0) "
    "AND NOT EXISTS (SELECT 1 FROM signals s WHERE s.identity = n.c1) "
    "AND NOT EXISTS (SELECT 1 FROM signals s WHERE s.source_id = n.c3 AND s.canonical_url = n.c5 "
    "AND s.link_fragment = n.c13)"
)
# Every table derived from the vault's Signal files (the audits' file facts included).
_DERIVED_TABLES = ("signals", "identity_aliases", "simhash_bands", "audit_signal_files")


def simhash_band_keys(simhash: int) -> list[int]:
    """The four indexed band keys of a simhash: band number * 65536 + its 16-bit slice."""
    mask = (1 << BAND_BITS) - 1
    return [b << BAND_BITS | (simhash >> (BAND_BITS * b)) & mask for b in range(BANDS)]


def insert_signal_rows(con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert index rows (SIGNAL_COLUMN_TYPES order), skipping conflicts, in one statement.

    A row is skipped when its signal id, identity or (Source, canonical URL, fragment) is
    already indexed or taken by an earlier row of `rows`. Why not ON CONFLICT: in DuckDB 2.0
    it costs ~20 ms a row, growing with the table (400 rows: 1.2-2 s against 100,000
    Signals); this: ~0.2 s.
    """
    seen: set[tuple[str, ...]] = set()
    unique = []
    for row in rows:
        keys = {("id", row[0]), ("identity", row[1]), ("link", row[3], row[5], row[13])}
        if keys & seen:
            continue
        seen |= keys
        unique.append(row)
    insert_rows(con, "signals", SIGNAL_COLUMN_TYPES, unique, _NOT_INDEXED)


def insert_signals(con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert Signal index rows (`SIGNAL_COLUMN_TYPES` order) with their simhash band keys."""
    if not rows:
        return
    insert_signal_rows(con, rows)
    ids = [str(row[0]) for row in rows]
    # Bands only for rows that are in the index and have none yet (a row that conflicted
    # with an existing Signal was not inserted; a re-inserted one keeps its bands).
    indexed = {str(r[0]) for r in _select_ids(con, "signals", ids)}
    banded = {str(r[0]) for r in _select_ids(con, "simhash_bands", ids)}
    bands = [
        (key, str(row[0]), int(row[9]), row[10])
        for row in rows
        if row[0] in indexed and row[0] not in banded
        for key in simhash_band_keys(int(row[9]))
    ]
    if bands:
        con.execute(
            # Every list typed: PostgreSQL cannot choose an unnest() for an untyped array.
            "INSERT INTO simhash_bands SELECT unnest($1::INTEGER[]), unnest($2::VARCHAR[]), "
            "unnest($3::NUMERIC(20)[]), unnest($4::TIMESTAMPTZ[])",
            [list(col) for col in zip(*bands, strict=True)],
        )


def _select_ids(con: Connection, table: str, ids: list[str]) -> list[tuple[Any, ...]]:
    # One semi-join on the unnested ids: IN lists of 100 were index scans per id, growing
    # with the table (lookups._select_in says more).
    return con.execute(
        f"SELECT DISTINCT signal_id FROM {table} WHERE signal_id IN (SELECT unnest($1::VARCHAR[]))",
        [ids],
    ).fetchall()


def indexed_signal_ids(con: Connection) -> set[str]:
    """Every Signal id the index holds."""
    return {str(r[0]) for r in con.execute("SELECT signal_id FROM signals").fetchall()}


def signals_by_source(con: Connection) -> list[tuple[str, int]]:
    """(Source id, indexed Signals) per Source, by Source id."""
    rows = con.execute(
        "SELECT source_id, count(*) FROM signals GROUP BY source_id ORDER BY source_id"
    ).fetchall()
    return [(str(sid), int(n)) for sid, n in rows]


def clear_derived(con: Connection) -> None:
    """Empty the index and the audits' file facts (`radar index rebuild` derives them again)."""
    for table in _DERIVED_TABLES:
        con.execute(f"DELETE FROM {table}")


# signal_revisions columns in order (migration 1).
REVISION_COLUMN_TYPES = (
    "VARCHAR",  # signal_id
    "VARCHAR",  # collection_id
    "TIMESTAMPTZ",  # recorded_at
    "VARCHAR",  # content_hash
    "VARCHAR",  # title
    "TIMESTAMPTZ",  # observed_at
)


def record_revisions(con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Content changes of known items (REVISION_COLUMN_TYPES order) in two statements: the
    revision rows, and each Signal's new content hash (its last row's). Plain SQL (INSERT ...
    SELECT and UPDATE ... FROM over unnested arrays), as in PostgreSQL."""
    if not rows:
        return
    insert_rows(con, "signal_revisions", REVISION_COLUMN_TYPES, rows)
    latest = {row[0]: row[3] for row in rows}
    select, params = unnested(("VARCHAR", "VARCHAR"), list(latest.items()))
    con.execute(
        f"UPDATE signals SET content_hash = n.c1 FROM ({select}) AS n "
        "WHERE signals.signal_id = n.c0",
        params,
    )


def stale_signals(con: Connection, version: int) -> list[tuple[str, str, str, str, str]]:
    """(Signal id, identity, Source id, canonical URL, Source item id) of every Signal indexed
    under another identity version and not yet aliased at `version`, oldest first."""
    return con.execute(
        "SELECT signal_id, identity, source_id, canonical_url, source_item_id FROM signals s "
        "WHERE identity_version <> $1 AND NOT EXISTS (SELECT 1 FROM identity_aliases a "
        "WHERE a.signal_id = s.signal_id AND a.identity_version = $2) "
        "ORDER BY first_seen_at, signal_id",
        [version, version],
    ).fetchall()


def taken_identities(con: Connection) -> dict[str, str]:
    """identity -> Signal id of every Signal and alias (an alias wins over a Signal's own)."""
    return {
        str(r[0]): str(r[1])
        for table in ("signals", "identity_aliases")
        for r in con.execute(f"SELECT identity, signal_id FROM {table}").fetchall()
    }


def insert_aliases(
    con: Connection,
    aliases: Sequence[tuple[str, str, str, str]],
    version: int,
    recorded_at: datetime,
) -> None:
    """Record (identity, Signal id, Source id, canonical URL) aliases at `version`, in one
    statement."""
    idents, signal_ids, source_ids, urls = (list(c) for c in zip(*aliases, strict=True))
    con.execute(
        "INSERT INTO identity_aliases SELECT unnest($1::VARCHAR[]), unnest($2::VARCHAR[]), "
        "$3::INTEGER, unnest($4::VARCHAR[]), unnest($5::VARCHAR[]), $6::TIMESTAMPTZ",
        [idents, signal_ids, version, source_ids, urls, recorded_at],
    )


# identity_aliases columns in order (migration 3).
_ALIAS_COLUMN_TYPES = ("VARCHAR", "VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "TIMESTAMPTZ")


def record_aliases(
    con: Connection,
    version: int,
    rows: Sequence[tuple[str, str, str, str, datetime]],
) -> None:
    """(identity, Signal id, Source id, canonical URL, recorded at) under identity `version`:
    an item found by its identity under an earlier rule (docs/architecture.md, "Faithful to
    the bytes"). The first alias of an identity stays; no Signal's own identity becomes one."""
    unique = list({r[0]: r for r in reversed(rows)}.values())
    insert_rows(
        con,
        "identity_aliases",
        _ALIAS_COLUMN_TYPES,
        [(r[0], r[1], version, r[2], r[3], r[4]) for r in unique],
        where="WHERE n.c0 NOT IN (SELECT identity FROM identity_aliases) "
        "AND n.c0 NOT IN (SELECT identity FROM signals)",
    )
