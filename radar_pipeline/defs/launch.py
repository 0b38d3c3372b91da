"""Launching a collection through the Dagster definitions: one range run, in this process."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import dagster as dg
from sqlalchemy import event
from sqlalchemy.engine import Engine

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.collector import report_for
from radar_pipeline.core.collect.headstart import HeadStart, planned_events_as_subset
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import RadarError
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.jobs import COLLECT_JOB_NAME
from radar_pipeline.defs.partitions import sync_partitions


class CollectionFailed(RadarError):
    stage = "collect"


def launch_collection(
    instance: dg.DagsterInstance,
    paths: RadarPaths,
    mode: str,
    source_ids: tuple[str, ...],
    as_of: datetime,
    trigger: str,
    head: HeadStart | None = None,
) -> dict[str, Any]:
    """Run `collect_signals` over the selected Sources' partitions as ONE run (a partition
    range plus the exact selection in config), so N Sources cost one Dagster run and are
    fetched concurrently; returns the collection report recorded in DuckDB.

    With `head` (core/headstart.py) the run gets its id and selects from its registry
    snapshot, so its fetch op takes over what was already planned and fetched."""
    with sqlite_event_sessions():
        return _launch(instance, paths, mode, source_ids, as_of, trigger, head)


def _launch(
    instance: dg.DagsterInstance,
    paths: RadarPaths,
    mode: str,
    source_ids: tuple[str, ...],
    as_of: datetime,
    trigger: str,
    head: HeadStart | None,
) -> dict[str, Any]:
    from radar_pipeline.definitions import defs

    snapshot = head.snapshot if head is not None else load_registry(paths.vault)
    valid = [r.source.id for r in snapshot.sources]
    unknown = [s for s in source_ids if s not in valid]
    if unknown:
        raise CollectionFailed(
            f"no valid Source with id {', '.join(map(repr, unknown))}; see `radar sources validate`"
        )
    keys = sync_partitions(instance, valid)
    selected = list(source_ids) or keys
    if not selected:
        return _empty_report(as_of, mode)
    positions = sorted(keys.index(s) for s in selected)
    config = {"mode": mode, "sources": selected, "as_of": format_utc(as_of), "trigger": trigger}
    run_config = {
        "ops": {"signals": {"ops": {"fetch": {"config": config}}}},
        "loggers": {"console": {"config": {"log_level": "WARNING"}}},
    }
    tags = {
        "dagster/asset_partition_range_start": keys[positions[0]],
        "dagster/asset_partition_range_end": keys[positions[-1]],
        "radar/trigger": trigger,
        "radar/mode": mode,
    }
    job = defs.resolve_job_def(COLLECT_JOB_NAME)
    with planned_events_as_subset():
        result = job.execute_in_process(
            run_config=run_config,
            instance=instance,
            tags=tags,
            raise_on_error=False,
            run_id=head.run_id if head is not None else None,
        )
    if not result.success:
        failures = [
            str(e.event_specific_data.error.message).strip().splitlines()[-1]  # type: ignore[union-attr]
            for e in result.all_events
            if e.is_step_failure and e.event_specific_data is not None
        ]
        raise CollectionFailed(
            f"Dagster run {result.run_id} failed: {'; '.join(failures) or 'see the Dagster UI'}"
        )
    report = report_for(Store(paths.db), result.run_id)
    if report is None:
        raise CollectionFailed(f"run {result.run_id} finished without recording a report")
    report["dagsterRunId"] = result.run_id
    # The run evaluated the `signals` checks itself after its commit (defs/checks.py).
    report["checks"] = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    return report


@contextmanager
def sqlite_event_sessions() -> Iterator[None]:
    """While a CLI collection runs, make Dagster's SQLite event writes cheap but still safe.

    Dagster's SQLite storage opens, commits and closes a connection per event (two for an asset
    event: run shard and asset index). Its files are in WAL mode, so each close of the last
    connection checkpoints the WAL into the database (fsyncs) and deletes it, and each commit
    fsyncs the WAL: about 45 ms per event on a busy disk, 150 events for 50 Sources. Here one idle
    connection per file stays open until the collection ends (so no close is the last one and
    the WAL is checkpointed once, at the end) and connections use `synchronous=NORMAL`, which in
    WAL mode stays consistent after a crash; a power loss may drop the newest events of this
    run, never corrupt the file. Only SQLite engines opened in this process meanwhile are
    affected; DuckDB does not use SQLAlchemy.
    """
    keepers: dict[str, sqlite3.Connection] = {}
    lock = threading.Lock()

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if not isinstance(dbapi_connection, sqlite3.Connection):
            return
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")
        row = dbapi_connection.execute("PRAGMA database_list").fetchone()
        path = str(row[2]) if row and row[2] else ""
        with lock:
            if path and path not in keepers:
                keeper = sqlite3.connect(path, check_same_thread=False)
                # A read opens the WAL for this connection: from now on it counts as open.
                keeper.execute("PRAGMA schema_version").fetchone()
                keepers[path] = keeper

    event.listen(Engine, "connect", on_connect)
    try:
        with _ENGINE_REUSE.active():
            yield
    finally:
        event.remove(Engine, "connect", on_connect)
        with lock:
            for con in keepers.values():
                con.close()
            keepers.clear()


class _EngineReuse:
    """Dagster's SQLite event log builds a SQLAlchemy engine and a new connection for every
    event (two for an asset event) and disposes of them after it: half of its cost per event.
    While at least one CLI collection of this process runs, each event-log file gets one engine
    whose single connection is reused; each use holds that file's own lock (two storages of one
    DAGSTER_HOME share it) and runs in its own committed transaction, exactly as before. The
    class patch is installed by the first user and removed, with every engine, by the last, so
    nested or concurrent collections cannot leave it behind. Without the expected Dagster
    internals (a Dagster upgrade), nothing changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._engines: dict[str, tuple[Engine, threading.Lock]] = {}
        self._storage_class: Any = None
        self._original: Any = None

    @contextmanager
    def active(self) -> Iterator[None]:
        with self._lock:
            installed = self._users > 0 or self._install()
            if installed:
                self._users += 1
        try:
            yield
        finally:
            if installed:
                with self._lock:
                    self._users -= 1
                    if self._users == 0:
                        self._uninstall()

    def _install(self) -> bool:
        try:
            from dagster._core.storage.event_log.sqlite import sqlite_event_log as sel
            from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS as timeout
            from sqlalchemy import create_engine
            from sqlalchemy.pool import StaticPool

            storage_class: Any = sel.SqliteEventLogStorage
            original = storage_class.__dict__["_connect"]
        except (ImportError, AttributeError, KeyError):
            return False
        reuse = self

        @contextmanager
        def connect(storage: Any, shard: str) -> Iterator[Any]:
            conn_string = storage.conn_string_for_shard(shard)
            with reuse._lock:
                entry = reuse._engines.get(conn_string)
                if entry is None:
                    engine = create_engine(
                        conn_string,
                        poolclass=StaticPool,
                        connect_args={"timeout": timeout, "check_same_thread": False},
                    )
                    entry = reuse._engines[conn_string] = (engine, threading.Lock())
            engine, file_lock = entry
            with storage._db_lock, file_lock:
                if shard not in storage._initialized_dbs:
                    storage._initdb(engine)
                    storage._initialized_dbs.add(shard)
                with engine.connect() as conn, conn.begin():
                    yield conn

        self._storage_class, self._original = storage_class, original
        storage_class._connect = connect
        return True

    def _uninstall(self) -> None:
        self._storage_class._connect = self._original
        engines, self._engines = list(self._engines.values()), {}
        for engine, _ in engines:
            try:
                engine.dispose()
            except Exception:  # one engine that fails to close must not keep the others open
                continue


_ENGINE_REUSE = _EngineReuse()


def _empty_report(as_of: datetime, mode: str) -> dict[str, Any]:
    counts = dict.fromkeys(("created", "reused", "updated", "duplicates", "rejected"), 0)
    return {
        "asOf": format_utc(as_of),
        "mode": mode,
        "downtimeFrom": None,
        "overdue": 0,
        "due": 0,
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        **counts,
        "sources": [],
    }
