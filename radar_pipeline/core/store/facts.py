"""The Signal files' cached facts (`audit_signal_files`) and the view `audit_files` the audits
judge (core/vault/facts.py says what a fact is and when it is read again)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from radar_pipeline.core.store.connection import Connection, Store, insert_rows

# One stored fact: name, inode, size, mtime_ns, ctime_ns, declared id, error, provenance
# problems (JSON), body length, identity, marked as temporary content.
FactRow = tuple[str, int, int, int, int, str | None, str | None, str | None, int, str | None, bool]
# A stored fact's name, its stat key (inode, size, mtime_ns, ctime_ns) and whether its facts
# are whole (the file was read, by a version that knew every fact).
StoredKey = tuple[str, int, int, int, int, bool]

_FACT_TYPES = (
    "VARCHAR",
    "NUMERIC(20)",
    "NUMERIC(20)",
    "BIGINT",
    "BIGINT",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
    "BIGINT",
    "VARCHAR",
    "BOOLEAN",
)
_FACT_COLUMNS = (
    "name",
    "ino",
    "size",
    "mtime_ns",
    "ctime_ns",
    "declared_id",
    "error",
    "provenance",
    "body_length",
    "identity",
    "temporary_text",
)
# A file is read again at every check while its facts are not whole: it could not be read,
# or its facts predate the temporary-content marker (NULL, migration 14).
_UNWHOLE = "error IS NOT NULL OR temporary_text IS NULL"
_ERRORED = f"SELECT name FROM audit_signal_files WHERE {_UNWHOLE} ORDER BY name"
# The Signal ids that the stored facts name (every file of the folder while its recorded
# state holds: vault/folder_state.py) and that have no index row: a set query, no listing.
_UNINDEXED_FILES = """
    SELECT stem FROM (SELECT left(name, -3) AS stem FROM audit_signal_files) f
    WHERE NOT EXISTS (SELECT 1 FROM signals s WHERE s.signal_id = f.stem)
"""


def errored_names(con: Connection) -> list[str]:
    """The names of the stored files whose facts are not whole (unreadable, or taken before
    a fact was added), in name order: read again at each check."""
    return [str(r[0]) for r in con.execute(_ERRORED).fetchall()]


def stored_keys(con: Connection) -> list[StoredKey]:
    """Every stored fact's name, stat key and whether its facts are whole."""
    return con.execute(
        f"SELECT name, ino, size, mtime_ns, ctime_ns, NOT ({_UNWHOLE}) FROM audit_signal_files"
    ).fetchall()


def read_stored_keys(store: Store) -> list[StoredKey]:
    """`stored_keys`, in a transaction of its own (a full scan compares them with its listing)."""
    with store.transaction() as con:
        return stored_keys(con)


def stored_names(con: Connection) -> set[str]:
    """Every name the stored facts hold."""
    return {row[0] for row in con.execute("SELECT name FROM audit_signal_files").fetchall()}


def write_facts(con: Connection, fresh: Sequence[FactRow], gone: Iterable[str]) -> None:
    """Replace the facts of `fresh`'s files and delete those of `gone`."""
    names = [row[0] for row in fresh] + list(gone)
    if names:
        con.execute(
            "DELETE FROM audit_signal_files WHERE name IN (SELECT unnest($1::VARCHAR[]))",
            [names],
        )
    insert_rows(con, "audit_signal_files", _FACT_TYPES, fresh, columns=_FACT_COLUMNS)


def open_files_view(con: Connection, unstored: Sequence[FactRow] | None) -> None:
    """Open the view `audit_files`: the stored facts plus `unstored` (the files DuckDB cannot
    hold, in a temp table of this connection); None: an empty view (no Signals folder)."""
    # `SELECT *` spelt out (not DuckDB's `AS FROM t`) and NOT EXISTS above (not ANTI JOIN):
    # the forms both dialects read; DuckDB plans them the same.
    con.execute("CREATE TEMP TABLE audit_unstored AS SELECT * FROM audit_signal_files LIMIT 0")
    if unstored is None:
        con.execute("CREATE TEMP VIEW audit_files AS SELECT * FROM audit_unstored")
        return
    insert_rows(con, "audit_unstored", _FACT_TYPES, unstored, columns=_FACT_COLUMNS)
    con.execute(
        "CREATE TEMP VIEW audit_files AS SELECT * FROM audit_signal_files "
        "UNION ALL SELECT * FROM audit_unstored"
    )


def unindexed_stems(con: Connection) -> list[str]:
    """The name stems of the stored files that have no index row."""
    return [str(r[0]) for r in con.execute(_UNINDEXED_FILES).fetchall()]


def stems_of_identities(con: Connection, identities: list[str], id_pattern: str) -> list[str]:
    """The name stems of the stored files (readable or not) that match `id_pattern` (a Signal
    id's regular expression, the caller's constant) and end in one of `identities`."""
    rows = con.execute(
        "SELECT stem FROM (SELECT left(name, -3) AS stem FROM audit_signal_files) AS f "
        "WHERE right(stem, 16) IN (SELECT unnest($1::VARCHAR[])) "
        f"AND stem ~ '^(?:{id_pattern})$'",
        [identities],
    ).fetchall()
    return [str(r[0]) for r in rows]
