"""Jobs: `Collect_signals` materializes Signals for a set of Source partitions."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, SIGNALS_KEY
from radar_pipeline.defs.partitions import sources_partitions

collect_job = dg.define_asset_job(
    COLLECT_JOB_NAME,
    # The checks run in their own run after the collection (defs/collection/checks.py).
    selection=dg.AssetSelection.assets(SIGNALS_KEY).without_checks(),
    partitions_def=sources_partitions,
    executor_def=dg.in_process_executor,
    description=(
        "The collection: checks the Sources of its partitions (one partition, or a contiguous "
        "range in one run): fetch, parse, dedupe, write the Signals and commit. A Source that "
        "passed is a materialized partition, one that failed a failed partition."
    ),
)
