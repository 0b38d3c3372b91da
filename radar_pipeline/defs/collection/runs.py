"""What a collection run covered, read back from its tags and config: which Sources, and
whether it collects at all. The schedule asks it of the runs in flight, the run failure sensor
of a run that died."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from radar_pipeline.defs import tags
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, SIGNALS_KEY, config_of


def run_sources(
    run_tags: Mapping[str, str], run_config: Mapping[str, Any], partitions: Sequence[str]
) -> list[str]:
    """The Sources a run covered: its partition, or its partition range (in partition order)
    narrowed to the selection in its config; keys that are not Source partitions are ignored
    (a run of another asset). A launcher's config may also name Sources it expected to skip
    (in backoff), outside the range: they are not the run's to check, so not counted here.
    A collection run that plans no partition (`radar collect`, the schedule) covers the
    Sources of its config (those it checks and those it expected to skip)."""
    config = config_of(run_config)
    selected = config.sources if config is not None else []
    if run_tags.get(tags.PARTITION):
        keys = [run_tags[tags.PARTITION]]
    elif (
        run_tags.get(tags.RANGE_START) in partitions and run_tags.get(tags.RANGE_END) in partitions
    ):
        start = partitions.index(run_tags[tags.RANGE_START])
        end = partitions.index(run_tags[tags.RANGE_END])
        keys = list(partitions[start : end + 1])
    elif tags.RANGE_START not in run_tags:
        keys = list(selected)
    else:
        keys = []
    if selected:
        keys = [k for k in keys if k in set(selected)]
    return [k for k in keys if k in set(partitions)]


def collects_signals(job_name: str, asset_selection: Iterable[dg.AssetKey] | None) -> bool:
    """A run that collects Signals: the `Collect_signals` job, or an asset job (UI
    materialization, backfill) that selects `signals` itself. Check-only runs (the `on_cadence`
    and evidence checks) carry a Source partition too but collect nothing."""
    return job_name == COLLECT_JOB_NAME or SIGNALS_KEY in set(asset_selection or ())
