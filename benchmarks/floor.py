"""Dagster's own floor: the least any collection run through Dagster can cost.

What `radar collect` pays before it does any work of its own, with no work at all: a fresh
Python process imports dagster, loads a `Definitions` with one trivial asset, opens the
instance in DAGSTER_HOME (SQLite, as the laptop profile) and records one run of the asset's
job in process, as `radar collect` runs its job (`resolve_job_def(...).execute_in_process`).
The harness gives each run an empty DAGSTER_HOME but for a `dagster.yaml` that turns
telemetry off, as Radar's does.

With `N` (the floor of a cold collection of N Sources): the trivial asset is partitioned over
N dynamic partitions named as Radar's (`sources`), added to the instance in the same process
(as `radar collect` adds a new vault's Sources), and the run covers them all as one range
(the `dagster/asset_partition_range_*` tags, a single-run backfill policy), so Dagster records
a planned event and a materialization per partition, as it does for Radar's `signals`.

    DAGSTER_HOME=DIR python -m benchmarks.floor [N]

Prints one JSON line: {"runId", "success", "partitions", "materialized"}.
"""

from __future__ import annotations

import json
import sys
import warnings

import dagster as dg

# Radar's `signals` has the same single-run policy; its beta notice is not the floor's output.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
FLOOR_JOB = "floor"
RANGE_JOB = "floor_range"
# Radar's runs log to the console at WARNING (launch.QUIET_LOGGERS); so does the floor's.
QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
sources = dg.DynamicPartitionsDefinition(name="sources")


@dg.asset
def trivial() -> dg.MaterializeResult[None]:
    """Nothing: materializing it costs only what Dagster costs."""
    return dg.MaterializeResult()


@dg.asset(partitions_def=sources, backfill_policy=dg.BackfillPolicy.single_run())
def trivial_partitioned() -> dg.MaterializeResult[None]:
    """Nothing for each partition of the run's range: one materialization per partition."""
    return dg.MaterializeResult()


defs = dg.Definitions(
    assets=[trivial, trivial_partitioned],
    jobs=[
        dg.define_asset_job(FLOOR_JOB, selection=[trivial]),
        dg.define_asset_job(RANGE_JOB, selection=[trivial_partitioned]),
    ],
)


def main(argv: list[str]) -> int:
    instance = dg.DagsterInstance.get()
    if not argv:
        result = defs.resolve_job_def(FLOOR_JOB).execute_in_process(
            run_config=QUIET_LOGGERS, instance=instance, raise_on_error=False
        )
        keys: list[str] = []
    else:
        keys = [f"bench-{i:03d}" for i in range(int(argv[0]))]
        instance.add_dynamic_partitions(sources.name, keys)
        tags = {
            "dagster/asset_partition_range_start": keys[0],
            "dagster/asset_partition_range_end": keys[-1],
        }
        result = defs.resolve_job_def(RANGE_JOB).execute_in_process(
            run_config=QUIET_LOGGERS, instance=instance, tags=tags, raise_on_error=False
        )
    node = "trivial_partitioned" if keys else "trivial"
    materialized = len(result.asset_materializations_for_node(node))
    sys.stdout.write(
        json.dumps(
            {
                "runId": result.run_id,
                "success": result.success,
                "partitions": len(keys),
                "materialized": materialized,
            }
        )
        + "\n"
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
