"""A `radar collect`'s head start: plan and fetch while Dagster is still being imported.

Importing Dagster and our definitions costs the command about 1.5 s of one core, and the first
thing its run then does is plan (registry, DuckDB state, Source locks) and fetch, which mostly
waits on publishers while the parse workers (core/parallel.py) sit idle. So the command starts
that work first, on one thread, for the run id it will give its Dagster run; the run's `fetch`
op takes the outcome over instead of planning again (defs/assets.py).

Nothing else changes. The same Collector code plans and fetches; each Source's lock is taken
before its request; attempts are recorded under the run's id; nothing is committed before the
run's own materialize step; fetched bodies go to the parse workers as they arrive. The run's
log says the fetch happened during start-up. A command that fails before its run takes the
head start over (Dagster cannot start, the run config is refused) calls `abandon`: it waits for
the thread and releases its locks, so the fetches stay recorded as attempts of a collection
that never committed, as for a run that failed after its fetch step.

Daemon and UI runs never have a head start: their process imported Dagster long before.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec, Mode
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry

Fetched = tuple[CollectionPlan, tuple[FetchResult | None, ...]]

# Dagster's switch for one planned event per run (`planned_events_as_subset`). The command
# sets it, and DAGSTER_HOME, before the head start's thread exists: a setenv while that thread
# is inside getaddrinfo or OpenSSL (C code reading the environment without the GIL) is not
# thread-safe in glibc.
SUBSET_PLANNED_EVENTS = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"


@contextmanager
def planned_events_as_subset() -> Iterator[None]:
    """While an in-process collection run is created, let Dagster record its planned Source
    partitions as one event carrying the run's partition subset instead of one event each
    (Dagster 1.13 reads `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS` in `EventLogStorage.
    supports_partition_subset_in_asset_materialization_planned_events` when it creates a run):
    200 Sources cost 200 event writes, ~0.5 s, on the way to the run's first op. What is lost
    (Dagster derives both from per-partition planned events): the UI's per-partition "in progress"
    marker while a CLI run is going (seconds), and its "failed" marker when such a run fails
    as a whole (a step error, not a failed Source, which is an observation either way). The
    command reports that failure itself; with the daemon up, the run failure sensor records a
    dead letter per Source as before."""
    before = os.environ.get(SUBSET_PLANNED_EVENTS)
    if before == "true":  # set already, for the whole of a `radar collect`
        yield
        return
    os.environ[SUBSET_PLANNED_EVENTS] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SUBSET_PLANNED_EVENTS, None)
        else:
            os.environ[SUBSET_PLANNED_EVENTS] = before


@dataclass(frozen=True)
class HeadStart:
    """One command's early plan and fetch, waiting for its run to take it over."""

    run_id: str  # the id the command gives its Dagster run (Dagster's own format: a uuid4)
    paths: RadarPaths
    spec: CollectionSpec  # source_ids sorted
    snapshot: RegistrySnapshot  # the registry the plan used; the launch selects from it too
    future: Future[Fetched]

    def matches(self, spec: CollectionSpec, paths: RadarPaths) -> bool:
        """Whether `spec` (what the run's op asks for) is what was planned and fetched."""
        ordered = replace(spec, source_ids=tuple(sorted(spec.source_ids)))
        return ordered == self.spec and paths == self.paths

    def result(self) -> Fetched:
        """The plan and fetch results (waits; re-raises what the thread raised)."""
        return self.future.result()


_pending: dict[str, HeadStart] = {}
_pending_lock = threading.Lock()


def begin(
    paths: RadarPaths, mode: Mode, source_ids: tuple[str, ...], as_of: datetime
) -> HeadStart | None:
    """Start planning and fetching the collection the command will launch, on a thread.

    Returns None (nothing started) where the launch would not run at all: no valid Source
    selected, or an explicit id that is not a valid Source (the launch then says so).
    """
    snapshot = load_registry(paths.vault)
    valid = [r.source.id for r in snapshot.sources]
    if any(s not in valid for s in source_ids):
        return None
    selected = tuple(sorted(set(source_ids) or valid))
    if not selected:
        return None
    run_id = str(uuid.uuid4())
    spec = CollectionSpec(
        collection_id=run_id,
        mode=mode,
        # The run reads as_of back from its config, where it has whole seconds.
        as_of=parse_utc(format_utc(as_of)),
        source_ids=selected,
        trigger="cli",
        dagster_run_id=run_id,
    )
    future: Future[Fetched] = Future()
    head = HeadStart(run_id, paths, spec, snapshot, future)

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            collector = Collector(paths)
            plan = collector.plan(spec, snapshot)
            future.set_result((plan, collector.fetch(plan)))
        except BaseException as exc:  # handed to the run's fetch op, which fails with it
            future.set_exception(exc)

    with _pending_lock:
        _pending[run_id] = head
    threading.Thread(target=work, name="radar-head-start", daemon=True).start()
    return head


def take(run_id: str) -> HeadStart | None:
    """The head start made for this run, once (the run's fetch op calls this)."""
    with _pending_lock:
        return _pending.pop(run_id, None)


def abandon(head: HeadStart) -> None:
    """Give up a head start no run took over: wait for its thread, release its locks."""
    take(head.run_id)
    try:
        head.future.exception()  # waits; what it raised is not this caller's failure
    finally:
        LockBook.release_all(head.run_id)
