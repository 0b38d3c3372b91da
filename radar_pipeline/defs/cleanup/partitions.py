"""The partitions of `weekly_cleanup`: one per week a close was launched for.

A partition is the week (starting Sunday, UTC) in which a close happens, its key that Sunday's
date. The partitions are dynamic (`weeks`): a week becomes a partition when a close of it is
launched (the schedule's Sunday 00:00 tick, or `radar cleanup`), so the asset's partitions
start at the vault's first closed week and every one of them was attempted; a time-window
definition would need its first week at definitions load, which is data (the vault's first
collection) that differs per vault and is not known then, and every week before it would
show as missing. A week the machine was off on Sunday is not a partition at all; the
`retention` check still sees what that week left in Temporary Content.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

WEEKS_PARTITIONS_NAME = "weeks"

weekly_partitions = dg.DynamicPartitionsDefinition(name=WEEKS_PARTITIONS_NAME)


def week_of(as_of: datetime) -> str:
    """The week partition key (its Sunday, `YYYY-MM-DD`, UTC) of the week containing `as_of`."""
    day = as_of.astimezone(UTC).date()
    return (day - timedelta(days=(day.weekday() + 1) % 7)).isoformat()


def add_week(instance: dg.DagsterInstance, week: str) -> None:
    """Make `week` a partition of `weekly_cleanup` (nothing when it is one already)."""
    if not instance.has_dynamic_partition(WEEKS_PARTITIONS_NAME, week):
        instance.add_dynamic_partitions(WEEKS_PARTITIONS_NAME, [week])
