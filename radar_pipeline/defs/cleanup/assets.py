"""The weekly close of Temporary Content: a weekly-partitioned asset (its partitions, the
weeks a close was launched for, are in partitions.py)."""

import dagster as dg

from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.store.closes import record_close
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault.cleanup import close_temporary_content
from radar_pipeline.defs.cleanup.partitions import weekly_partitions
from radar_pipeline.defs.resources import RadarResource


class CleanupConfig(dg.Config):
    """The clock of the close; empty means now (scheduled runs)."""

    as_of: str = ""


@dg.asset(partitions_def=weekly_partitions, group_name="cleanup")
def weekly_cleanup(
    context: dg.AssetExecutionContext, config: CleanupConfig, radar: RadarResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The weekly close of Temporary Content: every file under `Radar/Temporary Content/` is
    deleted (links as links, never followed), nothing else is touched, and the close is
    recorded in DuckDB `cleanup_runs` with files and bytes deleted and files retained (0).
    Refuses, deleting nothing, if the folder is a link or resolves outside the vault."""
    paths = radar.paths()
    closed_at = as_of_or_now(config.as_of)
    result = close_temporary_content(paths.vault)
    record = record_close(Store.of(paths), result, closed_at, context.partition_key)
    for refused in result.refused:
        context.log.warning(f"kept in Temporary Content: {refused}")
    kept = "\n".join(f"| `{r}` |" for r in result.refused) or "| – |"
    return dg.MaterializeResult(
        metadata={
            "deleted": result.deleted,
            "bytes": result.bytes,
            "retained": result.retained,
            "closed_at": format_utc(closed_at),
            "cleanup_id": record.cleanup_id,
            "kept": dg.MetadataValue.md(f"| entry kept, and why |\n|---|\n{kept}"),
            "refused": dg.MetadataValue.json(list(result.refused)),
        }
    )
