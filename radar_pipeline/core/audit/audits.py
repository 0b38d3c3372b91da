"""The Radar's claims about itself, each measured against the vault and DuckDB (no Dagster here).

Every audit returns an `AuditResult`: passed or not, the severity of the worst finding (ERROR
for a broken promise, WARN for a soft one that the next run or a person resolves) and a
Markdown table that names each finding. The Dagster asset checks and `radar report` both call
these functions, so the UI and the command line can never disagree.

    idempotency   every identity has exactly one Signal file and one index row
    provenance    every Signal carries every provenance field; `publishedAt` only with evidence
    registry      every Source file is a valid, uniquely declared Source
    overdue       eligible Sources past their cadence (0 after a successful recovery)
    retention     nothing under Temporary Content survives a weekly close; no full text elsewhere
    agreement     the vault and the DuckDB index hold the same Signal ids
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb

from radar_pipeline.core.clock import format_utc, parse_cadence, parse_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.identity.keys import identity_of
from radar_pipeline.core.parse.feed import SUMMARY_MAX
from radar_pipeline.core.plan.schedule import is_overdue
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry
from radar_pipeline.core.store.closes import CloseRecord, last_close
from radar_pipeline.core.store.connection import Store, gc_paused, insert_rows
from radar_pipeline.core.store.feed_state import FeedState, load_states
from radar_pipeline.core.vault.cleanup import TEMPORARY_DIR
from radar_pipeline.core.vault.signals import (
    PROVENANCE_FIELDS,
    SIGNAL_ID_RE,
    SIGNALS_DIR,
    TEMP_PREFIX,
    read_signal_frontmatter,
)

Severity = Literal["ERROR", "WARN"]

# The pipeline writes a Signal body as: title heading (<= 300 chars), the feed's summary
# (<= SUMMARY_MAX chars of plain text) and a one-line trailer. Measured as rendered text
# (escapes count as one character), anything longer carries more than a summary.
SIGNAL_BODY_MAX = SUMMARY_MAX + 300 + 300
# Marks the end of what the pipeline wrote; people may annotate below it freely.
BODY_TRAILER = "*Collected by Radar from "
# A verified first-party publication date needs this key to say where it was verified.
PUBLISHED_EVIDENCE_KEY = "publishedAtEvidence"
TEMPORARY_MARKER = "entityType: temporary-content"
MAX_TABLE_ROWS = 200

_ESCAPE = re.compile(r"&#?[0-9A-Za-z]+;|\\.")


@dataclass(frozen=True)
class Finding:
    """One row of an audit table: the severity it carries and its cells."""

    severity: Severity
    cells: tuple[str, ...]


@dataclass(frozen=True)
class AuditResult:
    """One audit's verdict: findings (empty means passed), figures and a readable table."""

    name: str
    claim: str
    columns: tuple[str, ...]
    findings: tuple[Finding, ...]
    figures: Mapping[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def severity(self) -> Severity:
        """ERROR if any finding breaks a promise, else WARN (also when passed)."""
        return "ERROR" if any(f.severity == "ERROR" for f in self.findings) else "WARN"

    def markdown(self) -> str:
        """A heading line with the verdict and figures, then one table row per finding."""
        verdict = "passed" if self.passed else f"FAILED ({self.severity})"
        figures = " · ".join(f"{k} {v}" for k, v in self.figures.items())
        head = f"**{self.name}**: {self.claim}: {verdict}" + (f" · {figures}" if figures else "")
        columns = ("severity", *self.columns)
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for finding in self.findings[:MAX_TABLE_ROWS]:
            cells = (finding.severity, *finding.cells)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        if not self.findings:
            lines.append("| – | " + " | ".join(["–"] * (len(columns) - 2) + ["no findings"]) + " |")
        elif len(self.findings) > MAX_TABLE_ROWS:
            lines.append(f"\n… and {len(self.findings) - MAX_TABLE_ROWS} more findings")
        return head + "\n\n" + "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "severity": None if self.passed else self.severity,
            "findings": len(self.findings),
            **dict(self.figures),
        }


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ") or "–"


# ---- reading the vault and the index ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SignalFile:
    """What the audits need of one Markdown file in the Signals folder, read without trusting
    it: small enough to keep for every file (the persisted facts cache, see below)."""

    rel_path: str
    stem: str
    declared_id: str | None  # the frontmatter's `id` when it is a well-formed Signal id
    error: str | None  # why the frontmatter is unreadable; None when it was read
    provenance: tuple[tuple[str, str], ...]  # (fields, problem) per provenance problem
    body_length: int  # visible length of the part of the body the pipeline wrote

    @property
    def identity(self) -> str | None:
        """The identity the file claims: its declared id's hex part, else its name's."""
        if self.declared_id:
            return identity_of(self.declared_id)
        return identity_of(self.stem) if SIGNAL_ID_RE.fullmatch(self.stem) else None


@dataclass(frozen=True)
class FactsUpdate:
    """What the checks change in `audit_signal_files` before judging the Signals folder
    (`gather_facts`), and the facts of the files it cannot hold."""

    folder_present: bool
    listed: Mapping[str, FactsKey]  # every file DuckDB can name, as the listing saw it
    fresh: tuple[tuple[str, FactsKey, SignalFile], ...] = ()  # new, changed or unreadable
    unstored: tuple[SignalFile, ...] = ()  # files whose names are not UTF-8 (DuckDB: UTF-8)


def gather_facts(vault: Path, store: Store) -> FactsUpdate:
    """The Signals folder's `*.md` files (copies under other names included, temp files not)
    against their stored facts, outside any transaction: a stat per file; only files that are
    new or changed since their facts were taken (name, inode, size, mtime or ctime differ) are
    opened and parsed, and files that could not be read are read again each time (the cause
    may pass: an I/O error, a file being written by a person). Collections and `radar index
    rebuild` record the facts of the files they write or read (`record_facts`), so the checks
    after a collection parse no file at all.
    """
    folder = vault / SIGNALS_DIR
    if not folder.is_dir():
        return FactsUpdate(False, {})
    listed: dict[str, FactsKey] = {}
    unstorable: list[str] = []
    for entry in os.scandir(folder):
        name = entry.name
        if not name.endswith(".md") or name.startswith(TEMP_PREFIX):
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not name.isascii() and _escaped(name) != name:
            unstorable.append(name)  # read at every check; such a file is never a Signal
            continue
        listed[name] = facts_key(info)
    with store.transaction() as con:
        rows = con.execute(
            "SELECT name, ino, size, mtime_ns, ctime_ns, error IS NULL FROM audit_signal_files"
        ).fetchall()
    known = {row[0]: (row[1], row[2], row[3], row[4]) if row[5] else None for row in rows}
    stale = sorted(name for name, key in listed.items() if known.get(name) != key)
    return FactsUpdate(
        True,
        listed,
        tuple((name, listed[name], _read_one(folder / name, name)) for name in stale),
        tuple(_read_one(folder / name, _escaped(name)) for name in sorted(unstorable)),
    )


def open_facts(
    con: duckdb.DuckDBPyConnection, vault: Path, update: FactsUpdate | None = None
) -> None:
    """Apply `update` (None: the stored facts as they are) in this transaction and open the
    view `audit_files` that the audits judge: every stored fact plus the files DuckDB cannot
    hold (a temp table of this connection), or nothing when the Signals folder is missing (its
    stored facts stay).

    The stored rows are compared with the listing here, under the transaction: a stored name
    the listing lacks is deleted only if its file is still absent now (another check or a
    collection may have recorded a file created after the listing), and a listed file without
    a row (`radar index rebuild` keeps only the files it indexes; another check saw it absent
    for a moment) is read again here. So every row is a file that exists (or existed a moment
    ago), with facts of a version of it, and every listed file has one.
    """
    con.execute("CREATE TEMP TABLE audit_unstored AS FROM audit_signal_files LIMIT 0")
    if update is not None and not update.folder_present:
        con.execute("CREATE TEMP VIEW audit_files AS FROM audit_unstored")
        return
    if update is not None:
        _apply_facts(con, vault / SIGNALS_DIR, update)
    con.execute(
        "CREATE TEMP VIEW audit_files AS FROM audit_signal_files UNION ALL FROM audit_unstored"
    )


def _apply_facts(con: duckdb.DuckDBPyConnection, folder: Path, update: FactsUpdate) -> None:
    stored = {row[0] for row in con.execute("SELECT name FROM audit_signal_files").fetchall()}
    absent = [
        name
        for name in sorted(stored - update.listed.keys())
        if not _is_regular_file(folder / name)
    ]
    fresh = list(update.fresh)
    stored.update(name for name, _, _ in fresh)
    fresh += [
        (name, key, _read_one(folder / name, name))
        for name, key in sorted(update.listed.items())
        if name not in stored
    ]
    if fresh or absent:
        _write_facts(con, fresh, absent)
    _insert_facts(
        con, "audit_unstored", [(f.stem + ".md", (0, 0, 0, 0), f) for f in update.unstored]
    )


def _is_regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:  # gone, or its folder is no longer one
        return False


def _escaped(text: str) -> str:
    """`text` as valid UTF-8: the bytes of a name that is not (surrogate escapes) as `\\xff`."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no name on disk gives
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


_SIGNALS_PREFIX = SIGNALS_DIR.as_posix() + "/"  # (string joins: 100,000 Path joins cost 0.5 s)


def _read_one(path: Path, name: str) -> SignalFile:
    rel = _SIGNALS_PREFIX + name
    stem = name[:-3]
    body_length = visible_length(pipeline_section(_body(path)))
    try:
        fm = read_signal_frontmatter(path)
    except VaultError as exc:
        return SignalFile(rel, stem, None, exc.message, (), body_length)
    value = fm.get("id")
    declared = value if isinstance(value, str) and SIGNAL_ID_RE.fullmatch(value) else None
    return SignalFile(rel, stem, declared, None, provenance_problems(stem, fm), body_length)


def provenance_problems(stem: str, fm: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(fields, problem) for each provenance promise a Signal's frontmatter breaks."""
    problems: list[tuple[str, str]] = []
    missing = [k for k in PROVENANCE_FIELDS if fm.get(k) in (None, "")]
    if missing:
        problems.append((", ".join(missing), "missing or empty"))
    if fm.get("publishedAt") not in (None, "") and not fm.get(PUBLISHED_EVIDENCE_KEY):
        problems.append(("publishedAt", f"set without `{PUBLISHED_EVIDENCE_KEY}`"))
    if stem != fm.get("id"):
        problems.append(("id", f"declares {fm.get('id')!r}"))
    return tuple(problems)


def facts_of_written(name: str, fields: Mapping[str, Any], text: str) -> SignalFile:
    """The facts of a Signal file whose text is `text` and whose frontmatter reads as `fields`:
    what `_read_one` would find in it, without reading it (again). For a file this process has
    just written (signals.SignalDocument.render checks its header reads back as `fields`) or
    has just read for another purpose (index.reconcile)."""
    stem = name[:-3]
    value = fields.get("id")
    declared = value if isinstance(value, str) and SIGNAL_ID_RE.fullmatch(value) else None
    length = visible_length(pipeline_section(_body_of(text)))
    return SignalFile(
        _SIGNALS_PREFIX + name,
        stem,
        declared,
        None,
        provenance_problems(stem, fields),
        length,
    )


def record_facts(
    con: duckdb.DuckDBPyConnection, written: Sequence[tuple[str, FactsKey, SignalFile]]
) -> None:
    """Store the facts of files just written (in the transaction that indexes them)."""
    _write_facts(con, written, ())


def _body(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return _body_of(text)


def _body_of(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5 :]
    return text


FactsKey = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


def facts_key(info: os.stat_result) -> FactsKey:
    """What tells a Signal file's facts are still those of its current content."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _write_facts(
    con: duckdb.DuckDBPyConnection,
    fresh: Sequence[tuple[str, FactsKey, SignalFile]],
    gone: Iterable[str],
) -> None:
    names = [name for name, _, _ in fresh] + list(gone)
    if names:
        con.execute(
            "DELETE FROM audit_signal_files WHERE name IN (SELECT unnest(?::VARCHAR[]))",
            [names],
        )
    _insert_facts(con, "audit_signal_files", fresh)


def _insert_facts(
    con: duckdb.DuckDBPyConnection, table: str, facts: Sequence[tuple[str, FactsKey, SignalFile]]
) -> None:
    rows = [
        (
            name,
            *key,
            f.declared_id,
            None if f.error is None else _escaped(f.error),
            json.dumps(f.provenance) if f.provenance else None,
            f.body_length,
            f.identity,
        )
        for name, key, f in facts
    ]
    insert_rows(con, table, _FACT_TYPES, rows, columns=_FACT_COLUMNS)


_FACT_TYPES = (
    "VARCHAR",
    "UBIGINT",
    "UBIGINT",
    "BIGINT",
    "BIGINT",
    "VARCHAR",
    "VARCHAR",
    "VARCHAR",
    "BIGINT",
    "VARCHAR",
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
)


# The claim of each file: the id its frontmatter declares, else its name (SignalFile.identity).
_FILES = """
    SELECT name, identity, error, provenance, body_length,
           coalesce(declared_id, left(name, -3)) AS claimed
    FROM audit_files
"""


def audit_idempotency(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """Every identity has exactly one Signal file and one index row naming that file.

    Over the facts of every file (the view `open_facts` opens) and the index, grouped in
    DuckDB: only the identities with a problem come back to Python. An identity's files are
    named in name order; the index row compared is its first by Signal id."""
    suspects = con.execute(
        f"""
        WITH f AS ({_FILES}),
        by_file AS (
            SELECT identity, count(*) AS files, list(name ORDER BY name) AS names,
                   arg_min(claimed, name) AS claimed
            FROM f WHERE identity IS NOT NULL GROUP BY identity
        ),
        by_row AS (
            SELECT identity, count(*) AS rows, min(signal_id) AS named
            FROM signals GROUP BY identity
        )
        SELECT coalesce(by_file.identity, by_row.identity), coalesce(by_file.files, 0),
               coalesce(by_row.rows, 0), by_file.names, by_row.named
        FROM by_file FULL JOIN by_row ON by_file.identity = by_row.identity
        WHERE by_file.identity IS NULL OR by_row.identity IS NULL OR by_file.files > 1
           OR by_file.claimed <> by_row.named
        """
    ).fetchall()
    findings: list[Finding] = []
    for identity, files, rows, names, named in sorted(suspects, key=lambda r: str(r[0])):
        listed = ", ".join(_SIGNALS_PREFIX + n for n in names or ()) or "–"
        counts = (str(identity), str(files), str(rows), listed)
        if files > 1:
            findings.append(Finding("ERROR", (*counts, "several files share this identity")))
        elif not files:
            findings.append(Finding("ERROR", (*counts, "index row without a Signal file")))
        elif not rows:
            findings.append(
                Finding("WARN", (*counts, "no index row (the next collection repairs it)"))
            )
        else:
            findings.append(Finding("ERROR", (*counts, f"index names {named}")))
    unidentified = con.execute("SELECT name FROM audit_files WHERE identity IS NULL").fetchall()
    for (name,) in sorted(unidentified):
        findings.append(
            Finding("ERROR", ("–", "1", "0", _SIGNALS_PREFIX + name, "no Signal id to identify"))
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


def audit_provenance(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """Every Signal carries every provenance field; `publishedAt` is empty unless verified."""
    broken = con.execute(
        "SELECT name, error, provenance FROM audit_files "
        "WHERE error IS NOT NULL OR provenance IS NOT NULL"
    ).fetchall()
    findings: list[Finding] = []
    for name, error, provenance in sorted(broken, key=lambda r: (r[0], r[1] or "", r[2] or "")):
        rel = _SIGNALS_PREFIX + name
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
    return [(_SIGNALS_PREFIX + name, int(length)) for name, length in sorted(rows)]


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[int, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None  # an aggregate without GROUP BY always answers one row
    return tuple(int(v) for v in row)


_DECLARED_IN = re.compile(r"already declared in (\S+?);")


def audit_registry(snapshot: RegistrySnapshot) -> AuditResult:
    """Every Source file is valid and declares its own id; issues name the first declaration."""
    findings: list[Finding] = []
    for issue in snapshot.issues:
        first = "–"
        if issue.code == "duplicate-id":
            match = _DECLARED_IN.search(issue.message)
            first = match.group(1) if match else issue.path
        # A duplicate id silences every file that declares it; other issues silence one file.
        severity: Severity = "ERROR" if issue.code in ("duplicate-id", "unreadable") else "WARN"
        findings.append(Finding(severity, (issue.path, issue.code, first, issue.message)))
    return AuditResult(
        "registry",
        "every Source file is a valid, uniquely declared Source",
        ("file", "code", "first declaration", "message"),
        tuple(findings),
        {"sources": len(snapshot.sources), "issues": len(snapshot.issues)},
    )


@dataclass(frozen=True)
class OverdueSource:
    source_id: str
    priority: str
    cadence: str
    last_success_at: datetime | None
    due_since: datetime | None  # None: never succeeded


def overdue_sources(
    snapshot: RegistrySnapshot, states: Mapping[str, FeedState], now: datetime
) -> list[OverdueSource]:
    """Eligible Sources with a cadence whose last success is older than the cadence at `now`.

    DuckDB's feed state is the authority; the Source file's mirror covers a lost database.
    """
    out: list[OverdueSource] = []
    for rec in snapshot.sources:
        src = rec.source
        if not src.is_eligible:
            continue
        cadence = parse_cadence(src.cadence)
        state = states.get(src.id)
        last = state.last_success_at if state and state.last_success_at else src.last_success_at
        if cadence is not None and is_overdue(cadence, last, now):
            due = last + cadence if last is not None else None
            out.append(OverdueSource(src.id, src.priority, src.cadence, last, due))
    return out


def audit_overdue(overdue: Iterable[OverdueSource], eligible: int, now: datetime) -> AuditResult:
    """No eligible Source is past its cadence (soft: a failing publisher makes one overdue)."""
    findings = tuple(
        Finding(
            "WARN",
            (
                o.source_id,
                o.priority,
                o.cadence,
                format_utc(o.last_success_at) if o.last_success_at else "never",
                format_utc(o.due_since) if o.due_since else "first check",
            ),
        )
        for o in overdue
    )
    return AuditResult(
        "overdue",
        f"no eligible Source past its cadence at {format_utc(now)}",
        ("Source", "priority", "cadence", "last success", "due since"),
        findings,
        {"eligible": eligible, "overdue": len(findings)},
    )


@dataclass(frozen=True)
class TemporaryEntry:
    rel_path: str
    written_at: datetime  # from the Signal id's timestamp, else the file's mtime


def list_temporary(vault: Path) -> tuple[TemporaryEntry, ...]:
    """Every non-directory entry under Temporary Content; links are listed, never followed."""
    root = vault / TEMPORARY_DIR
    if root.is_symlink() or not root.is_dir():
        return ()
    entries: list[TemporaryEntry] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        # os.walk lists links to folders under dirnames without entering them: count them.
        names = filenames + [d for d in dirnames if (here / d).is_symlink()]
        for name in sorted(names):
            path = here / name
            entries.append(
                TemporaryEntry(path.relative_to(vault).as_posix(), _written_at(path, name))
            )
    return tuple(entries)


def _written_at(path: Path, name: str) -> datetime:
    stem = name[:-3] if name.endswith(".md") else ""
    if SIGNAL_ID_RE.fullmatch(stem):
        return parse_utc(stem.split("-", 1)[0])
    return datetime.fromtimestamp(path.lstat().st_mtime, UTC)


def audit_retention(
    vault: Path,
    oversized: Iterable[tuple[str, int]],
    last_close: CloseRecord | None,
    temporary: Iterable[TemporaryEntry],
) -> AuditResult:
    """Nothing in Temporary Content predates the last weekly close, which retained 0; and no
    full text lives elsewhere: no Signal body longer than a summary, no temporary-content file
    outside the folder. Text written after the last close waits for the next one (counted)."""
    findings: list[Finding] = []
    temporary = tuple(temporary)
    if (vault / TEMPORARY_DIR).is_symlink():
        findings.append(
            Finding("ERROR", (TEMPORARY_DIR.as_posix(), "is a symlink; the close refuses it"))
        )
    if last_close is not None and last_close.retained:
        week = last_close.week or "–"
        findings.append(
            Finding(
                "ERROR",
                (
                    TEMPORARY_DIR.as_posix(),
                    f"the close of week {week} retained {last_close.retained} files",
                ),
            )
        )
    pending = 0
    for entry in temporary:
        if last_close is None:
            findings.append(Finding("WARN", (entry.rel_path, "no weekly close recorded yet")))
        # Signal ids keep whole seconds: text from the close's own second counts as newer.
        elif entry.written_at < last_close.closed_at.replace(microsecond=0):
            closed = format_utc(last_close.closed_at)
            findings.append(Finding("ERROR", (entry.rel_path, f"survived the close at {closed}")))
        else:
            pending += 1
    oversized = tuple(oversized)
    for rel_path, length in oversized:
        findings.append(
            Finding("ERROR", (rel_path, f"body of {length} characters exceeds a summary's bound"))
        )
    stray = stray_temporary_text(vault)
    findings.extend(
        Finding("ERROR", (p, "temporary text outside Temporary Content")) for p in stray
    )
    return AuditResult(
        "retention",
        "full text lives only in Temporary Content and never outlives a weekly close",
        ("path", "problem"),
        tuple(findings),
        {
            "temporary_files": len(temporary),
            "pending_next_close": pending,
            "last_close_retained": last_close.retained if last_close else 0,
            "oversized_signal_bodies": len(oversized),
            "stray_temporary_files": len(stray),
        },
    )


def pipeline_section(body: str) -> str:
    """The part of a Signal body the pipeline wrote: up to and including its trailer line."""
    at = body.find(BODY_TRAILER)
    if at < 0:
        return body
    end = body.find("\n", at)
    return body if end < 0 else body[:end]


def visible_length(markdown: str) -> int:
    """Length as rendered: an entity or a backslash escape is one character."""
    return len(_ESCAPE.sub("x", markdown.strip()))


def stray_temporary_text(vault: Path) -> list[str]:
    """Vault files marked as temporary content that lie outside Temporary Content."""
    temporary = vault / TEMPORARY_DIR
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(vault, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and here / d != temporary)
        for name in sorted(filenames):
            if not name.endswith(".md"):
                continue
            path = here / name
            if path.is_symlink():
                continue
            try:
                with path.open("rb") as handle:
                    head = handle.read(256).decode("utf-8", errors="replace")
            except OSError:
                continue
            if head.startswith("---\n") and TEMPORARY_MARKER in head:
                found.append(path.relative_to(vault).as_posix())
    return found


# The Signal ids the vault's files claim and those the index holds.
_IDS = f"""
    WITH vault AS (SELECT DISTINCT claimed AS sid FROM ({_FILES})),
    indexed AS (SELECT DISTINCT signal_id AS sid FROM signals)
"""


def audit_agreement(con: duckdb.DuckDBPyConnection) -> AuditResult:
    """The vault and the DuckDB index hold the same Signal ids (the vault is the truth)."""
    differ = con.execute(
        f"""
        {_IDS}
        SELECT false, sid FROM indexed ANTI JOIN vault USING (sid)
        UNION ALL
        SELECT true, sid FROM vault ANTI JOIN indexed USING (sid)
        """
    ).fetchall()
    findings = [
        Finding("ERROR", (sid, "no", "yes", "index row without a Signal file"))
        for in_vault, sid in sorted(differ)
        if not in_vault
    ]
    findings += [
        Finding("WARN", (sid, "yes", "no", "not indexed yet (the next collection repairs it)"))
        for in_vault, sid in sorted(differ)
        if in_vault
    ]
    vault, index, common = _one(
        con,
        f"""
        {_IDS}
        SELECT (SELECT count(*) FROM vault), (SELECT count(*) FROM indexed),
               (SELECT count(*) FROM vault SEMI JOIN indexed USING (sid))
        """,
    )
    return AuditResult(
        "agreement",
        "the vault and the DuckDB index hold the same Signal ids",
        ("Signal", "in vault", "in index", "problem"),
        tuple(findings),
        {"vault": vault, "index": index, "common": common},
    )


# ---- everything at once ----------------------------------------------------------------------

AUDIT_NAMES = ("idempotency", "provenance", "registry", "overdue", "retention", "agreement")


def run_audit(name: str, paths: RadarPaths, now: datetime) -> AuditResult:
    """One audit by name, reading what it needs."""
    return run_audits(paths, now, (name,))[name]


def run_audits(
    paths: RadarPaths, now: datetime, names: Iterable[str] = AUDIT_NAMES
) -> dict[str, AuditResult]:
    """The named audits over the vault and DuckDB as they are now."""
    wanted = tuple(names)
    unknown = set(wanted) - set(AUDIT_NAMES)
    if unknown:
        raise ValueError(f"unknown audits: {sorted(unknown)}")
    with gc_paused():  # a stat and a dict entry per Signal file: no cycles, many allocations
        return _run_audits(paths, now, wanted)


def _run_audits(
    paths: RadarPaths, now: datetime, wanted: tuple[str, ...]
) -> dict[str, AuditResult]:
    store = Store(paths.db)
    # Everything read from the vault is read before the transaction, which holds the DuckDB
    # file only for the facts' update and the queries.
    judged = {"idempotency", "provenance", "retention", "agreement"} & set(wanted)
    update = gather_facts(paths.vault, store) if judged else None
    snapshot = load_registry(paths.vault) if {"registry", "overdue"} & set(wanted) else None
    retention = "retention" in wanted
    close = last_close(store) if retention else None
    temporary = list_temporary(paths.vault) if retention else ()
    out: dict[str, AuditResult] = {}
    oversized: list[tuple[str, int]] = []
    # One transaction: the audits see the same facts and index (each collection commits its
    # files' facts with their index rows), whatever another process writes meanwhile.
    with store.transaction() as con:
        if update is not None:
            open_facts(con, paths.vault, update)
        for name in wanted:
            if name == "idempotency":
                out[name] = audit_idempotency(con)
            elif name == "provenance":
                out[name] = audit_provenance(con)
            elif name == "agreement":
                out[name] = audit_agreement(con)
            elif name == "overdue":
                assert snapshot is not None
                eligible = sum(1 for r in snapshot.sources if r.source.is_eligible)
                late = overdue_sources(snapshot, load_states(con), now)
                out[name] = audit_overdue(late, eligible, now)
            elif name == "retention":
                oversized = oversized_bodies(con)
    if snapshot is not None and "registry" in wanted:
        out["registry"] = audit_registry(snapshot)
    if retention:
        out["retention"] = audit_retention(paths.vault, oversized, close, temporary)
    return {name: out[name] for name in wanted}
