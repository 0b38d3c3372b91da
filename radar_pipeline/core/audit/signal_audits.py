"""The audits of the Signals folder: set queries in DuckDB over each file's facts and the index.

    idempotency   every identity has exactly one Signal file and one index row
    provenance    every Signal carries every provenance field; `publishedAt` only with evidence
    agreement     the vault and the DuckDB index hold the same Signal ids
    oversized     Signal bodies longer than a summary can be (judged by the retention audit)

Each query (core/store/audits.py) reads the view `audit_files` that `vault.facts.open_facts`
opens in the same transaction; only the files and identities with a problem come back.
"""

from __future__ import annotations

import json

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.parse.items import SUMMARY_MAX
from radar_pipeline.core.store import audits as queries
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.vault.facts import SIGNALS_PREFIX
from radar_pipeline.core.vault.signals import PROVENANCE_FIELDS

# The pipeline writes a Signal body as: title heading (<= 300 chars), the feed's summary
# (<= SUMMARY_MAX chars of plain text) and a one-line trailer. Measured as rendered text
# (escapes count as one character, facts.visible_length), anything longer carries more than
# a summary.
SIGNAL_BODY_MAX = SUMMARY_MAX + 300 + 300


def audit_idempotency(con: Connection) -> AuditResult:
    """Every identity has exactly one Signal file and one index row naming that file.

    Over the facts of every file (the view `open_facts` opens) and the index, grouped in
    DuckDB: only the identities with a problem come back to Python. An identity's files are
    named in name order; the index row compared is its first by Signal id."""
    suspects = queries.identity_suspects(con)
    names_of = queries.file_names_of(con, [str(r[0]) for r in suspects])
    findings = [
        _identity_finding(identity, files, rows, names_of.get(identity), named)
        for identity, files, rows, named in sorted(suspects, key=lambda r: str(r[0]))
    ]
    unidentified = queries.unidentified_files(con)
    for (name,) in sorted(unidentified):
        findings.append(
            Finding("ERROR", ("–", "1", "0", SIGNALS_PREFIX + name, "no Signal id to identify"))
        )
    identities, identified = queries.identity_counts(con)
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


def audit_provenance(con: Connection) -> AuditResult:
    """Every Signal carries every provenance field; `publishedAt` is empty unless verified."""
    broken = queries.provenance_problems(con)
    findings: list[Finding] = []
    for name, error, provenance in sorted(broken, key=lambda r: (r[0], r[1] or "", r[2] or "")):
        rel = SIGNALS_PREFIX + name
        if error is not None:
            findings.append(Finding("ERROR", (rel, "all", error or "unreadable")))
            continue
        assert provenance is not None  # the query returns files with an error or problems
        for fields, problem in json.loads(provenance):
            findings.append(Finding("ERROR", (rel, str(fields), str(problem))))
    count = queries.file_count(con)
    return AuditResult(
        "provenance",
        "every Signal carries its full provenance",
        ("Signal file", "fields", "problem"),
        tuple(findings),
        {"signals": count, "fields": len(PROVENANCE_FIELDS)},
    )


def oversized_bodies(con: Connection) -> list[tuple[str, int]]:
    """(vault path, visible length) of each Signal whose pipeline-written body is longer than
    a summary can be, in name order."""
    rows = queries.bodies_longer_than(con, SIGNAL_BODY_MAX)
    return [(SIGNALS_PREFIX + name, int(length)) for name, length in sorted(rows)]


def audit_agreement(con: Connection) -> AuditResult:
    """The vault and the DuckDB index hold the same Signal ids (the vault is the truth)."""
    found = queries.agreement(con)
    findings = [
        Finding("ERROR", (sid, "no", "yes", "index row without a Signal file"))
        for sid in found.fileless
    ]
    findings += [
        Finding("WARN", (sid, "yes", "no", "not indexed yet (the next collection repairs it)"))
        for sid in found.unindexed
    ]
    return AuditResult(
        "agreement",
        "the vault and the DuckDB index hold the same Signal ids",
        ("Signal", "in vault", "in index", "problem"),
        tuple(findings),
        {"vault": found.vault, "index": found.index, "common": found.common},
    )
