"""What the sensors that follow runs read: the runs that ended in a status since their cursor,
and the one line a tick then reads.

Why not `@dg.run_status_sensor`: on a tick in which no run reached its status, Dagster's
wrapper (dagster 1.13.27, run_status_sensor_definition.py) yields nothing before our function
is called, and the daemon records "Sensor function returned an empty result"; no parameter of
the decorator changes that. So these sensors are plain `@dg.sensor`s over the public API the
decorator reads itself, `DagsterInstance.fetch_run_status_changes` after a storage id kept in
the cursor, and every tick ends in run requests or one skip reason saying what it saw.

Kept from the decorator: the first tick starts from the latest status change (the run history
is not replayed); a run is followed only when it was launched from the sensor's own code
location and repository (an in-process run, `radar collect`'s, is not: its launcher follows
it); the cursor moves past every run read. Unlike it, a tick handles every run read (up to
`WATCH_LIMIT`), not the first one that needs something.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import dagster as dg

from radar_pipeline.core.clock import format_utc

# Status changes read per tick (the decorator's default fetch limit); the rest wait a tick.
WATCH_LIMIT = 25

_EVENT_OF: dict[
    dg.DagsterRunStatus,
    Literal[dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE],
] = {
    dg.DagsterRunStatus.SUCCESS: dg.DagsterEventType.RUN_SUCCESS,
    dg.DagsterRunStatus.FAILURE: dg.DagsterEventType.RUN_FAILURE,
}
_VERB = {dg.DagsterRunStatus.SUCCESS: "succeeded", dg.DagsterRunStatus.FAILURE: "failed"}


@dataclass(frozen=True)
class EndedRun:
    """A run that reached the watched status, with the message of that event (for a failure:
    the error Dagster recorded)."""

    run: dg.DagsterRun
    message: str


@dataclass(frozen=True)
class RunWatch:
    """One tick's reading of the run history."""

    status: dg.DagsterRunStatus
    ended: tuple[EndedRun, ...]  # the runs to handle, in the order they ended
    not_followed: tuple[str, ...]  # why each other run read is not handled
    after: int  # the storage id of the last status change read
    since: str  # when that change happened (the first tick: when watching began), UTC
    first: bool  # the first tick: nothing was read, watching starts now
    more: bool  # more changes wait beyond WATCH_LIMIT

    @property
    def cursor(self) -> str:
        """The cursor the tick leaves: where the next tick reads on."""
        return watch_cursor(self.after, self.since)


def watch_cursor(after: int, since: str) -> str:
    """A sensor's cursor: the storage id of the last status change read and its time."""
    return json.dumps({"after": after, "since": since}, sort_keys=True)


def _position(cursor: str | None) -> tuple[int, str] | None:
    """Where the last tick stopped; None on a first tick. A cursor in the format of Dagster's
    run status sensors (`record_id`), left under the same sensor name, names the same storage
    id and is read on."""
    try:
        value = json.loads(cursor) if cursor else None
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    after = value.get("after", value.get("record_id"))
    since = value.get("since", value.get("record_timestamp")) or "the last tick"
    return (after, str(since)) if isinstance(after, int) else None


def runs_ended(context: dg.SensorEvaluationContext, status: dg.DagsterRunStatus) -> RunWatch:
    """The runs that reached `status` since the cursor; on the first tick none: the cursor is
    set to the latest such change, as Dagster's run status sensors do."""
    event_type = _EVENT_OF[status]
    position = _position(context.cursor)
    if position is None:
        latest = context.instance.fetch_run_status_changes(event_type, limit=1).records
        after = latest[0].storage_id if latest else -1
        now = format_utc(datetime.now(UTC))
        return RunWatch(status, (), (), after, now, first=True, more=False)
    after, since = position
    result = context.instance.fetch_run_status_changes(
        dg.RunStatusChangeRecordsFilter(event_type=event_type, after_storage_id=after),
        limit=WATCH_LIMIT,
        ascending=True,
    )
    if not result.records:
        return RunWatch(status, (), (), after, since, first=False, more=False)
    run_ids = list({record.run_id for record in result.records})
    runs = {
        r.dagster_run.run_id: r.dagster_run
        for r in context.instance.get_run_records(dg.RunsFilter(run_ids=run_ids))
    }
    ended: list[EndedRun] = []
    not_followed: list[str] = []
    for record in result.records:
        run = runs.get(record.run_id)
        if run is None:
            not_followed.append(f"run {record.run_id} is no longer in the run history")
        elif not _launched_here(context, run):
            where = (
                f"code location {origin.repository_origin.code_location_origin.location_name}"
                if (origin := run.remote_job_origin)
                else "process (its launcher follows it)"
            )
            not_followed.append(f"run {run.run_id} of {run.job_name} ran in another {where}")
        else:
            event = record.event_log_entry.dagster_event
            ended.append(EndedRun(run, (event.message if event else None) or ""))
    last = result.records[-1]
    when = format_utc(datetime.fromtimestamp(last.timestamp, UTC))
    return RunWatch(
        status, tuple(ended), tuple(not_followed), last.storage_id, when, False, result.has_more
    )


def _launched_here(context: dg.SensorEvaluationContext, run: dg.DagsterRun) -> bool:
    """The decorator's rule: the run's code location and repository are the sensor's (both
    unknown counts as the same: a sensor evaluated outside the daemon, on in-process runs)."""
    origin = run.remote_job_origin
    location = origin.repository_origin.code_location_origin.location_name if origin else None
    repository = origin.repository_origin.repository_name if origin else None
    sensor_location = context.code_location_origin
    here = sensor_location.location_name if sensor_location else None
    return (location, repository) == (here, context.repository_name)


def tick_result(
    context: dg.SensorEvaluationContext, watch: RunWatch, outcomes: Sequence[dg.RunRequest | str]
) -> dg.SensorResult:
    """The tick: the run requests, each other run's line in the log; without a request, one
    skip reason naming every run read (or that none ended since `watch.since`)."""
    verb = _VERB[watch.status]
    requests = [o for o in outcomes if isinstance(o, dg.RunRequest)]
    notes = [*watch.not_followed, *(o for o in outcomes if isinstance(o, str))]
    if watch.more:
        notes.append(f"more runs {verb} after these: the next tick reads them")
    if requests:
        for note in notes:
            context.log.info(note)
        return dg.SensorResult(run_requests=requests, cursor=watch.cursor)
    read = len(watch.ended) + len(watch.not_followed)
    if watch.first:
        reason = (
            f"first tick: following runs that {verb} from now ({watch.since}); "
            "earlier runs are not replayed"
        )
    elif not read:
        reason = f"no run {verb} since {watch.since}"
    else:
        reason = f"{read} run(s) {verb}: " + "; ".join(notes)
    return dg.SensorResult(skip_reason=reason, cursor=watch.cursor)
