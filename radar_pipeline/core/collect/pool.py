"""Parsing feeds and writing Signals on every core: a small process pool `radar collect` starts
first.

feedparser and our plain-text extraction are pure-Python CPU work (about 80 ms a feed), so
threads cannot overlap them; processes can. The pool is forked at the very start of the
command, before Dagster is imported, before any thread exists and before any Source lock,
DuckDB or SQLite file is opened: the workers inherit none of them (a lock fd held by a stray
worker would outlive a killed collection). Workers are children of the command, joined when it
ends, so their CPU time and memory count as the command's own. A worker whose parent died (the
command was killed) exits by itself within a second.

Without a pool (Dagster daemon or UI runs, plain tests) parsing runs in-process and Signals are
written by threads, as before; the results are identical either way (the workers run the same
`parse_feed` and `write_signals`). Writing on the pool keeps the commit rule: every file is
written and fsynced by a worker before the parent's DuckDB transaction records it. After the
commit, the workers also write the Sources' health mirrors (YAML work, ~3 ms a file) while the
parent reports each Source to Dagster; the parent waits for them before it releases the Source
locks.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radar_pipeline.core.config import set_temp_owner
from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.parse.feed import parse_feed

if TYPE_CHECKING:
    from radar_pipeline.core.audit.audits import FactsKey, SignalFile
    from radar_pipeline.core.vault.signals import SignalDocument

# Below this many bodies (or new Signals) the pickling round trip costs more than the second
# core gives.
MIN_PARALLEL_BODIES = 4
MIN_PARALLEL_WRITES = 40
# Threads per writer: a Signal costs ~1.3 ms of CPU and ~3 ms of fsync waits; threads overlap
# the waits (in the parent's threads, or in each worker's own).
WRITE_THREADS = 8

_pool: ProcessPoolExecutor | None = None
_workers = 0  # the pool's process count


def start_parse_pool(workers: int | None = None) -> bool:
    """Fork the parse workers now (call before any thread, lock or database exists).

    Returns False (and starts nothing) on a single core or where fork is unavailable.
    """
    global _pool, _workers
    if _pool is not None:
        return True
    count = workers if workers is not None else min(os.cpu_count() or 1, 4)
    if count < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    if threading.active_count() > 1:
        return False  # forking a threaded process could copy a lock another thread holds
    _import_worker_modules()
    pool = ProcessPoolExecutor(
        max_workers=count,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    # With fork, the first submit starts every worker at once: do it now, while this process
    # is still single-threaded and holds nothing.
    pool.submit(os.getpid)
    _pool, _workers = pool, count
    return True


def _import_worker_modules() -> None:
    """Import what the workers run (writing Signals, audits, health mirrors) before the fork.

    The command imports all of it a moment later anyway (core/headstart.py); imported here,
    the workers inherit the modules instead of each importing them again on its first job
    (~0.25 s of CPU per worker, on a machine whose cores the whole command shares). Importing
    starts no thread and opens no file that a worker would keep."""
    import radar_pipeline.core.audit.audits
    import radar_pipeline.core.frontmatter
    import radar_pipeline.core.vault.signals
    import radar_pipeline.core.vault.temporary  # noqa: F401


def stop_parse_pool() -> None:
    """Shut the workers down and wait for them (their rusage then counts as ours)."""
    global _pool
    pool, _pool = _pool, None
    discard_early()
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def parse_pool() -> ProcessPoolExecutor | None:
    return _pool


# prctl(2) option: the signal the kernel sends this process when its parent thread dies.
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker the instant the command dies, so no worker keeps
    writing Signals once its parent (and the parent's Source locks) are gone. Safe here: the
    main thread forked us. Elsewhere the polling watcher below is the only guard."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return


def _worker_init(parent_pid: int) -> None:
    _die_with_parent()
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(0)
    set_temp_owner(parent_pid)  # temp files name the command, not this worker

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(0)  # the command is gone (killed): nothing of ours is left to finish

    threading.Thread(target=watch, name="radar-parse-orphan-watch", daemon=True).start()


ParseArgs = tuple[str, bytes, str, str | None, datetime, datetime | None]
# ("ok", ParsedFeed) | ("error", error_class, message) | ("crash", type name, message)
ParseOutcome = tuple[Any, ...]


def parse_job(args: ParseArgs) -> ParseOutcome:
    """`parse_feed` with its failures as values (exceptions need not survive pickling)."""
    source_id, body, base_url, content_type, now, coverage_from = args
    try:
        parsed = parse_feed(
            source_id,
            body,
            base_url=base_url,
            content_type=content_type,
            now=now,
            coverage_from=coverage_from,
        )
    except ParseError as exc:
        return ("error", exc.error_class, exc.message)
    except Exception as exc:  # a parser bug fails one Source; the caller logs it
        return ("crash", type(exc).__name__, str(exc))
    return ("ok", parsed)


# Parses started early (`parse_early`, while other feeds were still being fetched), by job.
_early: dict[tuple[str, str], tuple[ParseArgs, Future[ParseOutcome]]] = {}
_early_lock = threading.Lock()


def parse_early(job: ParseArgs, key: str) -> None:
    """Start parsing `job` on the pool now (no-op without a pool); `parse_many` picks the
    outcome up when it gets the same job. `key` tells bodies apart (their sha256)."""
    pool = _pool
    if pool is None:
        return
    future = _submit(pool, parse_job, job)
    if future is None:
        return
    with _early_lock:
        _early[(job[0], key)] = (job, future)


def discard_early() -> None:
    """Forget parses started early that nobody picked up (a failed stage, a test)."""
    with _early_lock:
        pending = list(_early.values())
        _early.clear()
    for _, future in pending:
        future.cancel()


def parse_many(jobs: Sequence[ParseArgs], keys: Sequence[str] | None = None) -> list[ParseOutcome]:
    """Every job's outcome, in order: on the pool when there is one and enough work (or when
    `parse_early` already started it: `keys` are the bodies' sha256, as given there)."""
    pool = _pool
    futures: dict[int, Future[ParseOutcome]] = {}
    if keys is not None:
        with _early_lock:
            for i, (job, key) in enumerate(zip(jobs, keys, strict=True)):
                early = _early.pop((job[0], key), None)
                if early is not None and early[0] == job:
                    futures[i] = early[1]
    if pool is None or len(jobs) < MIN_PARALLEL_BODIES:
        return [
            _result(futures[i], job) if i in futures else parse_job(job)
            for i, job in enumerate(jobs)
        ]
    # Largest bodies first, so the two workers finish together rather than one waiting on
    # the last big feed.
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))
    for i in order:
        if i not in futures:
            future = _submit(pool, parse_job, jobs[i])
            if future is not None:
                futures[i] = future
    return [
        _result(futures[i], job) if i in futures else parse_job(job) for i, job in enumerate(jobs)
    ]


def _result(future: Future[ParseOutcome], job: ParseArgs) -> ParseOutcome:
    try:
        return future.result()
    except Exception:  # the pool broke (a worker died): parse this one here instead
        return parse_job(job)


# identity, the Signal document, (title, full text) to keep under Temporary Content or None
WriteItem = tuple[str, "SignalDocument", tuple[str, str] | None]
# identity, Signal id, created | reused, the facts of a created file, Temporary Content bytes
WriteResult = tuple[str, str, str, "tuple[str, FactsKey, SignalFile] | None", int]


def write_signals(vault: Path, items: Sequence[WriteItem], threads: int = 1) -> list[WriteResult]:
    """Create each Signal file (atomic, fsynced; never overwritten) and its temporary text;
    with the facts the evidence audits need of each created file (core/audit.py). The folder
    is fsynced once, after the last file: all are durable when this returns."""
    from radar_pipeline.core.vault.signals import sync_signals_dir

    if threads > 1 and len(items) > 1:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="radar-write") as pool:
            results = list(pool.map(lambda item: _write_one(vault, item), items))
    else:
        results = [_write_one(vault, item) for item in items]
    # Also when every file was already there: a writer that died (a pool worker, a killed
    # command) may have linked them without its folder fsync, and the caller is about to
    # record them in DuckDB.
    if results:
        sync_signals_dir(vault)
    return results


def _write_one(vault: Path, item: WriteItem) -> WriteResult:
    from radar_pipeline.core.audit.audits import facts_key, facts_of_written
    from radar_pipeline.core.vault.signals import SIGNALS_DIR, create_signal_file
    from radar_pipeline.core.vault.temporary import write_temporary_text

    identity, doc, temporary = item
    text = doc.render()
    outcome = create_signal_file(vault, doc, text, sync_dir=False)
    if outcome != "created":
        return (identity, doc.signal_id, outcome, None, 0)
    # What the evidence checks will need of this file, from the bytes just written (they then
    # skip reading it back).
    name = f"{doc.signal_id}.md"
    info = os.stat(vault / SIGNALS_DIR / name)
    facts = (
        name,
        facts_key(info),
        facts_of_written(name, doc.fields(), text),
    )
    written = write_temporary_text(vault, doc.signal_id, *temporary) if temporary else 0
    return (identity, doc.signal_id, outcome, facts, written)


def write_many(vault: Path, batches: Sequence[Sequence[WriteItem]]) -> list[list[WriteResult]]:
    """`write_signals` of every batch (one per Source), in order: on the pool's processes when
    there is one and enough to write, else on threads of this process."""
    pool = _pool
    if pool is None or sum(len(b) for b in batches) < MIN_PARALLEL_WRITES:
        with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="radar-write") as tp:
            return list(tp.map(lambda b: write_signals(vault, b), batches))
    futures = [
        _submit(pool, write_signals, vault, batch, WRITE_THREADS // 2) if batch else None
        for batch in batches
    ]
    out: list[list[WriteResult]] = []
    broken = False
    for batch, future in zip(batches, futures, strict=True):
        if not batch:
            out.append([])
            continue
        if not broken and future is not None:
            try:
                out.append(future.result())
                continue
            except Exception:  # the pool broke (a worker died)
                # Python fails the pending futures before it stops the surviving workers:
                # join them all before writing here, so no worker is still writing a batch.
                broken = True
                _abandon_pool(pool)
        out.append(write_signals(vault, batch, WRITE_THREADS))
    return out


# Source id, its file, its vault path (for messages), the health keys to set in its frontmatter
HealthUpdate = tuple[str, Path, str, dict[str, str | int | None]]
# Source id, vault path, why its mirror was not written
HealthFailure = tuple[str, str, str]


def write_health(updates: Sequence[HealthUpdate]) -> list[HealthFailure]:
    """Mirror each Source's health into its file's frontmatter (core/frontmatter.py: atomic,
    every other byte kept); threads overlap the fsyncs. Returns the files that failed."""
    from radar_pipeline.core.errors import RegistryError
    from radar_pipeline.core.frontmatter import update_frontmatter_keys

    def one(update: HealthUpdate) -> HealthFailure | None:
        source_id, path, shown, fields = update
        try:
            update_frontmatter_keys(path, fields)
        except (RegistryError, OSError) as exc:
            return (source_id, shown, str(exc))
        return None

    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="radar-health") as tp:
        return [f for f in tp.map(one, updates) if f is not None]


class HealthMirrors:
    """Health mirrors in writing (`mirror_health`); `wait` returns the failures."""

    def __init__(
        self,
        parts: list[tuple[Sequence[HealthUpdate], Future[list[HealthFailure]]]],
        pool: ProcessPoolExecutor | None,
    ) -> None:
        self._parts = parts
        self._pool = pool

    def wait(self) -> list[HealthFailure]:
        failures: list[HealthFailure] = []
        for updates, future in self._parts:
            try:
                failures.extend(future.result())
            except Exception:
                # The pool broke (a worker died): write these here, once no worker is left
                # writing (as write_many does).
                if self._pool is not None:
                    _abandon_pool(self._pool)
                failures.extend(write_health(updates))
        return failures


def mirror_health(updates: Sequence[HealthUpdate]) -> HealthMirrors:
    """Start `write_health` of every update and return at once: split over the pool's
    processes when there is one (the YAML work is CPU), else on a thread of this process. The
    caller goes on reporting the committed collection meanwhile and then waits."""
    pool = _pool
    parts: list[tuple[Sequence[HealthUpdate], Future[list[HealthFailure]]]] = []
    rest = list(updates)
    if pool is not None and len(updates) >= MIN_PARALLEL_BODIES:
        shares = [list(updates[i::_workers]) for i in range(_workers)]
        rest = []
        for index, share in enumerate(shares):
            future = _submit(pool, write_health, share)
            if future is None:  # the pool broke: what it did not take is written here
                rest = [u for later in shares[index:] for u in later]
                break
            parts.append((share, future))
    if not rest:
        return HealthMirrors(parts, pool)
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="radar-health")
    parts.append((rest, background.submit(write_health, rest)))
    background.shutdown(wait=False)
    return HealthMirrors(parts, pool)


def run_soon(fn: Any, *args: Any) -> Future[Any] | None:
    """Start `fn(*args)` on the pool and return its future; None without a pool (or a broken
    one): the caller then runs it itself. `fn` and its arguments must pickle."""
    pool = _pool
    return _submit(pool, fn, *args) if pool is not None else None


def _submit(pool: ProcessPoolExecutor, fn: Any, *args: Any) -> Future[Any] | None:
    """`pool.submit`, or None once the pool is broken (a worker died: submit raises)."""
    try:
        return pool.submit(fn, *args)
    except Exception:
        _abandon_pool(pool)
        return None


def _abandon_pool(pool: ProcessPoolExecutor) -> None:
    """Stop using a broken pool: every worker is gone when this returns; parsing and writing
    continue in this process."""
    global _pool
    if _pool is pool:
        _pool = None
    discard_early()
    pool.shutdown(wait=True, cancel_futures=True)
