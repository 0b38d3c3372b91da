"""The retention audit: full text lives only in Temporary Content and never outlives a close.

    retention     nothing under Temporary Content survives a weekly close; no full text elsewhere

It lists Temporary Content (`list_temporary`) and walks the vault for stray temporary-content
files itself, except the Signals folder's Signal files: whether those are marked, and which
bodies are oversized, come from their facts (core/vault/facts.py), which a check reads again
only for the files that are new or changed. So the check after a collection opens the files
the collection changed, not the vault's 100,000 Signals.
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
from radar_pipeline.core.layout import SIGNALS_DIR, TEMPORARY_DIR
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE
from radar_pipeline.core.vault.temporary import TEMPORARY_HEAD_BYTES, marks_temporary_text


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
    signals: SignalsFolderFacts | None = None,
) -> AuditResult:
    """Nothing in Temporary Content predates the last weekly close, which retained 0; and no
    full text lives elsewhere: no Signal body longer than a summary, no temporary-content file
    outside the folder. Text written after the last close waits for the next one (counted).

    `signals`: what the facts say of the Signals folder's files (None: every file is opened;
    see `stray_temporary_text`)."""
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
    stray = stray_temporary_text(vault, signals)
    findings.extend(
        Finding("ERROR", (p, "temporary text outside Temporary Content")) for p in stray.found
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
            "stray_temporary_files": len(stray.found),
            # What the walk for stray text read: the files it opened (not the Signal files,
            # whose facts speak for them) and the Signals folder entries it listed (none
            # while the folder is as its settled recorded state).
            "stray_scan_files_opened": stray.opened,
            "stray_scan_signals_listed": stray.signals_listed,
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


@dataclass(frozen=True)
class SignalsFolderFacts:
    """What the Signal files' facts (core/vault/facts.py) say of the Signals folder, read in
    the audits' transaction: which names are marked as temporary content, and whether the
    facts hold every file of the folder (`complete`: the folder is as its settled recorded
    state, which saw no writer's temp file: folder_state.holds_no_temp_files)."""

    marked: frozenset[str]
    complete: bool


@dataclass(frozen=True)
class StrayScan:
    """The walk for temporary text outside Temporary Content: what it found, in walk order,
    the files it opened and the Signals folder entries it listed (0: the facts spoke for it)."""

    found: tuple[str, ...]
    opened: int
    signals_listed: int


def stray_temporary_text(vault: Path, signals: SignalsFolderFacts | None = None) -> StrayScan:
    """Vault files marked as temporary content that lie outside Temporary Content: a walk of
    the vault (no hidden folder, no link followed), in name order, each folder's files before
    its subfolders.

    With `signals`, a Signal file of the Signals folder (a `*.md` whose name is neither a
    writer's temp name nor beyond ASCII: a file the facts hold) is judged by the facts, not
    opened; and when the facts are complete and the folder has no subfolder (its link count
    says so), the folder is not even listed. Every other Markdown file is opened."""
    scan = _StrayWalk(vault, signals)
    scan.walk(vault)
    return StrayScan(tuple(scan.found), scan.opened, scan.signals_listed)


class _StrayWalk:
    def __init__(self, vault: Path, signals: SignalsFolderFacts | None) -> None:
        self.vault = vault
        self.temporary = vault / TEMPORARY_DIR
        self.signals_dir = vault / SIGNALS_DIR
        self.signals = signals
        self.found: list[str] = []
        self.opened = 0
        self.signals_listed = 0

    def walk(self, here: Path) -> None:
        by_facts = self.signals if here == self.signals_dir else None
        if by_facts is not None and by_facts.complete and _has_no_subfolder(here):
            prefix = SIGNALS_DIR.as_posix() + "/"
            self.found.extend(prefix + name for name in sorted(by_facts.marked))
            return
        try:
            entries = list(os.scandir(here))
        except OSError:
            return
        if by_facts is not None:
            self.signals_listed += len(entries)
        files, folders = [], []
        for entry in entries:
            if _is_dir(entry):
                if not entry.name.startswith(".") and not entry.is_symlink():
                    folders.append(entry.name)
            elif entry.name.endswith(".md"):
                files.append(entry.name)
        for name in sorted(files):
            self.judge(here, name, by_facts)
        for name in sorted(folders):
            if here / name != self.temporary:
                self.walk(here / name)

    def judge(self, here: Path, name: str, by_facts: SignalsFolderFacts | None) -> None:
        path = here / name
        # Temp names start with a dot; the facts hold no such file, nor one whose name DuckDB
        # cannot store as written.
        if by_facts is not None and not name.startswith(".") and name.isascii():
            if name in by_facts.marked:
                self.found.append(path.relative_to(self.vault).as_posix())
            return
        if path.is_symlink():
            return
        self.opened += 1
        try:
            with path.open("rb") as handle:
                head = handle.read(TEMPORARY_HEAD_BYTES)
        except OSError:
            return
        if marks_temporary_text(head):
            self.found.append(path.relative_to(self.vault).as_posix())


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """As `os.walk` sorts entries: a link to a folder is a folder (never entered)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _has_no_subfolder(folder: Path) -> bool:
    """Whether the folder's link count proves it has no subfolder (2: itself and its own
    `.`). File systems that do not count them (btrfs gives 1) never prove it: listed."""
    try:
        return os.stat(folder).st_nlink == 2
    except OSError:
        return False
