"""How the schedules and sensors start and how often the sensors tick: said once (the clock
they read is the `clock` resource, defs/resources.py).

Every schedule and sensor starts RUNNING when a Dagster instance first sees it, unless
`RADAR_AUTOMATION=stopped` (`make ui-paused`): then each starts STOPPED, and a person starts
the ones wanted under Automation. Dagster reads a definition's default status only while the
instance holds no state of its own for it: a schedule or sensor once started or stopped in the
UI (or with `dagster schedule start|stop`) keeps that state whatever the variable says.
"""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.resources import environment_settings

# The sensors that watch the vault, the store and the run history look once a minute.
TICK_SECONDS = 60
# The run status sensors that request the checks after a collection look every 30 s: the
# checks judge the vault within that interval of a collection's end (docs/operations.md).
CHECKS_AFTER_TICK_SECONDS = 30


def schedule_status() -> dg.DefaultScheduleStatus:
    """The default status of every schedule: RUNNING unless `RADAR_AUTOMATION=stopped` (read
    when the definitions load: a default status is part of the definition, not of a run)."""
    running = environment_settings().automation_running
    return dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED


def sensor_status() -> dg.DefaultSensorStatus:
    """The default status of every sensor: RUNNING unless `RADAR_AUTOMATION=stopped`."""
    running = environment_settings().automation_running
    return dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED
