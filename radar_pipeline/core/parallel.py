"""Parsing feeds on every core: a small process pool the `radar collect` command starts first.

feedparser and our plain-text extraction are pure-Python CPU work (about 80 ms a feed), so
threads cannot overlap them; processes can. The pool is forked at the very start of the
command, before Dagster is imported, before any thread exists and before any Source lock,
DuckDB or SQLite file is opened: the workers inherit none of them (a lock fd held by a stray
worker would outlive a killed collection). Workers are children of the command, joined when it
ends, so their CPU time and memory count as the command's own. A worker whose parent died (the
command was killed) exits by itself within a second.

Without a pool (Dagster daemon or UI runs, plain tests) the parse stage runs in-process, as
before; the results are identical either way (the workers run the same `parse_feed`).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import datetime
from typing import Any

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.parse import parse_feed

# Below this many bodies the pickling round trip costs more than the second core gives.
MIN_PARALLEL_BODIES = 4

_pool: ProcessPoolExecutor | None = None


def start_parse_pool(workers: int | None = None) -> bool:
    """Fork the parse workers now (call before any thread, lock or database exists).

    Returns False (and starts nothing) on a single core or where fork is unavailable.
    """
    global _pool
    if _pool is not None:
        return True
    count = workers if workers is not None else min(os.cpu_count() or 1, 4)
    if count < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    if threading.active_count() > 1:
        return False  # forking a threaded process could copy a lock another thread holds
    pool = ProcessPoolExecutor(
        max_workers=count,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    # With fork, the first submit starts every worker at once: do it now, while this process
    # is still single-threaded and holds nothing.
    pool.submit(os.getpid)
    _pool = pool
    return True


def stop_parse_pool() -> None:
    """Shut the workers down and wait for them (their rusage then counts as ours)."""
    global _pool
    pool, _pool = _pool, None
    discard_early()
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def parse_pool() -> ProcessPoolExecutor | None:
    return _pool


def _worker_init(parent_pid: int) -> None:
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
    future = pool.submit(parse_job, job)
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
            futures[i] = pool.submit(parse_job, jobs[i])
    return [_result(futures[i], jobs[i]) for i in range(len(jobs))]


def _result(future: Future[ParseOutcome], job: ParseArgs) -> ParseOutcome:
    try:
        return future.result()
    except Exception:  # the pool broke (a worker died): parse this one here instead
        return parse_job(job)
