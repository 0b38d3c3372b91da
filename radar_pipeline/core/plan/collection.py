"""Which Sources one collection checks, and how: gates, cadence, backoff, locks, validators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal

from radar_pipeline.core.clock import parse_cadence
from radar_pipeline.core.errors import PUBLISHER_WAITS
from radar_pipeline.core.models import FetchRequest
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.plan.schedule import (
    coverage_from,
    due_slot,
    is_due,
    is_overdue,
    needs_unconditional,
    next_due_at,
    priority_rank,
)
from radar_pipeline.core.plan.waves import UNPLACED, Placement, partition_order, place
from radar_pipeline.core.registry.sources import RegistrySnapshot, SourceRecord
from radar_pipeline.core.store.feed_state import FeedState

Mode = Literal["due", "all", "explicit"]


@dataclass(frozen=True)
class CollectionSpec:
    """What was asked: `due` (the recovery policy), `all` eligible, or `explicit` Sources."""

    collection_id: str
    mode: Mode
    as_of: datetime
    source_ids: tuple[str, ...] = ()  # explicit: exactly these; otherwise: restrict to these
    trigger: str = "cli"
    dagster_run_id: str | None = None
    # One command's collection may take several runs (one per block of partitions it checks);
    # they share this id, and their reports read as one (CollectionReport.merge in
    # core/contract/collection.py).
    launch_id: str | None = None
    # The `sources` partition keys in their order: it places each Source's due grid in its
    # wave (core/plan/waves). None: every Source on its own sha256 offset.
    partition_order: tuple[str, ...] | None = None
    # The due grids, when the collection placed them already on the whole registry: a slice
    # of a collection plans on its own Sources' records (core/collect/slices.py).
    placement: Placement | None = None
    # The clock of the schedule tick that decided this run (its `radar/tick`), for a run of
    # the collection schedule; None otherwise. The schedule does not ask again for a Source
    # such a run covered in its current attempt (`retry_from`): what `next_attempts` says.
    tick: datetime | None = None


@dataclass(frozen=True)
class SourcePlan:
    """What a collection plans for one Source's check: the request to make, or the reason it
    makes none (skipped; failed before fetching)."""

    source_id: str
    record: SourceRecord | None
    coverage_from: datetime | None = None
    request: FetchRequest | None = None
    skip_reason: str | None = None  # skipped: locked, backoff, rate-limit, not eligible
    failure: tuple[str, str] | None = None  # (error class, message) decided before fetching
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceTiming:
    """Where one eligible, cadence-driven Source stands at `now`: what the sensors act on."""

    source_id: str
    cadence: timedelta
    last_success_at: datetime | None
    backoff_until: datetime | None
    # The end of every wait before its next fetch: its backoff, the publisher's wait
    # (Cache-Control max-age, <ttl>) and `minIntervalSeconds` after its last answer.
    waits_until: datetime | None
    overdue: bool  # its cadence has passed without a success (backoff does not matter)
    due: bool  # overdue and not in backoff: a `due` collection checks it now
    slot: datetime  # the start of its current slot (EPOCH + its grid offset + k * cadence)
    rank: tuple[int, int]  # recovery priority: critical, then primary/discovery, then the rest


@dataclass(frozen=True)
class CollectionPlan:
    spec: CollectionSpec
    source_plans: tuple[SourcePlan, ...]
    overdue: int
    downtime_from: datetime | None
    placement: Placement = UNPLACED  # the due grids it decided with
    # The latest attempt recorded on any Source when that is after this collection's clock
    # (the clock was set back, a backup restored, `--as-of` in the past); else None.
    clock_behind: datetime | None = None


def _cadences(snapshot: RegistrySnapshot) -> dict[str, timedelta]:
    """The Sources the due rule concerns (eligible, with a cadence), by id."""
    out: dict[str, timedelta] = {}
    for rec in snapshot.sources:
        cadence = parse_cadence(rec.source.cadence)
        if rec.source.is_eligible and cadence is not None:
            out[rec.source.id] = cadence
    return out


def place_sources(snapshot: RegistrySnapshot, order: Sequence[str] | None) -> Placement:
    """Each due-driven Source's wave by its position in partition order `order`
    (core/plan/waves.place); None places none (each on its sha256 offset)."""
    return UNPLACED if order is None else place(order, _cadences(snapshot))


def placement_of(spec: CollectionSpec, snapshot: RegistrySnapshot) -> Placement:
    """The due grids `spec`'s collection decides with: those it was given, else placed now."""
    if spec.placement is not None:
        return spec.placement
    return place_sources(snapshot, spec.partition_order)


def new_partition_order(snapshot: RegistrySnapshot) -> list[str]:
    """The valid Source ids in the order new partitions are added (`partition_order`)."""
    return partition_order((r.source.id, parse_cadence(r.source.cadence)) for r in snapshot.sources)


def plan_collection(
    spec: CollectionSpec,
    snapshot: RegistrySnapshot,
    states: Mapping[str, FeedState],
    last_collection_at: datetime | None,
    locks: LockBook,
    tokens: Mapping[str, str] | None = None,
    figures: CollectionFigures | None = None,
) -> CollectionPlan:
    """Decide every Source's check for this collection, in recovery priority order. `tokens`:
    where the variable a Source's `authTokenEnv` names is looked up (`Settings.tokens`).
    `figures`: the report's figures of the whole Radar when the caller read them already (a
    slice's are its collection's, core/collect/outline.py); else read here."""
    env = tokens or {}
    records = _selected_records(spec, snapshot)
    placement = placement_of(spec, snapshot)
    planned: list[SourcePlan] = []
    for rec in _in_priority_order(records):
        one = _plan_one(spec, rec, states.get(rec.source.id), locks, env, placement)
        if one is not None:
            planned.append(one)
    for missing in sorted(set(spec.source_ids) - {r.source.id for r in records}):
        if spec.mode == "explicit":
            planned.append(SourcePlan(missing, None, skip_reason="not a valid Source"))
    if figures is None:
        figures = collection_figures(spec, snapshot, states, last_collection_at)
    return CollectionPlan(
        spec,
        tuple(planned),
        figures.overdue,
        figures.downtime_from,
        placement,
        figures.clock_behind,
    )


@dataclass(frozen=True)
class CollectionFigures:
    """What a collection's report says of the whole Radar, read before any of its commits."""

    overdue: int
    downtime_from: datetime | None
    clock_behind: datetime | None


def collection_figures(
    spec: CollectionSpec,
    snapshot: RegistrySnapshot,
    states: Mapping[str, FeedState],
    last_collection_at: datetime | None,
) -> CollectionFigures:
    """The overdue count, the downtime and a clock set behind the recorded attempts, as a
    collection at `spec.as_of` finds them."""
    now = spec.as_of
    placement = placement_of(spec, snapshot)
    overdue = sum(1 for t in source_timings(snapshot, states, now, placement) if t.overdue)
    downtime_from = _downtime_from(snapshot, states, last_collection_at, now)
    latest = max((s.last_attempt_at for s in states.values() if s.last_attempt_at), default=None)
    behind = latest if latest is not None and latest > now else None
    return CollectionFigures(overdue, downtime_from, behind)


def source_timings(
    snapshot: RegistrySnapshot,
    states: Mapping[str, FeedState],
    now: datetime,
    placement: Placement = UNPLACED,
) -> tuple[SourceTiming, ...]:
    """Every eligible Source with a cadence (`manual` ones never are), in recovery priority
    order: the same due rule `plan_collection` applies in mode `due`, on the grids of
    `placement` (`place_sources` of the partition order the collection decides with)."""
    out: list[SourceTiming] = []
    for rec in snapshot.sources:
        cadence = parse_cadence(rec.source.cadence)
        if not rec.source.is_eligible or cadence is None:
            continue
        state = states.get(rec.source.id)
        last = _last_success(rec, state)
        backoff = state.backoff_until if state else None
        offset = placement.offset(rec.source.id, cadence)
        out.append(
            SourceTiming(
                source_id=rec.source.id,
                cadence=cadence,
                last_success_at=last,
                backoff_until=backoff,
                waits_until=waits_until(rec, state),
                overdue=is_overdue(cadence, last, now),
                due=is_due(
                    rec.source.id,
                    cadence,
                    last,
                    now,
                    backoff,
                    polite_until=state.polite_until if state else None,
                    offset=offset,
                ),
                slot=due_slot(rec.source.id, cadence, now, offset),
                rank=priority_rank(rec.source.priority, rec.source.role),
            )
        )
    return tuple(sorted(out, key=lambda t: (*t.rank, t.source_id)))


def _selected_records(spec: CollectionSpec, snapshot: RegistrySnapshot) -> list[SourceRecord]:
    if spec.mode == "explicit":
        return [r for r in snapshot.sources if r.source.id in spec.source_ids]
    wanted = set(spec.source_ids)
    return [r for r in snapshot.sources if not wanted or r.source.id in wanted]


def _last_success(rec: SourceRecord, state: FeedState | None) -> datetime | None:
    # DuckDB is the authority; the Source file's mirror covers a lost database file.
    return state.last_success_at if state and state.last_success_at else rec.source.last_success_at


@dataclass(frozen=True)
class CollectionPreview:
    """Which selected Sources a collection would check (fetch, or fail before fetching) and
    which it would skip, decided before any lock is taken: what a launcher needs to give each
    run only the partitions it will check."""

    checked: tuple[str, ...]  # in recovery priority order
    skipped: tuple[str, ...]
    placement: Placement = UNPLACED  # the due grids it decided with
    # Every Source the collection concerns (checked or skipped), in the order its plan lists
    # them: recovery priority, then the names an explicit collection gave that are no Source.
    concerned: tuple[str, ...] = ()


def preview_collection(
    spec: CollectionSpec,
    snapshot: RegistrySnapshot,
    states: Mapping[str, FeedState],
) -> CollectionPreview:
    """`plan_collection`'s decisions without the locks (a Source another process holds when
    the run plans is skipped then, not here). No token is looked up: a Source whose token is
    missing fails before fetching, and is checked either way."""
    env: Mapping[str, str] = {}
    placement = placement_of(spec, snapshot)
    checked: list[str] = []
    skipped: list[str] = []
    concerned: list[str] = []
    for rec in _in_priority_order(_selected_records(spec, snapshot)):
        check = _decide(spec, rec, states.get(rec.source.id), env, placement)
        if check is not None:
            (skipped if check.skip_reason is not None else checked).append(check.source_id)
            concerned.append(check.source_id)
    if spec.mode == "explicit":
        missing = sorted(set(spec.source_ids) - {*checked, *skipped})
        skipped += missing
        concerned += missing
    return CollectionPreview(tuple(checked), tuple(skipped), placement, tuple(concerned))


def _in_priority_order(records: list[SourceRecord]) -> list[SourceRecord]:
    return sorted(
        records, key=lambda r: (*priority_rank(r.source.priority, r.source.role), r.source.id)
    )


def _plan_one(
    spec: CollectionSpec,
    rec: SourceRecord,
    state: FeedState | None,
    locks: LockBook,
    env: Mapping[str, str],
    placement: Placement,
) -> SourcePlan | None:
    """One Source's plan, or None when this collection does not concern it; a check to make
    holds the Source's lock (else it is skipped as locked)."""
    planned = _decide(spec, rec, state, env, placement)
    if planned is None or planned.skip_reason is not None:
        return planned
    if not locks.try_acquire(spec.collection_id, planned.source_id):
        return SourcePlan(planned.source_id, rec, skip_reason="locked")
    return planned


def _decide(
    spec: CollectionSpec,
    rec: SourceRecord,
    state: FeedState | None,
    env: Mapping[str, str],
    placement: Placement,
) -> SourcePlan | None:
    """One Source's check before its lock: None (not concerned), skipped with a reason, failed
    before fetching, or a request to make."""
    src, now = rec.source, spec.as_of
    sid = src.id
    if not src.is_eligible:
        if spec.mode != "explicit":
            return None
        return SourcePlan(sid, rec, skip_reason=_ineligible_reason(rec))
    last_success = _last_success(rec, state)
    if spec.mode == "due" and not _due_now(rec, last_success, now, placement):
        return None
    wait = _wait_reason(spec, rec, state)
    if wait is not None:
        return SourcePlan(sid, rec, skip_reason=wait)
    window = coverage_from(last_success, now)
    notes: list[str] = []
    token: str | None = None
    if src.auth_token_env:
        token = env.get(src.auth_token_env) or None
        if token is None:
            failure = ("policy", f"authTokenEnv names {src.auth_token_env}, which is not set")
            return SourcePlan(sid, rec, window, failure=failure)
    request = _fetch_request(rec, state, now, token)
    return SourcePlan(sid, rec, window, request, notes=tuple(notes))


def _due_now(
    rec: SourceRecord, last_success: datetime | None, now: datetime, placement: Placement
) -> bool:
    """The cadence part of the due rule (`is_due` on the Source's grid); waits come apart."""
    cadence = parse_cadence(rec.source.cadence)
    if cadence is None:
        return False
    return is_due(
        rec.source.id, cadence, last_success, now, offset=placement.offset(rec.source.id, cadence)
    )


@dataclass(frozen=True)
class Wait:
    """One wait before a Source may be fetched again: when it ends, and why it holds."""

    until: datetime
    reason: str


def source_waits(rec: SourceRecord, state: FeedState | None, by_hand: bool) -> tuple[Wait, ...]:
    """Every wait the Source's state sets, ended or not: its backoff, the publisher's wait
    (Cache-Control max-age, <ttl>) and `minIntervalSeconds` after its last answer. `by_hand`:
    for a collection that names the Source (mode `explicit`), where a person overrides our own
    backoff but never a publisher's wait (a 429/503 Retry-After, a challenge page) nor the
    minimum interval. The one list behind `_wait_reason`, `waits_until` and `by_hand_from`."""
    if state is None:
        return ()
    waits: list[Wait] = []
    if state.backoff_until is not None:
        until = state.backoff_until.isoformat()
        if not by_hand:
            waits.append(Wait(state.backoff_until, f"backoff until {until}"))
        elif state.error_state in PUBLISHER_WAITS:
            waits.append(Wait(state.backoff_until, f"{state.error_state}: backoff until {until}"))
    if state.polite_until is not None:
        # Like minIntervalSeconds, the publisher's own Cache-Control max-age or <ttl> holds for
        # every run, an explicit one included.
        reason = f"polite: the publisher asked for no check before {state.polite_until.isoformat()}"
        waits.append(Wait(state.polite_until, reason))
    if state.last_fetch_at is not None and rec.source.min_interval_seconds:
        allowed_at = state.last_fetch_at + timedelta(seconds=rec.source.min_interval_seconds)
        waits.append(
            Wait(allowed_at, f"rate-limit: minIntervalSeconds until {allowed_at.isoformat()}")
        )
    return tuple(waits)


def waits_until(rec: SourceRecord, state: FeedState | None) -> datetime | None:
    """When the last of the Source's waits ends (backoff, the publisher's wait, the minimum
    interval after its last answer), or None when none applies: the earliest time a `due`
    collection can fetch it, whatever its cadence says (`_wait_reason` is the same rule)."""
    return max((w.until for w in source_waits(rec, state, by_hand=False)), default=None)


def by_hand_from(rec: SourceRecord, state: FeedState | None, now: datetime) -> datetime | None:
    """When a run by hand (`radar collect --source`, a backfill) may fetch the Source again: the
    end of the waits it respects (a publisher's wait, `minIntervalSeconds`; not our own
    backoff), or None when none is pending at `now`. Before it, such a run skips the Source
    with the wait's reason (`_wait_reason` in mode `explicit`)."""
    ends = [w.until for w in source_waits(rec, state, by_hand=True) if now < w.until]
    return max(ends, default=None)


def _wait_reason(spec: CollectionSpec, rec: SourceRecord, state: FeedState | None) -> str | None:
    """Why the Source must not be fetched yet (backoff, a publisher's wait,
    minIntervalSeconds), or None: the first of its waits that has not ended."""
    waits = source_waits(rec, state, by_hand=spec.mode == "explicit")
    return next((w.reason for w in waits if spec.as_of < w.until), None)


def _fetch_request(
    rec: SourceRecord, state: FeedState | None, now: datetime, token: str | None
) -> FetchRequest:
    src = rec.source
    return FetchRequest(
        source_id=src.id,
        url=src.url,
        collection_method=src.collection_method,
        etag=state.etag if state else None,
        last_modified=state.last_modified if state else None,
        conditional=not needs_unconditional(state.last_unconditional_at if state else None, now),
        auth_token=token,
        # A file in the vault has no publisher to spare: always parse it, so a repeat run
        # reports its items as reused rather than not-modified.
        previous_body_sha256=None if src.reads_vault or state is None else state.last_body_sha256,
        from_vault=src.reads_vault,
    )


def _ineligible_reason(rec: SourceRecord) -> str:
    src = rec.source
    if not src.enabled:
        return "not eligible: enabled is false"
    if src.blocked_reason:
        return f"not eligible: blocked ({src.blocked_reason})"
    return f"not eligible: legalAssessment is {src.legal_assessment}"


def _downtime_from(
    snapshot: RegistrySnapshot,
    states: Mapping[str, FeedState],
    last_collection_at: datetime | None,
    now: datetime,
) -> datetime | None:
    """When the Radar last made progress, if it has been down since; else None.

    Progress is the latest `lastSuccessAt` of any eligible cadence-driven Source: a sleeping
    laptop, a stopped Dagster and an absent network all stop it, while one Source failing on
    its own does not (the others keep succeeding). The time of the last collection is not
    progress (a collection whose every check failed while offline is still downtime); it is
    used only while no Source has ever succeeded. It counts as downtime once a whole check was
    missed: the busiest Source (shortest cadence) was due at `last + cadence` and another
    cadence went by, so `now >= last + 2 * cadence`. A check a few minutes late is not
    downtime.
    """
    timings = source_timings(snapshot, states, now)
    if not timings:
        return None
    last = max((t.last_success_at for t in timings if t.last_success_at), default=None)
    last = last or last_collection_at
    if last is None or last > now:
        return None
    shortest = min(t.cadence for t in timings)
    return last if now - last >= 2 * shortest else None


def retry_from(timing: SourceTiming) -> datetime:
    """Since when a run of the collection schedule covers the Source's current attempt: its
    slot's start, or, when its last check failed, the end of its backoff if that is later (a
    run decided before it was the attempt that failed; the retry is a new step). The schedule
    does not ask again for a Source a run decided at or after this time covered
    (defs/collection/schedules.py, `taken_sources`)."""
    if timing.backoff_until is not None and timing.backoff_until > timing.slot:
        return timing.backoff_until
    return timing.slot


@dataclass(frozen=True)
class NextAttempt:
    """When a Source is checked next. `at`: when the schedule checks it (None for a `manual`
    Source: when a person runs it). `not_before`: for a `manual` Source, the end of the waits
    a run by hand still respects (`by_hand_from`), while one is pending; else None."""

    at: datetime | None
    not_before: datetime | None = None


def next_attempts(plan: CollectionPlan, states: Mapping[str, FeedState]) -> dict[str, NextAttempt]:
    """`next_attempts_of` for the Sources of `plan`, given their state after its commit."""
    records = tuple(c.record for c in plan.source_plans if c.record is not None)
    return next_attempts_of(records, states, plan.spec, plan.placement)


def next_attempts_of(
    records: Sequence[SourceRecord],
    states: Mapping[str, FeedState],
    spec: CollectionSpec,
    placement: Placement,
) -> dict[str, NextAttempt]:
    """When the schedule next checks each eligible Source of `records` after `spec`'s
    collection, given its state after it (`states`): its next grid point on `placement`, not
    before its backoff, a publisher's wait or its minimum interval ends (`next_due_at`; for a
    failed Source the end of its wait: the schedule retries it then); and when `spec` is a run
    of the schedule that covered the Source's current attempt (`retry_from`: the run did not
    move its backoff or its last success, as a run that failed as a whole, or a Source it
    skipped), not before the next slot starts, as the schedule asks for it only then. A
    `manual` Source has no time (a person runs it), only the end of the waits such a run
    respects. The one rule behind the partition's line, the Source note's `nextAttemptAt` and
    the report's `nextAttemptAt`."""
    snapshot = RegistrySnapshot(sources=tuple(records), issues=())
    now = spec.as_of
    out: dict[str, NextAttempt] = {}
    for rec in records:
        if rec.source.is_eligible and parse_cadence(rec.source.cadence) is None:
            state = states.get(rec.source.id)
            out[rec.source.id] = NextAttempt(None, by_hand_from(rec, state, now))
    for t in source_timings(snapshot, states, now, placement):
        offset = placement.offset(t.source_id, t.cadence)
        due_at = next_due_at(t.source_id, t.cadence, t.last_success_at, t.waits_until, now, offset)
        if due_at is None:
            continue
        then = replace(t, slot=due_slot(t.source_id, t.cadence, due_at, offset))
        if spec.tick is not None and retry_from(then) <= spec.tick < then.slot + t.cadence:
            due_at = then.slot + t.cadence  # its slot is spent: the next one
        out[t.source_id] = NextAttempt(due_at)
    return out
