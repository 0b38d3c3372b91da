"""Every run tag the shell reads or writes, spelled once.

Dagster's own tags (`dagster/...`) are Dagster's contract: the queue orders runs by
`dagster/priority`, a run of one partition carries `dagster/partition`, a run of a contiguous
block of partitions carries the two range tags (the only public way to launch one run over
many dynamic partitions from a schedule). Ours (`radar/...`) say who launched a run and why;
sensors and the checks read them back.
"""

from __future__ import annotations

PARTITION = "dagster/partition"
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
RUN_KEY = "dagster/run_key"
PRIORITY = "dagster/priority"
# The data version of an asset event (as `ObserveResult` writes it), on an observation a
# sensor records.
DATA_VERSION = "dagster/data_version"

# Who launched the run: `cli`, `schedule`, `freshness`, ...
TRIGGER = "radar/trigger"
# The collection mode of a collection run (`due`, `all`, `explicit`).
MODE = "radar/mode"
# The runs of one launch (one command, or one tick of the schedule) share this id: the
# checks follow the launch, not each of its runs.
LAUNCH = "radar/launch"
# The clock a schedule tick decided with (ISO-8601): which slot each of its Sources was in.
TICK = "radar/tick"
# A follow-up run that re-states a collection's failed Sources names that collection run
# (defs/collection/restate.py).
RESTATES = "radar/restates"
# A `signal_checks` run names the collection run it follows.
AFTER_RUN = "radar/after_run"
# A collection run whose launcher runs the evidence checks itself (the CLI) carries this tag...
EVIDENCE_CHECKS = "radar/checks"
# ...with this value.
EVIDENCE_CHECKS_BY_LAUNCHER = "by-launcher"
# What a check-only `on_cadence` run is about (how many Sources late, how many changed).
VERDICT = "radar/verdict"

# The queue runs higher priorities first. Every collection run ranks 0 or above (by its most
# urgent Source); the evidence check runs rank below every collection, so a burst's
# collections are never queued behind its evidence checks.
EVIDENCE_CHECKS_PRIORITY = -1


def partition_range(first: str, last: str) -> dict[str, str]:
    """The tags of one run over the contiguous partitions `first`..`last` (in partition
    order; a reversed range would silently materialize nothing)."""
    return {RANGE_START: first, RANGE_END: last}
