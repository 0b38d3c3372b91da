"""Jobs: `collect_signals` materializes Signals for a set of Source partitions."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.partitions import sources_partitions

COLLECT_JOB_NAME = "collect_signals"

collect_job = dg.define_asset_job(
    COLLECT_JOB_NAME,
    # Checks run in their own run after the collection (see defs/checks.py).
    selection=dg.AssetSelection.assets("signals").without_checks(),
    partitions_def=sources_partitions,
    executor_def=dg.in_process_executor,
)
