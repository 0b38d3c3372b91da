"""The job of the daily prune of the run history: one op, `prune_runs`, and its config."""

from datetime import datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.history.prune import prune_run_history
from radar_pipeline.defs.resources import ClockResource, RadarResource

PRUNE_JOB_NAME = "prune_run_history"
PRUNE_OP = "prune_runs"


class PruneConfig(dg.Config):
    """The prune's clock (empty: the `clock` resource's) and how many days it keeps (-1: the
    `radar` resource's `RADAR_RUN_RETENTION_DAYS`, default 30)."""

    as_of: str = ""
    keep_days: int = -1


def prune_run_config(as_of: datetime | None) -> dict[str, object]:
    return {"ops": {PRUNE_OP: {"config": {"as_of": format_utc(as_of) if as_of else ""}}}}


@dg.op(name=PRUNE_OP)
def prune_run_history_op(
    context: dg.OpExecutionContext,
    config: PruneConfig,
    radar: RadarResource,
    clock: ClockResource,
) -> None:
    """Delete the Dagster runs (and their event logs) older than the retention, except those
    a partition, a check or an open dead letter still needs (core/run_history.py)."""
    as_of = parse_utc(config.as_of) if config.as_of else clock.now()
    settings = radar.settings()
    keep = config.keep_days if config.keep_days >= 0 else settings.run_retention_days
    result = prune_run_history(context.instance, Store.of(settings.paths), keep, as_of)
    context.log.info(f"run history pruned: {result.summary().json_object()}")


@dg.job(
    name=PRUNE_JOB_NAME,
    description=(
        "Keeps the run history bounded: deletes the Dagster runs older than "
        "RADAR_RUN_RETENTION_DAYS (default 30) that no partition, check or open dead letter "
        "still needs."
    ),
)
def prune_run_history_job() -> None:
    """Keeps the run history bounded: runs older than RADAR_RUN_RETENTION_DAYS go."""
    prune_run_history_op()
