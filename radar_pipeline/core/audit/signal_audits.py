"""The audits of the Signals folder: set queries in DuckDB over each file's facts and the index.

    idempotency   every identity has exactly one Signal file and one index row
    provenance    every Signal carries every provenance field; `publishedAt` only with evidence
    agreement     the vault and the DuckDB index hold the same Signal ids
    oversized     Signal bodies longer than a summary can be (judged by the retention audit)

Each query reads the view `audit_files` that `vault.facts.open_facts` opens in the same
transaction; only the files and identities with a problem come back to Python.
"""

from __future__ import annotations

import json

import duckdb

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.parse.items import SUMMARY_MAX
from radar_pipeline.core.vault.facts import SIGNALS_PREFIX
from radar_pipeline.core.vault.signals import PROVENANCE_FIELDS

# The pipeline writes a Signal body as: title heading (<= 300 chars), the feed's summary
# (<= SUMMARY_MAX chars of plain text) and a one-line trailer. Measured as rendered text
# (escapes count as one character, facts.visible_length), anything longer carries more than
# a summary.
SIGNAL_BODY_MAX = SUMMARY_MAX + 300 + 300

# The claim of each file: the id its frontmatter declares, else its name (SignalFile.identity).
_FILES = """
    SELECT name, identity, error, provenance, body_length,
           coalesce(declared_id, left(name, -3)) AS claimed
    FROM audit_files
"""

# The identities whose files and index rows disagree: an identity's files in name order, and
# the index row compared is its first by Signal id. Their names are listed in a second query
# for these identities only (a list per identity of 100,000 cost more than the grouping).
_IDENTITY_SUSPECTS = f"""
    WITH f AS ({_FILES}),
    by_file AS (
        SELECT identity, count(*) AS files, arg_min(claimed, name) AS claimed
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
    SELECT identity, list(name ORDER BY name) FROM audit_files
    WHERE identity IN (SELECT unnest(?::VARCHAR[])) GROUP BY identity
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
           coalesce(list(v ORDER BY v) FILTER (WHERE i IS NULL), []),
           coalesce(list(i ORDER BY i) FILTER (WHERE v IS NULL), [])
    FROM j
"""


def audit_idempotency(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """Every identity has exactly one Signal file and one index row naming that file.

    Over the facts of every file (the view `open_facts` opens) and the index, grouped in
    DuckDB: only the identities with a problem come back to Python. An identity's files are
    named in name order; the index row compared is its first by Signal id."""
    suspects = con.execute(_IDENTITY_SUSPECTS).fetchall()
    names_of = dict(con.execute(_NAMES_OF, [[str(r[0]) for r in suspects]]).fetchall())
    findings = [
        _identity_finding(identity, files, rows, names_of.get(identity), named)
        for identity, files, rows, named in sorted(suspects, key=lambda r: str(r[0]))
    ]
    unidentified = con.execute("SELECT name FROM audit_files WHERE identity IS NULL").fetchall()
    for (name,) in sorted(unidentified):
        findings.append(
            Finding("ERROR", ("–", "1", "0", SIGNALS_PREFIX + name, "no Signal id to identify"))
        )
    identities, identified = _one(
        con,
        "SELECT count(DISTINCT identity), count(identity) FROM audit_files",
    )
    return AuditResult(
        "idempotency",
        "one Signal file and one index row per identity",
        ("identity", "files", "index rows", "files named", "problem"),
        tuple(findings),
        {"identities": identities, "files": identified},
    )


def _identity_finding(
    identity: str, files: int, rows: int, names: list[str] | None, named: str | None
) -> Finding:
    listed = ", ".join(SIGNALS_PREFIX + n for n in names or ()) or "–"
    counts = (str(identity), str(files), str(rows), listed)
    if files > 1:
        return Finding("ERROR", (*counts, "several files share this identity"))
    if not files:
        return Finding("ERROR", (*counts, "index row without a Signal file"))
    if not rows:
        return Finding("WARN", (*counts, "no index row (the next collection repairs it)"))
    return Finding("ERROR", (*counts, f"index names {named}"))


def audit_provenance(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """Every Signal carries every provenance field; `publishedAt` is empty unless verified."""
    broken = con.execute(
        "SELECT name, error, provenance FROM audit_files "
        "WHERE error IS NOT NULL OR provenance IS NOT NULL"
    ).fetchall()
    findings: list[Finding] = []
    for name, error, provenance in sorted(broken, key=lambda r: (r[0], r[1] or "", r[2] or "")):
        rel = SIGNALS_PREFIX + name
        if error is not None:
            findings.append(Finding("ERROR", (rel, "all", error or "unreadable")))
            continue
        for fields, problem in json.loads(provenance):
            findings.append(Finding("ERROR", (rel, str(fields), str(problem))))
    (count,) = _one(con, "SELECT count(*) FROM audit_files")
    return AuditResult(
        "provenance",
        "every Signal carries its full provenance",
        ("Signal file", "fields", "problem"),
        tuple(findings),
        {"signals": count, "fields": len(PROVENANCE_FIELDS)},
    )


def oversized_bodies(con: duckdb.DuckDBPyConnection) -> list[tuple[str, int]]:
    """(vault path, visible length) of each Signal whose pipeline-written body is longer than
    a summary can be, in name order."""
    rows = con.execute(
        "SELECT name, body_length FROM audit_files WHERE body_length > ?",
        [SIGNAL_BODY_MAX],
    ).fetchall()
    return [(SIGNALS_PREFIX + name, int(length)) for name, length in sorted(rows)]


def audit_agreement(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """The vault and the DuckDB index hold the same Signal ids (the vault is the truth)."""
    row = con.execute(_AGREEMENT).fetchone()
    assert row is not None  # an aggregate without GROUP BY always answers one row
    vault, index, common, unindexed, fileless = row
    findings = [
        Finding("ERROR", (sid, "no", "yes", "index row without a Signal file")) for sid in fileless
    ]
    findings += [
        Finding("WARN", (sid, "yes", "no", "not indexed yet (the next collection repairs it)"))
        for sid in unindexed
    ]
    return AuditResult(
        "agreement",
        "the vault and the DuckDB index hold the same Signal ids",
        ("Signal", "in vault", "in index", "problem"),
        tuple(findings),
        {"vault": vault, "index": index, "common": common},
    )


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[int, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None  # an aggregate without GROUP BY always answers one row
    return tuple(int(v) for v in row)
