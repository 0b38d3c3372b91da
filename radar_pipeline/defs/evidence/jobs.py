"""The job of the evidence snapshot: `evidence_snapshot` alone."""

import dagster as dg

from radar_pipeline.defs.evidence.assets import evidence_snapshot

evidence_snapshot_job = dg.define_asset_job(
    "evidence_snapshot_job",
    selection=dg.AssetSelection.assets(evidence_snapshot),
    description=(
        "Materializes `evidence_snapshot` (the `radar report` object); requested by "
        "`evidence_after_checks` after each run that evaluated checks."
    ),
)
