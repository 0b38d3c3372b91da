"""Launching a collection from a command: one run of `collect_signals` in this process, then
the `signal_checks` run that judges what it left.

The launcher takes the `Definitions` it runs (the CLI passes `radar_pipeline.definitions.defs`),
so nothing here imports the module that assembles them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import CollectionError
from radar_pipeline.core.plan.collection import Mode
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.collections import COUNT_KEYS, report_for
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.collection.checks import (
    AFTER_RUN_TAG,
    CHECKS_BY_LAUNCHER,
    CHECKS_TAG,
    SIGNAL_CHECKS_JOB_NAME,
    checks_run_config,
)
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, collect_run_config
from radar_pipeline.defs.partitions import sync_partitions

QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def launch_collection(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    paths: RadarPaths,
    mode: Mode,
    source_ids: tuple[str, ...],
    as_of: datetime,
    trigger: str,
) -> dict[str, Any]:
    """Run `collect_signals` over the selected Sources' partitions as ONE run (a partition
    range plus the exact selection in config), so N Sources cost one Dagster run and are
    fetched concurrently; then its checks. Returns the report recorded in DuckDB, also when
    the run failed because some Sources failed (their partitions are then failed)."""
    valid = [r.source.id for r in load_registry(paths.vault).sources]
    unknown = [s for s in source_ids if s not in valid]
    if unknown:
        raise CollectionError(
            f"no valid Source with id {', '.join(map(repr, unknown))}; see `radar sources validate`"
        )
    keys = sync_partitions(instance, valid)
    selected = list(source_ids) or keys
    if not selected:
        return _empty_report(as_of, mode)
    positions = sorted(keys.index(s) for s in selected)
    tags = {
        "dagster/asset_partition_range_start": keys[positions[0]],
        "dagster/asset_partition_range_end": keys[positions[-1]],
        "radar/trigger": trigger,
        "radar/mode": mode,
        CHECKS_TAG: CHECKS_BY_LAUNCHER,
    }
    result = defs.resolve_job_def(COLLECT_JOB_NAME).execute_in_process(
        run_config=collect_run_config(mode, selected, as_of, trigger) | QUIET_LOGGERS,
        instance=instance,
        tags=tags,
        raise_on_error=False,
    )
    # A run in which Sources failed is a failed run, but its commit recorded the report: the
    # report says which Sources failed (the CLI exits 2). Only a run that recorded no report
    # (it failed before its commit) is an error of the collection itself.
    report = report_for(Store(paths.db), result.run_id)
    if report is None:
        if not result.success:
            raise CollectionError(f"Dagster run {result.run_id} failed: {_step_failures(result)}")
        raise CollectionError(f"run {result.run_id} finished without recording a report")
    if not result.success and not report["failed"]:
        raise CollectionError(f"Dagster run {result.run_id} failed: {_step_failures(result)}")
    report["dagsterRunStatus"] = "SUCCESS" if result.success else "FAILURE"
    report["dagsterRunId"] = result.run_id
    report["checks"] = _run_checks(defs, instance, result.run_id, as_of)
    return report


def _run_checks(
    defs: dg.Definitions, instance: dg.DagsterInstance, run_id: str, as_of: datetime
) -> dict[str, bool]:
    """The `signal_checks` run after a collection; each check's verdict by name."""
    result = defs.resolve_job_def(SIGNAL_CHECKS_JOB_NAME).execute_in_process(
        run_config=checks_run_config(format_utc(as_of)) | QUIET_LOGGERS,
        instance=instance,
        tags={AFTER_RUN_TAG: run_id, "radar/trigger": "cli"},
        raise_on_error=False,
    )
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def _step_failures(result: dg.ExecuteInProcessResult) -> str:
    failures = [
        str(e.event_specific_data.error.message).strip().splitlines()[-1]  # type: ignore[union-attr]
        for e in result.all_events
        if e.is_step_failure and e.event_specific_data is not None
    ]
    return "; ".join(failures) or "see the Dagster UI"


def _empty_report(as_of: datetime, mode: str) -> dict[str, Any]:
    return {
        "asOf": format_utc(as_of),
        "mode": mode,
        "downtimeFrom": None,
        "overdue": 0,
        "due": 0,
        "passed": 0,
        "failed": 0,
        "skipped": 0,
        **dict.fromkeys(COUNT_KEYS, 0),
        "sources": [],
    }
