"""The run history area wired: the daily prune's job and schedule."""

import dagster as dg

from radar_pipeline.defs.history.jobs import prune_run_history_job
from radar_pipeline.defs.history.schedules import run_history_schedule

defs = dg.Definitions(jobs=[prune_run_history_job], schedules=[run_history_schedule])
