"""The jobs of collection, and the run config each is launched with.

- `Collect_signals`: materializes Signals for a set of Source partitions.
- `signal_checks`: every evidence check a collection can change, after each collection (the
  Signals folder read incrementally).
- `signal_audit`: the checks that read the Signals folder, with a stat of every file, daily:
  what finds a Signal rewritten in place, which the incremental read cannot see.
- `source_cadence_check`: the `on_cadence` check alone, when some Source's verdict flipped.

Every job runs on the one executor the Definitions set (radar_pipeline/definitions.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

from radar_pipeline.defs.cleanup.checks import retention_check
from radar_pipeline.defs.collection.checks import (
    FOLDER_CHECKS,
    ON_CADENCE_CHECK,
    SIGNAL_CHECK_SPECS,
    signal_evidence,
)
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, SIGNALS_KEY
from radar_pipeline.defs.partitions import sources_partitions
from radar_pipeline.defs.registry.checks import registry_check
from radar_pipeline.defs.resources import clock_run_config

SIGNAL_CHECKS_JOB_NAME = "signal_checks"
SIGNAL_AUDIT_JOB_NAME = "signal_audit"
CADENCE_CHECK_JOB_NAME = "source_cadence_check"

# Every evidence check, after every collection: those on `signals`, the registry's (a
# collection reads it) and `retention` (a collection may write full text to Temporary Content).
# Three steps: the eight on `signals` are one op (`signal_evidence`); the other two are their
# areas' own (docs/architecture.md, "The evidence checks").
EVIDENCE_CHECKS_AFTER_COLLECTION = (
    *(spec.key for spec in SIGNAL_CHECK_SPECS),
    *registry_check.check_keys,
    *retention_check.check_keys,
)
EVIDENCE_KEYS_AFTER_COLLECTION = frozenset(EVIDENCE_CHECKS_AFTER_COLLECTION)
# The op of the checks on `signals`, and so of those that read the Signals folder.
SIGNAL_EVIDENCE_OP = signal_evidence.node_def.name
FOLDER_CHECK_OPS = (SIGNAL_EVIDENCE_OP,)
RETENTION_OP = retention_check.node_def.name

collect_job = dg.define_asset_job(
    COLLECT_JOB_NAME,
    # The checks run in their own run after the collection (`signal_checks_job`).
    selection=dg.AssetSelection.assets(SIGNALS_KEY).without_checks(),
    partitions_def=sources_partitions,
    description=(
        "The collection: checks the Sources of its partitions (one partition, or a contiguous "
        "range in one run): fetch, parse, dedupe, write the Signals and commit. A Source that "
        "passed is a materialized partition, one that failed a failed partition."
    ),
)

signal_checks_job = dg.define_asset_job(
    SIGNAL_CHECKS_JOB_NAME,
    selection=dg.AssetSelection.checks(*EVIDENCE_CHECKS_AFTER_COLLECTION),
    description=(
        "The evidence checks after a collection: every check on `signals`, the registry's and "
        "`retention`, at the collection's clock, so none reads 'Not evaluated' and `radar "
        "report` agrees."
    ),
)

signal_audit_job = dg.define_asset_job(
    SIGNAL_AUDIT_JOB_NAME,
    # Only what an in-place edit can hide from the incremental read: the folder's checks,
    # with their default, the full read.
    selection=dg.AssetSelection.checks(*FOLDER_CHECKS),
    description=(
        "The evidence checks on `signals` with a stat of every Signal file: finds what the "
        "incremental checks after a collection cannot (a file rewritten in place)."
    ),
)

cadence_check_job = dg.define_asset_job(
    CADENCE_CHECK_JOB_NAME,
    selection=dg.AssetSelection.checks(ON_CADENCE_CHECK),
    description=(
        "The `on_cadence` check alone: which Sources are late on their cadence. Requested by "
        "`source_freshness_sensor` when some Source's verdict flipped."
    ),
)


def checks_run_config(
    as_of: str, checks: Iterable[dg.AssetCheckKey] = EVIDENCE_KEYS_AFTER_COLLECTION
) -> dict[str, object]:
    """The checks job's run config after a collection, for the checks it runs: `overdue` and
    `on_cadence` judged at the collection's clock, which is also the run's `clock` (the other
    checks' time); the Signals folder read incrementally (by the checks on `signals` and by
    `retention`). Config only for the ops in the run."""
    wanted = set(checks)
    ops: dict[str, object] = {}
    if {spec.key for spec in SIGNAL_CHECK_SPECS} & wanted:
        ops[SIGNAL_EVIDENCE_OP] = {"config": {"as_of": as_of, "full": False}}
    if set(retention_check.check_keys) & wanted:
        ops[RETENTION_OP] = {"config": {"full": False}}
    return {"ops": ops, **clock_run_config(as_of)}


def cadence_run_config(as_of: str) -> dict[str, object]:
    """The check-only run's config: the sensor's tick clock, so the run judges (and a prune
    dates it) by the clock it was requested at, as the collection runs are."""
    return {"ops": {SIGNAL_EVIDENCE_OP: {"config": {"as_of": as_of}}}, **clock_run_config(as_of)}
