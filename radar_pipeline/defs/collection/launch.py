"""Launching a collection from a command: the run of `Collect_signals` in this process (one
for every Source it checks, planning no partition; a follow-up run per block of Sources that
newly failed, restate.py), then the `signal_checks` run that judges what they left.

The launcher takes the `Definitions` it runs (the CLI passes `radar_pipeline.definitions.defs`),
so nothing here imports the module that assembles them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.collection import CollectionReport, Counts
from radar_pipeline.core.errors import CollectionError
from radar_pipeline.core.plan.collection import (
    CollectionSpec,
    Mode,
    new_partition_order,
    preview_collection,
)
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.collections import report_for
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs import tags as run_tags
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, collect_run_config
from radar_pipeline.defs.collection.failures import run_failure_line
from radar_pipeline.defs.collection.jobs import SIGNAL_CHECKS_JOB_NAME, checks_run_config
from radar_pipeline.defs.collection.restate import restate_runs, restatement_of
from radar_pipeline.defs.partitions import sync_partitions
from radar_pipeline.defs.resources import settings_run_config, with_resources

# The runs' own log stays in the Dagster event log (the UI shows it, stack traces included); the
# terminal gets the report, and a run that could not collect becomes one CollectionError line.
# A failing Source is an expected outcome the report names, not a traceback on stderr.
QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def launch_collection(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    settings: Settings,
    mode: Mode,
    source_ids: tuple[str, ...],
    as_of: datetime,
    trigger: str,
) -> CollectionReport:
    """Run `Collect_signals` over the Sources this collection checks, then its checks.

    One run checks every Source the collection checks (N Sources fetched concurrently cost one
    run) and plans no partition: planning a partition costs an event per Source before the run
    starts, and an unchanged check needs none (partition_events.py decides what each partition
    gets). The Sources to check are foreseen with the planner's own rule (as the schedule
    does); those foreseen as skipped (in backoff, say) ride in its config to be reported. When
    Sources failed whose partitions did not read failed yet, a follow-up run per contiguous
    block of them plans and re-states them (restate.py), so their partitions read failed.
    Each run gets the command's `settings` as its `radar` resource's config (the Launchpad and
    the run's page show them; the run reads no environment for them). Returns the
    collection's report, recorded in DuckDB, also when the run failed because Sources failed
    (their partitions are then failed)."""
    paths = settings.paths
    snapshot = load_registry(paths.vault)
    valid = new_partition_order(snapshot)
    unknown = [s for s in source_ids if s not in valid]
    if unknown:
        raise CollectionError(
            f"no valid Source with id {', '.join(map(repr, unknown))}; see `radar sources validate`"
        )
    keys = sync_partitions(instance, valid)
    if not keys:
        return _empty_report(as_of, mode)
    store = Store.of(paths)
    states = read_states(store)
    spec = CollectionSpec("preview", mode, as_of, source_ids, trigger, partition_order=tuple(keys))
    preview = preview_collection(spec, snapshot, states)
    launch = uuid.uuid4().hex
    sources = list(dict.fromkeys([*preview.checked, *preview.skipped]))
    tags = {
        run_tags.TRIGGER: trigger,
        run_tags.MODE: mode,
        run_tags.LAUNCH: launch,
        run_tags.EVIDENCE_CHECKS: run_tags.EVIDENCE_CHECKS_BY_LAUNCHER,
    }
    # The run of `Collect_signals` that checks the collection's Sources, planning none of their
    # partitions (the Sources are in its config).
    config = collect_run_config(mode, sources, as_of, trigger, launch)
    run = _execute(defs, instance, settings, COLLECT_JOB_NAME, config, tags)
    report = _recorded_report(store, run)
    last = run.run_id
    restatement = restatement_of(instance, run.run_id)
    for follow_up in restate_runs(run.run_id, run.dagster_run.tags, restatement, keys):
        # A follow-up run plans a block of newly failed Sources and fails naming them.
        config, tags = follow_up.run_config, follow_up.tags
        last = _execute(defs, instance, settings, COLLECT_JOB_NAME, config, tags).run_id
    return report.model_copy(
        update={
            "dagster_run_status": "SUCCESS" if run.success else "FAILURE",
            "dagster_run_id": run.run_id,
            "dagster_run_ids": (run.run_id,),
            "evidence_checks": _run_evidence_checks(defs, instance, settings, last, as_of),
        }
    )


def _recorded_report(store: Store, result: dg.ExecuteInProcessResult) -> CollectionReport:
    """The report a run's commit recorded. A run in which Sources failed is a failed run, but
    its commit recorded the report, which says which Sources failed (the CLI exits 2). Only a
    run that recorded no report (it failed before its commit) is an error of the collection."""
    report = report_for(store, result.run_id)
    if report is None:
        if not result.success:
            raise CollectionError(f"Dagster run {result.run_id} failed: {run_failure_line(result)}")
        raise CollectionError(f"run {result.run_id} finished without recording a report")
    if not result.success and not report.failed:
        raise CollectionError(f"Dagster run {result.run_id} failed: {run_failure_line(result)}")
    return report


def _execute(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    settings: Settings,
    job_name: str,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
) -> dg.ExecuteInProcessResult:
    """One run of the launch in this process, with the command's settings and a quiet console."""
    config = with_resources(run_config, settings_run_config(settings)) | QUIET_LOGGERS
    return defs.resolve_job_def(job_name).execute_in_process(
        run_config=config, instance=instance, tags=tags, raise_on_error=False
    )


def _run_evidence_checks(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    settings: Settings,
    run_id: str,
    as_of: datetime,
) -> dict[str, bool]:
    """The `signal_checks` run after a collection; each check's verdict by name."""
    config = checks_run_config(format_utc(as_of))
    tags = {run_tags.AFTER_RUN: run_id, run_tags.TRIGGER: "cli"}
    result = _execute(defs, instance, settings, SIGNAL_CHECKS_JOB_NAME, config, tags)
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def _empty_report(as_of: datetime, mode: str) -> CollectionReport:
    """A command that found no Source to collect: no run, so no ids, scopes or checks."""
    return CollectionReport.counted(
        Counts(), as_of=format_utc(as_of), mode=mode, downtime_from=None, overdue=0, due=0
    )
