"""The evidence audits' set queries: over the view `audit_files` (the Signal files' facts,
opened by `store.facts.open_files_view`), the Signal index, `check_accounting`,
`item_observations`, `source_items` and `feed_state`. Read only; only the rows with a problem
come back to Python (core/audit/ judges them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.dialect import arg_min

# The claim of each file: the id its frontmatter declares, else its name (SignalFile.identity).
_FILES = """
    SELECT name, identity, error, provenance, body_length,
           coalesce(declared_id, left(name, -3)) AS claimed
    FROM audit_files
"""

# The identities whose files and index rows disagree: an identity's files in name order, and
# the index row compared is its first by Signal id. Their names are listed in a second query
# for these identities only (a list per identity of 100,000 cost more than the grouping).
_IDENTITY_SUSPECTS = """
    WITH f AS ({files}),
    by_file AS (
        SELECT identity, count(*) AS files, {first_claimed} AS claimed
        FROM f WHERE identity IS NOT NULL GROUP BY identity
    ),
    by_row AS (
        SELECT identity, count(*) AS rows, min(signal_id) AS named
        FROM signals GROUP BY identity
    )
    SELECT coalesce(by_file.identity, by_row.identity), coalesce(by_file.files, 0),
           coalesce(by_row.rows, 0), by_row.named
    FROM by_file FULL JOIN by_row ON by_file.identity = by_row.identity
    WHERE by_file.identity IS NULL OR by_row.identity IS NULL OR by_file.files > 1
       OR by_file.claimed <> by_row.named
"""
_NAMES_OF = """
    SELECT identity, array_agg(name ORDER BY name) FROM audit_files
    WHERE identity IN (SELECT unnest($1::VARCHAR[])) GROUP BY identity
"""

# The Signal ids the vault's files claim and those the index holds, side by side: one pass
# gives both differences and the counts.
_AGREEMENT = """
    WITH vault AS (
        SELECT DISTINCT coalesce(declared_id, left(name, -3)) AS sid FROM audit_files
    ),
    indexed AS (SELECT DISTINCT signal_id AS sid FROM signals),
    j AS (SELECT v.sid AS v, i.sid AS i FROM vault v FULL JOIN indexed i ON v.sid = i.sid)
    SELECT count(v), count(i), count(v) FILTER (WHERE i IS NOT NULL),
           array_agg(v ORDER BY v) FILTER (WHERE i IS NULL),
           array_agg(i ORDER BY i) FILTER (WHERE v IS NULL)
    FROM j
"""

_OUTCOME_SUM = (
    "created + reused + updated + duplicates + rejected + deferred + outside_window + filtered"
)


# ---- the Signal files against the index --------------------------------------------------------


def identity_suspects(con: Connection) -> list[tuple[str, int, int, str | None]]:
    """(identity, files, index rows, Signal id of its first row) of each identity whose files
    and index rows disagree."""
    first_claimed = arg_min(con, "claimed", "name")
    return con.execute(
        _IDENTITY_SUSPECTS.format(files=_FILES, first_claimed=first_claimed)
    ).fetchall()


def file_names_of(con: Connection, identities: list[str]) -> dict[str, list[str]]:
    """identity -> its files' names, in name order."""
    return dict(con.execute(_NAMES_OF, [identities]).fetchall())


def unidentified_files(con: Connection) -> list[tuple[str]]:
    """The files whose name and frontmatter give no identity."""
    return con.execute("SELECT name FROM audit_files WHERE identity IS NULL").fetchall()


def identity_counts(con: Connection) -> tuple[int, int]:
    """(distinct identities, files with an identity)."""
    identities, identified = _one(
        con, "SELECT count(DISTINCT identity), count(identity) FROM audit_files"
    )
    return identities, identified


def provenance_problems(con: Connection) -> list[tuple[str, str | None, str | None]]:
    """(name, read error, provenance problems as JSON) of each file with either."""
    return con.execute(
        "SELECT name, error, provenance FROM audit_files "
        "WHERE error IS NOT NULL OR provenance IS NOT NULL"
    ).fetchall()


def file_count(con: Connection) -> int:
    """How many files the view holds."""
    (count,) = _one(con, "SELECT count(*) FROM audit_files")
    return count


def bodies_longer_than(con: Connection, limit: int) -> list[tuple[str, int]]:
    """(name, body length) of each file whose pipeline-written body is longer than `limit`."""
    return con.execute(
        "SELECT name, body_length FROM audit_files WHERE body_length > $1", [limit]
    ).fetchall()


def temporary_text_files(con: Connection) -> list[str]:
    """The names of the files marked as temporary content, in name order."""
    rows = con.execute("SELECT name FROM audit_files WHERE temporary_text ORDER BY name")
    return [str(r[0]) for r in rows.fetchall()]


@dataclass(frozen=True)
class Agreement:
    """The Signal ids of the vault's files against those of the index."""

    vault: int  # distinct ids the files claim
    index: int  # distinct ids the index holds
    common: int
    unindexed: tuple[str, ...]  # claimed by a file, not indexed, by id
    fileless: tuple[str, ...]  # indexed, claimed by no file, by id


def agreement(con: Connection) -> Agreement:
    """The vault's and the index's Signal ids in one pass."""
    row = con.execute(_AGREEMENT).fetchone()
    assert row is not None  # an aggregate without GROUP BY always answers one row
    vault, index, common, unindexed, fileless = row
    # An empty list is NULL (no `[]` literal in the query: PostgreSQL spells it otherwise).
    return Agreement(
        int(vault), int(index), int(common), tuple(unindexed or ()), tuple(fileless or ())
    )


# ---- the item stream -----------------------------------------------------------------------


def unbalanced_checks(
    con: Connection,
) -> list[tuple[str, str, datetime, int, int, int]]:
    """(collection, Source, checked at, items parsed, outcomes sum, observations) of each
    recorded check whose outcomes or observations do not add up to what it parsed."""
    return con.execute(
        f"""
        SELECT a.collection_id, a.source_id, a.as_of, a.items_parsed, {_OUTCOME_SUM},
            coalesce(o.n, 0)
        FROM check_accounting AS a
        LEFT JOIN (
            SELECT collection_id, source_id, count(*) AS n FROM item_observations
            GROUP BY collection_id, source_id
        ) AS o USING (collection_id, source_id)
        WHERE a.items_parsed <> {_OUTCOME_SUM} OR a.items_parsed <> coalesce(o.n, 0)
        ORDER BY a.as_of, a.source_id
        """
    ).fetchall()


def check_count(con: Connection) -> int:
    """How many checks are recorded."""
    row = con.execute("SELECT count(*) FROM check_accounting").fetchone()
    return int(row[0]) if row else 0


def latest_checks(con: Connection) -> list[tuple[str, datetime, bool, int]]:
    """(Source, checked at, possible gap, items parsed) of each Source's latest check that
    parsed items, by Source."""
    return con.execute(
        """
        SELECT DISTINCT ON (source_id) source_id, as_of, possible_gap, items_parsed
        FROM check_accounting WHERE items_parsed > 0 ORDER BY source_id, as_of DESC
        """
    ).fetchall()


def rhythm_rows(
    con: Connection, min_intervals: int
) -> list[tuple[str, int, float | None, datetime, datetime]]:
    """(Source, intervals, median interval in seconds, newest item date, last success) of each
    Source whose latest check passed and whose distinct item dates give at least
    `min_intervals` intervals, by Source."""
    return con.execute(
        """
        WITH dates AS (
            SELECT DISTINCT source_id, observed_at FROM source_items WHERE observed_at IS NOT NULL
        ), gaps AS (
            SELECT source_id, observed_at,
                CAST(extract(epoch FROM observed_at) - extract(epoch FROM lag(observed_at)
                    OVER (PARTITION BY source_id ORDER BY observed_at)) AS DOUBLE PRECISION)
                    AS gap_s
            FROM dates
        )
        SELECT g.source_id, count(g.gap_s),
            percentile_cont(0.5) WITHIN GROUP (ORDER BY g.gap_s), max(g.observed_at),
            f.last_success_at
        FROM gaps AS g JOIN feed_state AS f USING (source_id)
        WHERE f.last_success_at IS NOT NULL AND f.error_state IS NULL
            AND g.observed_at <= f.last_success_at
        GROUP BY g.source_id, f.last_success_at
        HAVING count(g.gap_s) >= $1
        ORDER BY g.source_id
        """,
        [min_intervals],
    ).fetchall()


def _one(con: Connection, sql: str) -> tuple[int, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None  # an aggregate without GROUP BY always answers one row
    return tuple(int(v) for v in row)
