"""`python -m radar_pipeline.cli`: the `radar` command."""

from radar_pipeline.cli import run

run()
