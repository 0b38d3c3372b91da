"""Dagster's own floor: the least any collection run through Dagster can cost.

What `radar collect` pays before it does any work of its own, with no work at all: a fresh
Python process imports dagster, loads a `Definitions` with one trivial asset, opens the
instance in DAGSTER_HOME (SQLite, as the laptop profile) and records one run of the asset's
job in process, as `radar collect` runs its job (`resolve_job_def(...).execute_in_process`).
The harness gives each run an empty DAGSTER_HOME but for a `dagster.yaml` that turns
telemetry off, as Radar's does.

    DAGSTER_HOME=DIR python -m benchmarks.floor

Prints one JSON line: {"runId", "success"}.
"""

from __future__ import annotations

import json
import sys

import dagster as dg

FLOOR_JOB = "floor"
# Radar's runs log to the console at WARNING (launch.QUIET_LOGGERS); so does the floor's.
QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dg.asset
def trivial() -> dg.MaterializeResult[None]:
    """Nothing: materializing it costs only what Dagster costs."""
    return dg.MaterializeResult()


defs = dg.Definitions(assets=[trivial], jobs=[dg.define_asset_job(FLOOR_JOB, selection=[trivial])])


def main() -> int:
    result = defs.resolve_job_def(FLOOR_JOB).execute_in_process(
        run_config=QUIET_LOGGERS, instance=dg.DagsterInstance.get(), raise_on_error=False
    )
    sys.stdout.write(json.dumps({"runId": result.run_id, "success": result.success}) + "\n")
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
