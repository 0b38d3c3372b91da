"""The Signals folder's state in DuckDB: what lets a collection and the per-collection checks
trust the index and the stored facts without listing 100,000 files when nothing changed.

A full listing of the folder (the checks' `gather_facts`, with a stat per file) records a
`FolderState`: the directory's mtime_ns taken *before* the listing, the number of Signal
entries, a fingerprint of their name set and when the listing started. Creating, removing or
renaming a file in a directory changes that directory's mtime, so while the mtime is unchanged
the name set is the recorded one. The pipeline's own new Signal files are journaled: the commit
that records them also adds their names to the state (`journal_created`), in the same DuckDB
transaction, so its own writes do not force a rescan.

Trust has one trap: the file system's clock tick. Two changes inside one tick leave one mtime,
so a state whose mtime is within `settle_margin_ns` of the moment it was taken is *unsettled*:
it is only trusted after a names-only listing (no stat per file) gives the same count and
fingerprint (`judge`). A journaled state is always unsettled (the commit's own files were
written just before), so whatever happened around a commit's writes is seen by that listing.

What a directory mtime does not show: a file rewritten in place (its name stays). Those are
found by the full audit, which stats every file (docs/operations.md says when it runs).
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from radar_pipeline.core.files import is_temp_name
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.folder_state import (
    forget_folder_state,
    load_folder_state,
    save_folder_state,
)

# Linux file systems store timestamps from the kernel's coarse clock: one tick (<= 10 ms) of
# imprecision. A stored time that is a whole multiple of 10 ms may come from a coarser file
# system (FAT: 2 s; some network file systems: 1 s): then the margin is 2 s.
FINE_MARGIN_NS = 100_000_000
COARSE_MARGIN_NS = 2_000_000_000
_COARSE_STEP_NS = 10_000_000
_FOLDER = SIGNALS_DIR.as_posix()

Verdict = Literal["trusted", "verified", "changed", "unknown"]


def settle_margin_ns(mtime_ns: int) -> int:
    """How long after `mtime_ns` a change could still leave the directory's mtime as it is."""
    return COARSE_MARGIN_NS if mtime_ns % _COARSE_STEP_NS == 0 else FINE_MARGIN_NS


@dataclass(frozen=True)
class FolderState:
    """The Signals folder as last verified: see the module docstring."""

    mtime_ns: int  # the directory's mtime when the listing (or the journaled commit) began
    entries: int  # Signal entries (`*.md`, not temp files, regular files)
    fingerprint: int  # `fingerprint` of their names
    verified_at_ns: int  # wall clock when that listing started
    temp_files: int = 0  # writers' temp files the listing saw (0: the planner skips the folder)

    @property
    def settled(self) -> bool:
        """Whether any later change must have moved the directory's mtime."""
        return self.verified_at_ns - self.mtime_ns >= settle_margin_ns(self.mtime_ns)


@dataclass(frozen=True)
class Listing:
    """One names-only listing of the Signals folder (no stat per file)."""

    mtime_ns: int  # the directory's mtime, taken before the listing
    started_ns: int
    names: tuple[str, ...]  # Signal entries: `*.md`, not temp files, regular files
    temp_files: int = 0

    def state(self) -> FolderState:
        return FolderState(
            self.mtime_ns,
            len(self.names),
            fingerprint(self.names),
            self.started_ns,
            self.temp_files,
        )


def fingerprint(names: Iterable[str]) -> int:
    """An order-free 64-bit fingerprint of a name set: names can be added one by one (XOR).
    Two CRC-32s per name: it tells an accidental change from none, not an adversary's."""
    value = 0
    for name in names:
        raw = name.encode("utf-8", "surrogateescape")
        value ^= (zlib.crc32(raw) << 32) | zlib.crc32(raw[::-1])
    return value


def folder_of(vault: Path) -> Path:
    return vault / SIGNALS_DIR


def dir_mtime_ns(folder: Path) -> int | None:
    """The directory's mtime; None when it is not there."""
    try:
        return os.stat(folder).st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return None


def is_signal_entry(entry: os.DirEntry[str]) -> bool:
    """A Markdown file of the Signals folder that is not a writer's temp file."""
    name = entry.name
    return name.endswith(".md") and not is_temp_name(name) and entry.is_file(follow_symlinks=False)


def list_names(folder: Path) -> Listing | None:
    """The folder's Signal entries by name (d_type, no stat per file); None when absent."""
    started = time.time_ns()
    mtime = dir_mtime_ns(folder)
    if mtime is None:
        return None
    names: list[str] = []
    temps = 0
    try:
        for entry in os.scandir(folder):
            if is_temp_name(entry.name):
                temps += 1
            elif is_signal_entry(entry):
                names.append(entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return Listing(mtime, started, tuple(names), temps)


# ---- the stored state ------------------------------------------------------------------------


def load_state(con: Connection) -> FolderState | None:
    row = load_folder_state(con, _FOLDER)
    return None if row is None else FolderState(*row)


def save_state(con: Connection, state: FolderState) -> None:
    save_folder_state(
        con,
        _FOLDER,
        (state.mtime_ns, state.entries, state.fingerprint, state.verified_at_ns, state.temp_files),
    )


def forget_state(con: Connection) -> None:
    """The next reader lists the folder in full (after `radar index rebuild`, or when a
    listing found names the facts cannot hold)."""
    forget_folder_state(con, _FOLDER)


def journal_created(con: Connection, before_ns: int | None, names: list[str], folder: Path) -> bool:
    """Add the names a commit created to the state, in the commit's transaction, when the
    folder was as recorded just before the writes (`before_ns`: its mtime then). The state
    stays unsettled, so the next reader verifies the name set once. Otherwise (the folder
    had changed already) the state is left as it is, i.e. stale: the next reader lists."""
    state = load_state(con)
    if state is None or before_ns is None or state.mtime_ns != before_ns or not names:
        return False
    after = dir_mtime_ns(folder)
    if after is None:
        return False
    save_state(
        con,
        FolderState(
            after,
            state.entries + len(names),
            state.fingerprint ^ fingerprint(names),
            # Unsettled by construction (taken at the mtime itself), however long the commit
            # took since its writes: an outside change in that window is seen by the listing.
            after,
            state.temp_files,
        ),
    )
    return True


@dataclass(frozen=True)
class Judgement:
    """Whether the folder is as recorded, and the listing made to find out (if one was)."""

    verdict: Verdict  # trusted: unchanged, no listing; verified: a listing matched;
    # changed: the mtime moved or the listing differs; unknown: no state (or no folder)
    listing: Listing | None = None

    @property
    def unchanged(self) -> bool:
        return self.verdict in ("trusted", "verified")


def judge(con: Connection, folder: Path) -> Judgement:
    """Compare the folder with its recorded state; a verified listing settles the state (in
    this transaction) once the clock has moved past the margin."""
    state = load_state(con)
    mtime = dir_mtime_ns(folder)
    if state is None or mtime is None:
        return Judgement("unknown")
    if mtime != state.mtime_ns:
        return Judgement("changed")
    if state.settled:
        return Judgement("trusted")
    listing = list_names(folder)
    if listing is None:
        return Judgement("unknown")
    seen = listing.state()
    if (seen.mtime_ns, seen.entries, seen.fingerprint, seen.temp_files) != (
        state.mtime_ns,
        state.entries,
        state.fingerprint,
        state.temp_files,
    ):
        return Judgement("changed", listing)
    save_state(con, seen)
    return Judgement("verified", listing)


def holds_no_temp_files(con: Connection, folder: Path) -> bool:
    """Whether the folder is as a settled state that saw no writer's temp file: then no
    killed writer's temp file can be in it (a new one would have moved the mtime), and the
    planner's clean-up need not list it."""
    state = load_state(con)
    return (
        state is not None
        and state.temp_files == 0
        and state.settled
        and dir_mtime_ns(folder) == state.mtime_ns
    )
