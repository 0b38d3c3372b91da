"""Assembles the Dagster definitions: each area's own (defs/<area>/definitions.py), the
resources they all share (the settings and the clock) and the one executor; nothing else
lives here.

The clock is the one the code location is loaded with: RADAR_AS_OF (a daemon under a
simulated time) else the real time; a run's config may set its own (`clock_run_config`)."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.core.config import clock_from_env
from radar_pipeline.defs.cleanup import definitions as cleanup
from radar_pipeline.defs.collection import definitions as collection
from radar_pipeline.defs.evidence import definitions as evidence
from radar_pipeline.defs.history import definitions as history
from radar_pipeline.defs.registry import definitions as registry
from radar_pipeline.defs.resources import ClockResource, RadarResource

defs = dg.Definitions.merge(
    registry.defs,
    collection.defs,
    cleanup.defs,
    evidence.defs,
    history.defs,
    # Every job runs in process: a subprocess per op costs seconds a run and buys nothing
    # here (docs/architecture.md, "The defs/ layout").
    dg.Definitions(
        resources={"radar": RadarResource(), "clock": ClockResource(as_of=clock_from_env())},
        executor=dg.in_process_executor,
    ),
)
