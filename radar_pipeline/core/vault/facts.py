"""The facts of each Signal file that the evidence audits judge, cached in DuckDB.

A file's facts (`SignalFile`: the id it declares, why its frontmatter is unreadable, its
provenance problems, the length of the body the pipeline wrote, whether it is marked as
temporary content) are stored in the table
`audit_signal_files`, keyed by the file's name and stat (`FactsKey`). A check reads again only
the files that are new or changed since their facts were taken (`gather_facts`), and the
collection and `radar index rebuild` record the facts of the files they write or read
(`record_facts`), so the checks after a collection parse no file at all. The table is a cache:
losing it (a rebuilt database) only means every file is read once more.

`open_facts` opens the view `audit_files` over these facts, which the audits in
`core/audit/signal_audits.py` query as sets.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from radar_pipeline.core.contract.notes import PROVENANCE_FIELDS, SIGNAL_ID_RE
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.files import is_temp_name
from radar_pipeline.core.identity.keys import identity_of
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.store import facts as stored
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.facts import FactRow
from radar_pipeline.core.vault.folder_state import (
    FolderState,
    Judgement,
    dir_mtime_ns,
    fingerprint,
    forget_state,
    is_signal_entry,
    judge,
    save_state,
)
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline.core.vault.temporary import TEMPORARY_HEAD_BYTES, marks_temporary_text

# Marks the end of what the pipeline wrote; people may annotate below it freely.
BODY_TRAILER = "*Collected by Radar from "
# A verified first-party publication date needs this key to say where it was verified.
PUBLISHED_EVIDENCE_KEY = "publishedAtEvidence"
# A Signal file's vault path is this plus its name (string joins: 100,000 Path joins cost 0.5 s).
SIGNALS_PREFIX = SIGNALS_DIR.as_posix() + "/"

_ESCAPE = re.compile(r"&#?[0-9A-Za-z]+;|\\.")

FactsKey = tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns


def facts_key(info: os.stat_result) -> FactsKey:
    """What tells a Signal file's facts are still those of its current content."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class SignalFile:
    """What the audits need of one Markdown file in the Signals folder, read without trusting
    it: small enough to keep for every file (the facts this module caches)."""

    rel_path: str
    stem: str
    declared_id: str | None  # the frontmatter's `id` when it is a well-formed Signal id
    error: str | None  # why the frontmatter is unreadable; None when it was read
    provenance: tuple[tuple[str, str], ...]  # (fields, problem) per provenance problem
    body_length: int  # visible length of the part of the body the pipeline wrote
    # Marked as temporary content (temporary.marks_temporary_text): full text outside
    # Temporary Content, which the retention audit reports.
    temporary_text: bool = False

    @property
    def identity(self) -> str | None:
        """The identity the file claims: its declared id's hex part, else its name's."""
        if self.declared_id:
            return identity_of(self.declared_id)
        return identity_of(self.stem) if SIGNAL_ID_RE.fullmatch(self.stem) else None


@dataclass(frozen=True)
class FolderScan:
    """How a check read the Signals folder: `full` (a stat per file), or incremental, where
    `trusted` (directory mtime as recorded: no listing), `verified` (a names-only listing
    matched the recorded name set) and `rescanned` (the folder had changed: a full scan)."""

    mode: str
    files_stat: int  # files stat'ed (every file in a full scan; only unreadable ones else)
    names_listed: int  # entries a listing read (0 when the folder was trusted)

    def metadata(self) -> dict[str, str | int]:
        return {
            "folder_scan": self.mode,
            "files_stat": self.files_stat,
            "names_listed": self.names_listed,
        }


@dataclass(frozen=True)
class FactsUpdate:
    """What the checks change in `audit_signal_files` before judging the Signals folder
    (`gather_facts`), and the facts of the files it cannot hold."""

    folder_present: bool
    listed: Mapping[str, FactsKey]  # every file DuckDB can name, as the listing saw it
    fresh: tuple[tuple[str, FactsKey, SignalFile], ...] = ()  # new, changed or unreadable
    unstored: tuple[SignalFile, ...] = ()  # files whose names are not UTF-8 (DuckDB: UTF-8)
    # The folder is as its recorded state says: the stored facts stand for every file, and
    # `listed` is empty (only `fresh` is applied).
    trusted: bool = False
    state: FolderState | None = None  # what a full scan saw, recorded with the facts
    scan: FolderScan = FolderScan("full", 0, 0)


def gather_facts(vault: Path, store: Store, full: bool = True) -> FactsUpdate:
    """The Signals folder's `*.md` files (copies under other names included, temp files not)
    against their stored facts, outside any transaction.

    `full`: a stat per file; only files that are new or changed since their facts were taken
    (name, inode, size, mtime or ctime differ) are opened and parsed, and files that could not
    be read are read again each time (the cause may pass: an I/O error, a file being written
    by a person). Collections and `radar index rebuild` record the facts of the files they
    write or read (`record_facts`), so the checks after a collection parse no file at all.

    Not `full` (the checks after a collection): when the folder is as its recorded state says
    (folder_state.judge: same directory mtime, settled or verified by a names-only listing),
    the stored facts stand and only files whose facts are not whole (unreadable, or
    taken before a fact was added: store/facts.py) are read again; else the full scan. What
    this does not see, a file rewritten in place, the next full scan does.
    """
    folder = vault / SIGNALS_DIR
    if not full:

        def read(con: Connection) -> tuple[Judgement, list[str]]:
            judgement = judge(con, folder)
            return judgement, stored.errored_names(con) if judgement.unchanged else []

        judgement, errored = store.atomically(read)
        if judgement.unchanged:
            listing = judgement.listing
            fresh = [
                (n, key, _read_one(folder / n, n)) for n in errored if (key := _key(folder / n))
            ]
            return FactsUpdate(
                True,
                {},
                tuple(fresh),
                trusted=True,
                scan=FolderScan(
                    judgement.verdict, len(errored), len(listing.names) if listing else 0
                ),
            )
    started = time.time_ns()
    mtime = dir_mtime_ns(folder)
    if mtime is None or not folder.is_dir():
        return FactsUpdate(False, {}, scan=FolderScan("full" if full else "rescanned", 0, 0))
    listed: dict[str, FactsKey] = {}
    unstorable: list[str] = []
    temps = 0
    for entry in os.scandir(folder):
        if is_temp_name(entry.name):
            temps += 1
            continue
        if not is_signal_entry(entry):
            continue
        name = entry.name
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not name.isascii() and _escaped(name) != name:
            unstorable.append(name)  # read at every check; such a file is never a Signal
            continue
        listed[name] = facts_key(info)
    rows = stored.read_stored_keys(store)
    known = {row[0]: (row[1], row[2], row[3], row[4]) if row[5] else None for row in rows}
    stale = sorted(name for name, key in listed.items() if known.get(name) != key)
    # A name the facts cannot hold keeps the folder from ever being trusted (no state).
    state = (
        None if unstorable else FolderState(mtime, len(listed), fingerprint(listed), started, temps)
    )
    return FactsUpdate(
        True,
        listed,
        tuple((name, listed[name], _read_one(folder / name, name)) for name in stale),
        tuple(_read_one(folder / name, _escaped(name)) for name in sorted(unstorable)),
        state=state,
        scan=FolderScan("full" if full else "rescanned", len(listed) + len(unstorable), 0),
    )


def _key(path: Path) -> FactsKey | None:
    try:
        return facts_key(path.lstat())
    except OSError:
        return None


def open_facts(con: Connection, vault: Path, update: FactsUpdate | None = None) -> None:
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
    if update is not None and not update.folder_present:
        stored.open_files_view(con, None)
        return
    unstored: list[FactRow] = []
    if update is not None and update.trusted:
        if update.fresh:
            _write_facts(con, update.fresh, ())
    elif update is not None:
        unstored = _apply_facts(con, vault / SIGNALS_DIR, update)
        # The listing's folder state, recorded with the facts it produced (folder_state.py).
        if update.state is None:
            forget_state(con)
        else:
            save_state(con, update.state)
    stored.open_files_view(con, unstored)


def _apply_facts(con: Connection, folder: Path, update: FactsUpdate) -> list[FactRow]:
    """Write the listing's facts; return the rows of the files DuckDB cannot hold."""
    names = stored.stored_names(con)
    absent = [
        name for name in sorted(names - update.listed.keys()) if not _is_regular_file(folder / name)
    ]
    fresh = list(update.fresh)
    names.update(name for name, _, _ in fresh)
    fresh += [
        (name, key, _read_one(folder / name, name))
        for name, key in sorted(update.listed.items())
        if name not in names
    ]
    if fresh or absent:
        _write_facts(con, fresh, absent)
    return _fact_rows([(f.stem + ".md", (0, 0, 0, 0), f) for f in update.unstored])


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


# ---- the facts of one file -------------------------------------------------------------------


def _read_one(path: Path, name: str) -> SignalFile:
    rel = SIGNALS_PREFIX + name
    stem = name[:-3]
    body_length = visible_length(pipeline_section(_body(path)))
    temporary = marks_temporary_text(_head(path))
    try:
        fm = read_signal_frontmatter(path)
    except VaultError as exc:
        return SignalFile(rel, stem, None, exc.message, (), body_length, temporary)
    value = fm.get("id")
    declared = value if isinstance(value, str) and SIGNAL_ID_RE.fullmatch(value) else None
    problems = provenance_problems(stem, fm)
    return SignalFile(rel, stem, declared, None, problems, body_length, temporary)


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
        SIGNALS_PREFIX + name,
        stem,
        declared,
        None,
        provenance_problems(stem, fields),
        length,
        marks_temporary_text(text.encode("utf-8", "surrogateescape")[:TEMPORARY_HEAD_BYTES]),
    )


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


def _body(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return _body_of(text)


def _head(path: Path) -> bytes:
    """The file's first bytes, as the marker of temporary content is looked for in them."""
    try:
        with path.open("rb") as handle:
            return handle.read(TEMPORARY_HEAD_BYTES)
    except OSError:
        return b""


def _body_of(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end >= 0:
            return text[end + 5 :]
    return text


# ---- storing facts ---------------------------------------------------------------------------


def record_facts(con: Connection, written: Sequence[tuple[str, FactsKey, SignalFile]]) -> None:
    """Store the facts of files just written (in the transaction that indexes them)."""
    _write_facts(con, written, ())


def _write_facts(
    con: Connection,
    fresh: Sequence[tuple[str, FactsKey, SignalFile]],
    gone: Iterable[str],
) -> None:
    stored.write_facts(con, _fact_rows(fresh), gone)


def _fact_rows(facts: Sequence[tuple[str, FactsKey, SignalFile]]) -> list[FactRow]:
    return [
        (
            name,
            *key,
            f.declared_id,
            None if f.error is None else _escaped(f.error),
            json.dumps(f.provenance) if f.provenance else None,
            f.body_length,
            f.identity,
            f.temporary_text,
        )
        for name, key, f in facts
    ]
