"""What a collection run is told: its typed run config, and the one place its path is spelled.

A run of `signals` carries a `CollectConfig` on its `fetch` op. Launchers build the run config
with `collect_run_config`; sensors read a finished run's with `config_of`, and which of its
Sources failed with `failed_sources_of` (a run whose commit recorded failed Sources fails its
last step with `FAILED_SOURCES` in the failure's metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.jsontypes import JsonObject
from radar_pipeline.core.plan.collection import Mode

SIGNALS_KEY = dg.AssetKey("signals")
# Capitalized on purpose: the launch dialog of an asset's page (Materialize) launches the first
# of the asset's job names in sorted order, and Dagster's implicit `__ASSET_JOB` sorts before
# every lowercase name. This name sorts before it, so a backfill picked on the asset's page runs
# the collection job, as one from Jobs > Collect_signals does (docs/operations.md, "Backfills
# from the UI").
COLLECT_JOB_NAME = "Collect_signals"
PLAN_OP = "plan"  # the op of the `signals` graph that reads the config
# Where runs recorded before the collection was sliced hold it (their first op was `fetch`).
EARLIER_CONFIG_OPS = ("fetch",)
# Metadata key of the step failure raised after a commit that recorded failed Sources.
FAILED_SOURCES = "failed_sources"


class CollectConfig(dg.Config):
    """How a run collects. Runs launched from the UI check exactly their partitions."""

    mode: Literal["due", "all", "explicit"] = "explicit"
    # The Sources the run concerns, when not exactly its partitions: a launcher narrows a
    # range to a selection, and adds Sources it expects to be skipped (in backoff, say), which
    # need no partition of their own to be reported.
    sources: list[str] = Field(default_factory=list)
    as_of: str = ""  # ISO-8601; empty means now
    trigger: str = "dagster"
    # Set by a launcher that splits one collection into several runs (defs/collection/launch).
    launch: str = ""

    def clock(self) -> datetime:
        return as_of_or_now(self.as_of)


def collect_run_config(
    mode: Mode, sources: list[str], as_of: datetime | None, trigger: str, launch: str = ""
) -> JsonObject:
    """The run config of a collection run (the graph asset's op path spelled once, here)."""
    config = {
        "mode": mode,
        "sources": sources,
        "as_of": format_utc(as_of) if as_of else "",
        "trigger": trigger,
    }
    if launch:  # only a launcher that splits a collection into several runs sets it
        config["launch"] = launch
    return {"ops": {SIGNALS_KEY.path[-1]: {"ops": {PLAN_OP: {"config": config}}}}}


def config_of(run_config: Mapping[str, Any] | None) -> CollectConfig | None:
    """The collect config of a finished run, or None for a run of something else."""
    try:
        ops = (run_config or {})["ops"][SIGNALS_KEY.path[-1]]["ops"]
        op = next(name for name in (PLAN_OP, *EARLIER_CONFIG_OPS) if name in ops)
        return CollectConfig(**ops[op]["config"])
    except (KeyError, TypeError, ValueError, StopIteration):
        return None


def failed_sources_of(instance: dg.DagsterInstance, run_id: str) -> list[str] | None:
    """The Sources a failed run's commit recorded as failed (their dead letters, health and
    DuckDB rows exist), or None when the run failed otherwise (it died, or an op raised before
    the commit): only then does the run itself need a dead letter per Source."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = entry.dagster_event
        user = event.step_failure_data.user_failure_data if event is not None else None
        if user is not None and FAILED_SOURCES in user.metadata:
            value = user.metadata[FAILED_SOURCES].value
            return [s for s in str(value).split(",") if s]
    return None
