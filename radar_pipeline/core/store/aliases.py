"""`identity_aliases`: identities that name an existing Signal although it was indexed under
another (an earlier identity rule; core/vault/index.py's re-key writes them too)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb

from radar_pipeline.core.store.connection import insert_rows

ALIAS_COLUMN_TYPES = ("VARCHAR", "VARCHAR", "INTEGER", "VARCHAR", "VARCHAR", "TIMESTAMPTZ")


def record_aliases(
    con: duckdb.DuckDBPyConnection,
    version: int,
    rows: Sequence[tuple[str, str, str, str, datetime]],
) -> None:
    """(identity, Signal id, source id, canonical URL, recorded at) under identity `version`:
    the first alias of an identity stays, and no Signal's own identity becomes an alias."""
    unique = list({r[0]: r for r in reversed(rows)}.values())
    insert_rows(
        con,
        "identity_aliases",
        ALIAS_COLUMN_TYPES,
        [(r[0], r[1], version, r[2], r[3], r[4]) for r in unique],
        where="WHERE n.c0 NOT IN (SELECT identity FROM identity_aliases) "
        "AND n.c0 NOT IN (SELECT identity FROM signals)",
    )
