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

from radar_pipeline.core.collect import report_for
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import RadarError
from radar_pipeline.core.registry import load_registry
from radar_pipeline.core.schedule import format_utc
from radar_pipeline.core.store import Store
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
) -> dict[str, Any]:
    """Run `collect_signals` over the selected Sources' partitions as ONE run (a partition
    range plus the exact selection in config), so N Sources cost one Dagster run and are
    fetched concurrently; returns the collection report recorded in DuckDB."""
    with sqlite_event_sessions():
        return _launch(instance, paths, mode, source_ids, as_of, trigger)


def _launch(
    instance: dg.DagsterInstance,
    paths: RadarPaths,
    mode: str,
    source_ids: tuple[str, ...],
    as_of: datetime,
    trigger: str,
) -> dict[str, Any]:
    from radar_pipeline.definitions import defs

    snapshot = load_registry(paths.vault)
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
    result = job.execute_in_process(
        run_config=run_config, instance=instance, tags=tags, raise_on_error=False
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
        with _reused_event_log_engines():
            yield
    finally:
        event.remove(Engine, "connect", on_connect)
        with lock:
            for con in keepers.values():
                con.close()
            keepers.clear()


@contextmanager
def _reused_event_log_engines() -> Iterator[None]:
    """Dagster's SQLite event log builds a SQLAlchemy engine and a new connection for every
    event (two for an asset event) and disposes of them after it: half of its cost per event.
    Meanwhile, each shard (run, index) gets one engine whose single connection is reused; uses
    stay serialised by the storage's own lock, each in its own committed transaction, exactly as
    before. Everything is closed on exit. Without the expected Dagster internals, nothing
    changes."""
    try:
        from dagster._core.storage.event_log.sqlite import sqlite_event_log as sel
        from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS as timeout
        from sqlalchemy import create_engine
        from sqlalchemy.pool import StaticPool

        storage_class: Any = sel.SqliteEventLogStorage
        original = storage_class.__dict__["_connect"]
    except (ImportError, AttributeError, KeyError):
        yield
        return
    engines: dict[tuple[int, str], Engine] = {}

    @contextmanager
    def connect(self: Any, shard: str) -> Iterator[Any]:
        with self._db_lock:
            engine = engines.get((id(self), shard))
            if engine is None:
                engine = create_engine(
                    self.conn_string_for_shard(shard),
                    poolclass=StaticPool,
                    connect_args={"timeout": timeout, "check_same_thread": False},
                )
                engines[(id(self), shard)] = engine
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    storage_class._connect = connect
    try:
        yield
    finally:
        storage_class._connect = original
        for engine in engines.values():
            engine.dispose()


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
