"""How the schedules and sensors start, how often the sensors tick and which clock they
read: said once.

Every schedule and sensor starts RUNNING when a Dagster instance first sees it, unless
`RADAR_AUTOMATION=stopped` (`make ui-paused`): then each starts STOPPED, and a person starts
the ones wanted under Automation. Dagster reads a definition's default status only while the
instance holds no state of its own for it: a schedule or sensor once started or stopped in the
UI (or with `dagster schedule start|stop`) keeps that state whatever the variable says.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import dagster as dg

from radar_pipeline.core.clock import as_of_or_now
from radar_pipeline.core.config import Settings

# The sensors that watch the vault, the store and the run history look once a minute.
TICK_SECONDS = 60
# The run status sensors that request the checks after a collection look every 30 s: the
# checks judge the vault within that interval of a collection's end (docs/operations.md).
CHECKS_AFTER_TICK_SECONDS = 30


def schedule_status() -> dg.DefaultScheduleStatus:
    """The default status of every schedule: RUNNING unless `RADAR_AUTOMATION=stopped`."""
    running = Settings.from_env().automation_running
    return dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED


def sensor_status() -> dg.DefaultSensorStatus:
    """The default status of every sensor: RUNNING unless `RADAR_AUTOMATION=stopped`."""
    running = Settings.from_env().automation_running
    return dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED


def evaluation_time(environ: Mapping[str, str] | None = None) -> datetime:
    """The sensors' clock: `RADAR_AS_OF` (ISO-8601; simulations and tests), else now (UTC).

    The same variable is passed on to the runs a sensor requests, so the run decides with the
    clock the sensor decided with (as `radar collect --as-of` does for one command).
    """
    return as_of_or_now(Settings.from_env(environ).as_of_text)
