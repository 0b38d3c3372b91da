"""Parse workers: the feeds, pages and JSON answers of one collection parsed on every core, and
its new Signal files rendered there too.

feedparser, lxml and our text extraction are pure-Python CPU work (tens of milliseconds a feed), so
threads cannot overlap them; processes can. `ParseWorkers` is an explicit object owned by one
collection: created closed, started by the collector once a fetch stage has enough bodies ahead
of it, and shut down (every worker joined) when the collection is closed. Workers are started
with `spawn`, so they inherit nothing from the collecting process (no lock, thread, database or
Dagster state) and only ever parse: a worker writes no file, so one that outlives a killed
collection cannot touch the vault. Results are identical with and without workers (both run
`parse_job`, and `SignalDocument.render` for a Signal's text).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.process
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import ParsedFeed
from radar_pipeline.core.parse.dispatch import parse_body
from radar_pipeline.core.parse.spec import ExtractionSpec
from radar_pipeline.core.vault.signals import SignalDocument

log = logging.getLogger(__name__)

# Below this many bodies the round trip to a worker costs more than the second core gives.
MIN_PARALLEL_BODIES = 4
MAX_WORKERS = 4
# Signal documents per render job: the round trip to a worker is paid once a chunk, and a
# collection's file writes start as soon as its first chunk is back.
RENDER_CHUNK = 40
# How long closing waits for the pool to shut down before it ends the workers still there.
# `ProcessPoolExecutor` joins its workers without a timeout, and after a worker dies it ends the
# others with SIGTERM: one that does not exit on it (stopped, or stuck in the kernel) would hold
# the collection, and the process's exit, forever. A healthy worker exits in milliseconds.
CLOSE_TIMEOUT_S = 15.0


class _RecordingSpawnContext(multiprocessing.context.SpawnContext):
    """The `spawn` start method, remembering every process it creates: the pool's workers,
    whenever the executor starts them (it may start one late, on a later submit)."""

    def __init__(self) -> None:
        super().__init__()
        self.processes: list[multiprocessing.process.BaseProcess] = []

    # The stubs declare `Process` a class; a method that returns the class's instance is what
    # the executor calls (`mp_context.Process(target=..., args=...)`).
    def Process(  # type: ignore[override]
        self, *args: Any, **kwargs: Any
    ) -> multiprocessing.context.SpawnProcess:
        process = multiprocessing.context.SpawnProcess(*args, **kwargs)
        self.processes.append(process)
        return process


@dataclass(frozen=True)
class ParseJob:
    """One fetched body to parse, with what the parser needs to know about it."""

    source_id: str
    body: bytes
    base_url: str
    content_type: str | None
    now: datetime
    window_from: datetime | None  # the recovery cap: older items are outside the window
    method: str = "rss"  # the Source's collectionMethod: which parser reads the body
    spec: ExtractionSpec | None = None  # html/json: the Source's selectors or paths


@dataclass(frozen=True)
class ParseOutcome:
    """A parsed feed, or why not: `error_class` set for a refused body, `crashed` for a bug."""

    parsed: ParsedFeed | None = None
    error_class: str | None = None
    message: str = ""
    crashed: bool = False


def parse_job(job: ParseJob) -> ParseOutcome:
    """`parse_body` with its failures as values (exceptions need not survive pickling)."""
    try:
        parsed = parse_body(
            job.source_id,
            job.body,
            method=job.method,
            spec=job.spec,
            base_url=job.base_url,
            content_type=job.content_type,
            now=job.now,
            window_from=job.window_from,
        )
    except ParseError as exc:
        return ParseOutcome(error_class=exc.error_class, message=exc.message)
    except Exception as exc:  # a parser bug fails one Source; the collector logs it
        return ParseOutcome(error_class=type(exc).__name__, message=str(exc), crashed=True)
    return ParseOutcome(parsed=parsed)


def render_documents(documents: Sequence[SignalDocument]) -> list[str]:
    """Each document's file text (on a worker: the documents are plain values)."""
    return [document.render() for document in documents]


def default_worker_count(workers: int | None) -> int:
    """`workers` (`RADAR_PARSE_WORKERS`) if set (1: parse in-process), else one worker per
    core, at most MAX_WORKERS (so 1 on a single core)."""
    if workers is not None:
        return workers
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


class ParseWorkers:
    """A pool of parse processes for one collection (a context manager; `close` joins them).

    With `count` below 2 nothing is ever started and every job is parsed in-process.
    `close_timeout_s`: how long `close` waits for the workers before it kills them.
    """

    def __init__(self, count: int, close_timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        self.count = count
        self.close_timeout_s = close_timeout_s
        self._pool: ProcessPoolExecutor | None = None
        self._starting = threading.Lock()  # fetch threads may start the pool at once
        self._context: _RecordingSpawnContext | None = None
        # A worker died: the pool refuses all work from then on (`renew_if_broken`).
        self._broken = False

    def __enter__(self) -> ParseWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def warm_up(self) -> None:
        """Start the processes now, so they boot while the fetch stage waits on publishers.
        Idempotent and thread-safe (a fetch thread may call it as bodies arrive)."""
        with self._starting:
            if self.count < 2 or self._pool is not None:
                return
            self._context = _RecordingSpawnContext()
            pool = ProcessPoolExecutor(max_workers=self.count, mp_context=self._context)
            for _ in range(self.count):
                pool.submit(os.getpid)
            self._pool = pool
        log.debug("parse workers started: %d", self.count)

    def submit(self, job: ParseJob) -> Future[ParseOutcome] | None:
        """Start parsing `job` on the running workers now (the fetch stage hands over each
        body as it arrives, so parsing overlaps the fetches still in flight); None when no
        pool runs or it refuses work, and `parse_all` then parses the job. Thread-safe."""
        pool = self._pool
        if pool is None:
            return None
        try:
            return pool.submit(parse_job, job)
        except RuntimeError as exc:  # a broken or closed pool: parse_all parses it
            self._note(exc)
            return None

    def parse_all(
        self, jobs: Sequence[ParseJob], started: Mapping[int, Future[ParseOutcome]] | None = None
    ) -> list[ParseOutcome]:
        """Every job's outcome, in order; on the workers when there are enough jobs.

        `started`: jobs (by index) already submitted with `submit`; their futures are awaited,
        never parsed a second time."""
        started = started or {}
        if self.count < 2 or len(jobs) < MIN_PARALLEL_BODIES:
            return [self._outcome(started.get(i), job) for i, job in enumerate(jobs)]
        self.warm_up()
        assert self._pool is not None
        # Largest bodies first, so the workers finish together rather than one waiting on
        # the last big feed.
        order = sorted(
            (i for i in range(len(jobs)) if i not in started), key=lambda i: -len(jobs[i].body)
        )
        futures: dict[int, Future[ParseOutcome]] = dict(started)
        try:
            for i in order:
                futures[i] = self._pool.submit(parse_job, jobs[i])
        except RuntimeError as exc:  # a broken pool refuses work: parse the rest here
            self._note(exc)
            log.warning("parse workers unavailable (%r); parsing in-process", exc)
        return [self._outcome(futures.get(i), job) for i, job in enumerate(jobs)]

    def render_all(self, documents: Sequence[SignalDocument]) -> list[Callable[[], str]]:
        """Each document's text as a call that returns it, in order.

        On the running workers (the pool the parse stage started), in chunks submitted at once:
        a call waits for its chunk, so the file writes begin with the first chunk while the
        others are still rendered. Without a running pool, or for fewer than two chunks, a call
        renders its document where it is called (the writer threads, as before)."""
        pool = self._pool
        if pool is None or len(documents) < 2 * RENDER_CHUNK:
            return [document.render for document in documents]
        calls: list[Callable[[], str]] = []
        for start in range(0, len(documents), RENDER_CHUNK):
            chunk = documents[start : start + RENDER_CHUNK]
            try:
                future: Future[list[str]] | None = pool.submit(render_documents, chunk)
            except RuntimeError:  # a broken pool refuses work: render here
                future = None
            calls.extend(_RenderedText(future, k, doc) for k, doc in enumerate(chunk))
        return calls

    def renew_if_broken(self) -> None:
        """Shut down a pool a dead worker broke, so the next `warm_up` starts a new one: the
        slices a step checks after a worker died parse on every core again, not in-process.
        Call it where no job is in flight (a Collector does, before each slice's plan)."""
        if self._broken:
            log.warning("a parse worker died; starting a new pool for the next bodies")
            self.close()
            self._broken = False

    def _note(self, exc: BaseException) -> None:
        if isinstance(exc, BrokenProcessPool):
            self._broken = True

    @property
    def processes(self) -> tuple[multiprocessing.process.BaseProcess, ...]:
        """The worker processes the pool has started so far (none before `warm_up`)."""
        return tuple(self._context.processes) if self._context is not None else ()

    def close(self) -> None:
        """Shut the pool down and join its workers. A worker still there `close_timeout_s`
        after the shutdown began is killed: one that did not exit on the pool's SIGTERM, or
        still busy with a job nobody will read. Also when closing is interrupted."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        failed: list[BaseException] = []

        def shut_down() -> None:
            try:
                pool.shutdown(wait=True, cancel_futures=True)
            except BaseException as exc:  # raised again below, in the closing thread
                failed.append(exc)

        stopping = threading.Thread(target=shut_down, name="radar-parse-close", daemon=True)
        stopping.start()
        try:
            stopping.join(self.close_timeout_s)
        finally:  # an interrupted close leaves no worker for the interpreter's exit to wait on
            if stopping.is_alive():
                self._kill_workers()
        stopping.join(self.close_timeout_s)
        self._context = None
        if stopping.is_alive():  # a killed process ends once the kernel lets it
            log.error(
                "the parse pool has not shut down %.0f s after its workers were killed",
                self.close_timeout_s,
            )
        if failed:
            raise failed[0]

    def _kill_workers(self) -> None:
        stuck = [worker for worker in self.processes if worker.is_alive()]
        log.warning(
            "parse workers %s still running %.0f s after closing began; killing them",
            [worker.pid for worker in stuck],
            self.close_timeout_s,
        )
        for worker in stuck:
            worker.kill()

    def _outcome(self, future: Future[ParseOutcome] | None, job: ParseJob) -> ParseOutcome:
        if future is None:
            return parse_job(job)
        try:
            return future.result()
        except Exception as exc:  # a worker died: this body is parsed here instead
            self._note(exc)
            log.warning("parse worker failed on %s (%r); parsing in-process", job.source_id, exc)
            return parse_job(job)


@dataclass(frozen=True)
class _RenderedText:
    """One document's text from its chunk's render job, or rendered here if the job failed."""

    future: Future[list[str]] | None
    index: int
    document: SignalDocument

    def __call__(self) -> str:
        if self.future is not None:
            try:
                return self.future.result()[self.index]
            except Exception as exc:  # a worker died: this chunk is rendered here instead
                if self.index == 0:  # once per chunk
                    log.warning("render worker failed (%r); rendering in-process", exc)
        return self.document.render()
