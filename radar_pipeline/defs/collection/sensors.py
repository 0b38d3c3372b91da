"""The sensors of collection: what follows a collection run, and the check of the cadence.

- `run_failure_dead_letter_sensor`: a run that died leaves a dead letter per Source it covered.
- `signal_checks_after_collection` / `signal_checks_after_failed_collection`: the evidence
  checks after every collection run that changed what they judge. `radar collect` runs the
  `signal_checks` job itself right after its collection (and tags its run so); for every other
  collection run (schedule, backfill, UI) these sensors request it: after a successful run,
  after a run that failed only because some of its Sources failed (its commit went
  through, so the vault and DuckDB changed), and after any run that carried checks it did not
  evaluate (a launch from the asset's page: Dagster records them SKIPPED or EXECUTION_FAILED),
  so each check's newest execution is an evaluation. A run that died before its commit and
  carried no check changed nothing to judge. The runs of one launch (one tick of the
  schedule: a run per block of due Sources) share a `radar/launch` tag and are followed by
  one checks run, requested when the last of them ends; check runs queue behind every
  collection (`dagster/priority`, defs/tags.py).
  These three read the runs that ended through defs/run_watch.py: plain sensors, so that
  every tick, idle or not, says what it saw.
- `failed_partitions_sensor`: after a scheduled collection in which Sources newly failed,
  the follow-up runs that make their partitions read failed (restate.py).
- `source_freshness_sensor`: one `on_cadence` run when some Source became late or on time
  again (cadence.py).

Due Sources are requested by `due_sources_schedule` (schedules.py), which reads the same
clock (the `clock` resource) as the sensors here.
"""

import hashlib
import json

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.jsontypes import JsonObject
from radar_pipeline.core.store.dead_letters import record_run_failure
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import (
    CHECKS_AFTER_TICK_SECONDS,
    TICK_SECONDS,
    sensor_status,
)
from radar_pipeline.defs.collection.cadence import is_late, source_timings_now
from radar_pipeline.defs.collection.config import (
    SIGNALS_KEY,
    CollectConfig,
    config_of,
    failed_sources_of,
)
from radar_pipeline.defs.collection.jobs import (
    EVIDENCE_KEYS_AFTER_COLLECTION,
    cadence_check_job,
    cadence_run_config,
    checks_run_config,
    collect_job,
    signal_checks_job,
)
from radar_pipeline.defs.collection.restate import restate_runs, restatement_of
from radar_pipeline.defs.collection.runs import collects_signals, run_sources
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import ClockResource, RadarResource
from radar_pipeline.defs.run_watch import EndedRun, runs_ended, tick_result

# ---- after a run that died -----------------------------------------------------------------
# Plain sensors over the runs that ended (defs/run_watch.py says why not `run_status_sensor`).


@dg.sensor(
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "After a collection run that failed as a whole (crash, killed process, an error "
        "before its commit): one open dead letter per Source it covered (`radar dlq list`). "
        'Each tick names the failed runs it read and what it did for each (e.g. "1 run(s) '
        'failed: run ... failed as a whole: 2 dead letter(s) for a, b"); an idle tick reads '
        '"no run failed since <time>".'
    ),
)
def run_failure_dead_letter_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource, clock: ClockResource
) -> dg.SensorResult:
    """Every run that failed since the last tick, each handled by `_dead_letters_after`; the
    tick's skip reason says what it did for each (it requests no run)."""
    watch = runs_ended(context, dg.DagsterRunStatus.FAILURE)
    outcomes = [_dead_letters_after(context.instance, radar, clock, e) for e in watch.ended]
    return tick_result(context, watch, outcomes)


def _dead_letters_after(
    instance: dg.DagsterInstance, radar: RadarResource, clock: ClockResource, ended: EndedRun
) -> str:
    """A failed run leaves one open dead letter, stage `dagster-run`, per Source it covered,
    when it failed as a whole (a crash, a killed process, an op error before the commit); the
    next due slot retries those Sources. A run that failed because some of its Sources failed
    adds nothing: its commit already recorded each failure (dead letter, health, DuckDB).
    Returns what it did, in one line."""
    run = ended.run
    if not collects_signals(run.job_name, run.asset_selection):
        return f"run {run.run_id} of {run.job_name} collects no Signals"
    recorded = failed_sources_of(instance, run.run_id)
    if recorded is not None:
        return (
            f"run {run.run_id} failed because Sources failed ({', '.join(recorded)}); "
            "their failures are recorded already"
        )
    partitions = list(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    sources = run_sources(run.tags, run.run_config or {}, partitions)
    if not sources:
        return f"run {run.run_id} failed but covered no Source partition"
    message = ended.message or f"Dagster run {run.run_id} failed"
    added = record_run_failure(radar.store(), run.run_id, sources, message, clock.now())
    return f"run {run.run_id} failed as a whole: {added} dead letter(s) for {', '.join(sources)}"


# ---- a newly failed Source's partition ----------------------------------------------------


@dg.sensor(
    job=collect_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "After a scheduled collection in which Sources newly failed (the run plans no "
        "partition): one run of `Collect_signals` per contiguous block of them that plans "
        "their partitions, checks nothing (they are in their backoff) and fails naming them, "
        "so each reads Failed. Each tick names the failed runs it read and what it did; an "
        'idle tick reads "no run failed since <time>".'
    ),
)
def failed_partitions_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """The follow-up runs (defs/collection/restate.py) of every collection run that failed
    since the last tick asking for them; run keys `restate:<run id>:<first>..<last>`."""
    watch = runs_ended(context, dg.DagsterRunStatus.FAILURE)
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    outcomes: list[dg.RunRequest | str] = []
    for ended in watch.ended:
        run = ended.run
        restatement = restatement_of(context.instance, run.run_id)
        follow_ups = restate_runs(run.run_id, run.tags, restatement, partitions)
        if not follow_ups:
            outcomes.append(f"run {run.run_id} of {run.job_name} names no Source to re-state")
        outcomes += [
            dg.RunRequest(run_key=f.run_key, run_config=f.run_config, tags=f.tags)
            for f in follow_ups
        ]
    return tick_result(context, watch, outcomes)


# ---- the checks after a collection ---------------------------------------------------------


@dg.sensor(
    job=signal_checks_job,
    default_status=sensor_status(),
    minimum_interval_seconds=CHECKS_AFTER_TICK_SECONDS,
    description=(
        "Runs the evidence checks on `signals` after each successful collection run. A tick "
        'that requests none names each run it read and why (e.g. "run ...: its launcher ran '
        'the checks"); an idle tick reads "no run succeeded since <time>".'
    ),
)
def signal_checks_after_collection(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """After a successful collection run whose launcher does not run the checks itself, run
    the evidence checks once for it, at its clock."""
    watch = runs_ended(context, dg.DagsterRunStatus.SUCCESS)
    outcomes = [_checks_after(context.instance, e.run) for e in watch.ended]
    return tick_result(context, watch, outcomes)


@dg.sensor(
    job=signal_checks_job,
    default_status=sensor_status(),
    minimum_interval_seconds=CHECKS_AFTER_TICK_SECONDS,
    description=(
        "Runs the evidence checks on `signals` after a collection run that failed because some "
        "of its Sources failed (the others' Signals were committed), and after any failed run "
        "that carried the checks (a backfill from the asset's page: Dagster records them "
        "'Execution failed'), so each check's newest execution is an evaluation. A tick that "
        'requests none names each run it read and why; an idle tick reads "no run failed '
        'since <time>".'
    ),
)
def signal_checks_after_failed_collection(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """After a collection run that failed only because Sources failed (its commit recorded
    them), or that carried the checks, run the evidence checks once for it (or for its
    launch), at its clock. A run that died before its commit and carried no check changed
    nothing the Checks tab shows."""
    watch = runs_ended(context, dg.DagsterRunStatus.FAILURE)
    outcomes = [_checks_after(context.instance, e.run) for e in watch.ended]
    return tick_result(context, watch, outcomes)


def _checks_after(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.RunRequest | str:
    """The checks after a collection run, once per launch: the runs of one launch (one tick of
    the schedule, split into blocks) are followed by one `signal_checks` run, requested when
    the last of them ends (by end time, then run id, so exactly one of the two sensors asks),
    if any of them committed. A run without a launch (a UI materialization, a backfill) is
    followed on its own (`_follow_alone`). Otherwise the reason it requests nothing."""
    collect = config_of(run.run_config)
    if run.tags.get(tags.EVIDENCE_CHECKS) == tags.EVIDENCE_CHECKS_BY_LAUNCHER:
        return f"run {run.run_id}: its launcher ran the checks"
    launch = run.tags.get(tags.LAUNCH)
    if not launch:
        return _follow_alone(instance, run, collect)
    records = instance.get_run_records(
        dg.RunsFilter(job_name=run.job_name, tags={tags.LAUNCH: launch})
    )
    going = [r.dagster_run.run_id for r in records if not r.dagster_run.is_finished]
    if going:
        return (
            f"run {run.run_id}: {len(going)} more run(s) of launch {launch} still going; "
            "the checks follow the last"
        )
    # A canceled run wakes neither sensor: the last run is the last that ended so.
    ended = [r for r in records if r.dagster_run.status in _SENSED] or records
    last = max(ended, key=lambda r: (r.end_time or 0.0, r.dagster_run.run_id))
    if last.dagster_run.run_id != run.run_id:
        return (
            f"run {run.run_id}: the checks of launch {launch} follow its last run, "
            f"{last.dagster_run.run_id}"
        )
    if not any(_committed(instance, r.dagster_run) for r in records):
        return f"no run of launch {launch} reached its commit"
    return _checks_request(instance, f"checks-after:{launch}", run.run_id, collect)


def _follow_alone(
    instance: dg.DagsterInstance, run: dg.DagsterRun, collect: CollectConfig | None
) -> dg.RunRequest | str:
    """The checks after a run of its own (a UI materialization, a backfill, a replay), or why
    it needs none. Two things make the Checks tab stale after it: its commit (the vault, DuckDB
    and the health keys changed), and the checks the run carried without evaluating them. A
    run launched from the asset's page carries every check of `signals`, and Dagster records
    them SKIPPED when the collection yields no output and EXECUTION_FAILED when the run fails
    (a backfill of a failing Source): that is their newest execution until a run evaluates
    them again. So such a run is followed whatever it did, failed or not, committed or not."""
    collects = (
        collect is not None
        or collects_signals(run.job_name, run.asset_selection)
        or _planned_signals(instance, run.run_id)
    )
    # A check-only run is never followed: one that failed would be followed by another.
    if not collects:
        return f"run {run.run_id} of {run.job_name} collected no Signals"
    if not _checks_left_open(instance, run.run_id) and not _committed(instance, run):
        return f"run {run.run_id} failed before its commit"
    return _checks_request(instance, f"checks-after:{run.run_id}", run.run_id, collect)


def _checks_left_open(instance: dg.DagsterInstance, run_id: str) -> frozenset[dg.AssetCheckKey]:
    """The checks a run planned and did not evaluate (Dagster records them SKIPPED or
    EXECUTION_FAILED when the run ends)."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED)
    planned = frozenset(
        r.dagster_event.asset_check_planned_data.asset_check_key
        for r in records
        if r.dagster_event is not None
    )
    return planned - _evaluated_checks(instance, run_id) if planned else frozenset()


_SENSED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)


def _committed(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """The run's commit went through: it succeeded, or it failed naming its failed Sources."""
    if run.status == dg.DagsterRunStatus.SUCCESS:
        return True
    return failed_sources_of(instance, run.run_id) is not None


def _checks_request(
    instance: dg.DagsterInstance, key: str, run_id: str, collect: CollectConfig | None
) -> dg.RunRequest | str:
    """The checks run after a collection run: those it did not evaluate itself (all of them
    today: the collection job selects no check, and a launch from the asset's page carries
    them but never evaluates them, `_follow_alone`)."""
    missing = EVIDENCE_KEYS_AFTER_COLLECTION - _evaluated_checks(instance, run_id)
    if not missing:
        return f"run {run_id} evaluated every check itself"
    return dg.RunRequest(
        run_key=key,
        run_config=checks_run_config(collect.as_of if collect else "", missing),
        asset_check_keys=sorted(missing, key=lambda k: k.to_user_string()),
        tags={tags.AFTER_RUN: run_id, tags.PRIORITY: str(tags.EVIDENCE_CHECKS_PRIORITY)},
    )


def _evaluated_checks(instance: dg.DagsterInstance, run_id: str) -> frozenset[dg.AssetCheckKey]:
    """The checks a run evaluated."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return frozenset(
        r.dagster_event.asset_check_evaluation_data.asset_check_key
        for r in records
        if r.dagster_event is not None
    )


def _planned_signals(instance: dg.DagsterInstance, run_id: str) -> bool:
    """The run planned (or recorded) a materialization of `signals`."""
    # The asset selection of an ephemeral job's run is not always recorded; its events are.
    kinds = {
        dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        dg.DagsterEventType.ASSET_MATERIALIZATION,
    }
    for record in instance.all_logs(run_id, of_type=kinds):
        if record.dagster_event is not None and record.dagster_event.asset_key == SIGNALS_KEY:
            return True
    return False


# ---- the cadence ---------------------------------------------------------------------------


@dg.sensor(
    job=cadence_check_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "Every minute: runs the `on_cadence` check (job `source_cadence_check`) once when some "
        "Source became late on its cadence or on time again; one run whatever the number. "
        'Otherwise the tick reads "no Source changed its cadence verdict (N Source(s), K '
        'late)".'
    ),
)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource, clock: ClockResource
) -> dg.SensorResult:
    """One check-only `on_cadence` run in a tick in which some Source partition's verdict
    flipped since the last tick (the first tick: when some Source is late), whatever the
    number of Sources that flipped. The run key names the verdicts it is about, so the same
    state never runs twice."""
    now = clock.now()
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    by_id = {t.source_id: t for t in source_timings_now(radar, now)}
    try:
        previous: JsonObject = json.loads(context.cursor) if context.cursor else {}
    except json.JSONDecodeError:
        previous = {}
    current: dict[str, bool] = {}
    for source_id in partitions:
        timing = by_id.get(source_id)
        current[source_id] = timing is not None and is_late(timing, now)
    flipped = [s for s in partitions if previous.get(s, False) != current[s]]
    cursor = json.dumps(current, sort_keys=True)
    late = sum(current.values())
    if not flipped:
        seen = f"{len(partitions)} Source(s), {late} late"
        return dg.SensorResult(
            skip_reason=f"no Source changed its cadence verdict ({seen})", cursor=cursor
        )
    digest = hashlib.sha256(cursor.encode("utf-8")).hexdigest()[:16]
    request = dg.RunRequest(
        run_key=f"on_cadence:{format_utc(now)}:{digest}",
        run_config=cadence_run_config(clock.given()),
        tags={
            tags.TRIGGER: "freshness",
            tags.VERDICT: f"{late} late, {len(flipped)} changed",
            tags.PRIORITY: str(tags.EVIDENCE_CHECKS_PRIORITY),
        },
    )
    return dg.SensorResult(run_requests=[request], cursor=cursor)
