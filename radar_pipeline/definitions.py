"""Assembles the Dagster definitions: each area's own (defs/<area>/definitions.py), the
resource they all share and the one executor; nothing else lives here."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.cleanup import definitions as cleanup
from radar_pipeline.defs.collection import definitions as collection
from radar_pipeline.defs.evidence import definitions as evidence
from radar_pipeline.defs.history import definitions as history
from radar_pipeline.defs.registry import definitions as registry
from radar_pipeline.defs.resources import RadarResource

defs = dg.Definitions.merge(
    registry.defs,
    collection.defs,
    cleanup.defs,
    evidence.defs,
    history.defs,
    # Every job runs in process: a subprocess per op costs seconds a run and buys nothing
    # here (docs/architecture.md, "The defs/ layout").
    dg.Definitions(resources={"radar": RadarResource()}, executor=dg.in_process_executor),
)
