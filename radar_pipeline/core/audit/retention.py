"""The retention audit: full text lives only in Temporary Content and never outlives a close.

    retention     nothing under Temporary Content survives a weekly close; no full text elsewhere

It lists Temporary Content (`list_temporary`) and the vault's stray temporary-content files
itself; the oversized Signal bodies come from the facts (`signal_audits.oversized_bodies`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.contract.operations import CloseRecord
from radar_pipeline.core.layout import TEMPORARY_DIR
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE

TEMPORARY_MARKER = "entityType: temporary-content"


@dataclass(frozen=True)
class TemporaryEntry:
    rel_path: str
    # The page's `fetchedAt` header (page extraction writes a Signal's text later than the
    # Signal), else the Signal id's timestamp, else the file's mtime.
    written_at: datetime


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
        return _fetched_at(path) or parse_utc(stem.split("-", 1)[0])
    return datetime.fromtimestamp(path.lstat().st_mtime, UTC)


_FETCHED_AT = re.compile(r'^fetchedAt: "([0-9TZ:-]+)"$', re.MULTILINE)


def _fetched_at(path: Path) -> datetime | None:
    """The `fetchedAt` of an extracted page's header, if the file is one (a link is not read)."""
    if path.is_symlink():
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(1024).decode("utf-8", errors="replace")
    except OSError:
        return None
    header = head.split("\n---", 1)[0]
    match = _FETCHED_AT.search(header)
    try:
        return parse_utc(match.group(1)) if match else None
    except ValueError:
        return None


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
    survivors, pending = _survivors(temporary, last_close)
    findings.extend(survivors)
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


def _survivors(
    temporary: Iterable[TemporaryEntry], last_close: CloseRecord | None
) -> tuple[list[Finding], int]:
    """A finding per entry that predates the last close (or per entry, with no close yet), and
    how many entries wait for the next close."""
    findings: list[Finding] = []
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
    return findings, pending


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
