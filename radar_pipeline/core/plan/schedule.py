"""Cadence and recovery math: when a Source is due, what it covers, how long it backs off.

Pure functions of their arguments (the clock is always passed in as `now`), so the CLI's
`--as-of` and the Dagster schedule make the same decisions. Every datetime is aware UTC.

Recovery (docs/architecture.md, invariant 8) never replays missed ticks: an overdue Source gets
one current check, which reports as covered `max(lastSuccessAt, now - RECOVERY_CAP) - OVERLAP`
and takes every item dated after `now - RECOVERY_CAP - OVERLAP` (or undated) that identity does
not know yet; the dedupe stage absorbs the overlap.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timedelta

from radar_pipeline.core.clock import EPOCH, require_aware

RECOVERY_CAP = timedelta(days=7)
OVERLAP = timedelta(hours=1)
# New items one check decides at most (newest first); the rest are deferred to the next checks.
ITEM_CAP = 50
UNCONDITIONAL_EVERY = timedelta(hours=24)

BACKOFF_BASE = timedelta(minutes=5)
BACKOFF_CAP = timedelta(hours=24)
# Full jitter may draw ~0; a floor keeps a failing Source from being retried on the next tick.
BACKOFF_FLOOR = timedelta(minutes=1)
RETRY_AFTER_CAP = timedelta(hours=6)
CHALLENGE_BACKOFF = timedelta(hours=6)
GONE_BACKOFF = timedelta(hours=24)

_PRIORITY_ORDER = {"critical": 0, "high": 1, "normal": 2, "low": 3}
_FIRST_ROLES = frozenset({"primary", "discovery"})


def _whole_seconds(cadence: timedelta) -> int:
    seconds = int(cadence.total_seconds())
    if seconds < 1:
        raise ValueError(f"cadence must be at least one second, got {cadence}")
    return seconds


def stable_offset(source_id: str, cadence: timedelta) -> timedelta:
    """A deterministic offset in [0, cadence), whole seconds, derived from sha256 of the id.

    Spreads Sources with the same cadence over the cadence so they are not all fetched at
    once, and keeps each Source's slot the same across processes and restarts.
    """
    digest = hashlib.sha256(source_id.encode("utf-8")).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % _whole_seconds(cadence))


def _origin(source_id: str, step: timedelta, offset: timedelta | None) -> datetime:
    """EPOCH + the Source's grid offset: the one given (its wave, core/plan/waves), else its
    stable sha256 offset. `due_slot` and `next_check_at` share it, so a slot is one grid's."""
    if offset is None:
        return EPOCH + stable_offset(source_id, step)
    if not timedelta(0) <= offset < step:
        raise ValueError(f"offset must lie in [0, {step}), got {offset}")
    return EPOCH + offset


def due_slot(
    source_id: str, cadence: timedelta, now: datetime, offset: timedelta | None = None
) -> datetime:
    """The start of the slot containing `now`; slots are EPOCH + offset + k * cadence.

    The schedule collects a Source at most once per slot (defs/collection/schedules.py).
    `offset`: the Source's grid offset (its wave); None: its stable sha256 offset.
    """
    require_aware(now, "now")
    step = timedelta(seconds=_whole_seconds(cadence))
    origin = _origin(source_id, step, offset)
    # timedelta // timedelta floors, so instants before the origin land in the right slot too.
    return origin + ((now - origin) // step) * step


def _first_at_or_after(origin: datetime, step: timedelta, instant: datetime) -> datetime:
    """The first point of the grid origin + k * step at or after `instant`."""
    return origin - ((origin - instant) // step) * step


def next_check_at(
    source_id: str,
    cadence: timedelta,
    last_success_at: datetime | None,
    offset: timedelta | None = None,
) -> datetime | None:
    """When a cadence-driven Source is next due; None when it never succeeded (due at once).

    Each Source has its grid: slot starts at its offset (its wave's, core/plan/waves, else its
    stable sha256 offset) plus multiples of its cadence. It is due at the first slot start at
    least half a cadence after `lastSuccessAt`, when that is at most a cadence after it: a
    Source on its grid stays there, once per cadence, in the minute of the rest of its wave.
    Otherwise (its last check was off its grid: a first check, a retry after backoff, a
    recovery, a wave that moved) it is due an eighth of a cadence before the slot middle (at
    the earliest half a cadence after the last success), so that the check after it, however
    late inside that eighth it ran, is a slot start again: a Source rejoins its wave within
    two checks. So a check is never later than `lastSuccessAt + cadence` (the contract's
    rule: an overdue Source is always due) and never sooner than half a cadence after the
    last success, whatever the offset (a Source whose wave changes keeps both bounds), and
    Sources that succeeded together (the first run, a recovery after downtime) fall apart at
    once onto their waves' times instead of firing on the same minute for ever.
    """
    if last_success_at is None:
        return None
    require_aware(last_success_at, "last_success_at")
    seconds = _whole_seconds(cadence)
    step = timedelta(seconds=seconds)
    half = timedelta(seconds=seconds // 2)
    earliest = last_success_at + half
    start = _first_at_or_after(_origin(source_id, step, offset), step, earliest)
    if start <= last_success_at:  # a one-second cadence has no half: the next second
        start += step
    if start <= last_success_at + step:
        return start
    return max(earliest, start - half - timedelta(seconds=seconds // 8))


def next_due_at(
    source_id: str,
    cadence: timedelta | None,
    last_success_at: datetime | None,
    backoff_until: datetime | None,
    now: datetime,
    offset: timedelta | None = None,
) -> datetime | None:
    """When a `due` collection next checks the Source: its next check time (`next_check_at`,
    or `now` when it never succeeded), not before its waits end (`backoff_until`: the latest of
    its backoff, a publisher's wait and its minimum interval, `SourceTiming.waits_until`). A
    Source that failed is overdue or due at its slot, so this is its backoff's end: the
    schedule retries it then (core/plan/collection.py, `retry_from`). None for `manual`."""
    require_aware(now, "now")
    if cadence is None:
        return None
    due_at = next_check_at(source_id, cadence, last_success_at, offset) or now
    if backoff_until is not None:
        require_aware(backoff_until, "backoff_until")
        due_at = max(due_at, backoff_until)
    return due_at


def is_overdue(cadence: timedelta | None, last_success_at: datetime | None, now: datetime) -> bool:
    """True when a cadence-driven Source has not succeeded within its cadence (or ever)."""
    require_aware(now, "now")
    if cadence is None:
        return False
    if last_success_at is None:
        return True
    require_aware(last_success_at, "last_success_at")
    return now >= last_success_at + cadence


def is_due(
    source_id: str,
    cadence: timedelta | None,
    last_success_at: datetime | None,
    now: datetime,
    backoff_until: datetime | None = None,
    polite_until: datetime | None = None,
    offset: timedelta | None = None,
) -> bool:
    """True when the Source should be checked now: its next check time has come
    (`next_check_at`), it is not in backoff, and the publisher's own lower bound has passed.
    Every overdue Source is due unless the publisher asked for more time.

    `polite_until`: the last response's time plus `acquire.response.polite_delay_s` (its
    Cache-Control max-age or RSS <ttl>, at most a day). `manual` (None) is never due; it runs
    only when named explicitly. `offset`: the Source's grid offset (`next_check_at`).
    """
    require_aware(now, "now")
    if cadence is None:
        return False
    for name, bound in (("backoff_until", backoff_until), ("polite_until", polite_until)):
        if bound is not None:
            require_aware(bound, name)
            if now < bound:
                return False
    next_at = next_check_at(source_id, cadence, last_success_at, offset)
    return next_at is None or now >= next_at


def window_from(now: datetime) -> datetime:
    """The oldest observation date a check still takes: now - 7 days - 1 hour (the recovery
    cap). Items dated inside it, or undated, are eligible on every check and identity decides
    whether they are new; older ones are counted as outside the window (invariant 14)."""
    require_aware(now, "now")
    return now - RECOVERY_CAP - OVERLAP


def coverage_from(last_success_at: datetime | None, now: datetime) -> datetime:
    """The period a check reports as covered: max(lastSuccessAt, now - 7 days) - 1 hour.

    It no longer filters items (`window_from` does, by the cap): a new item dated before it
    is still taken and counted as late (invariant 8).
    """
    require_aware(now, "now")
    floor = now - RECOVERY_CAP
    if last_success_at is None:
        return floor - OVERLAP
    require_aware(last_success_at, "last_success_at")
    # A success recorded after `now` (the clock went back) covers nothing beyond `now`.
    return min(max(last_success_at, floor), now) - OVERLAP


def needs_unconditional(last_unconditional_at: datetime | None, now: datetime) -> bool:
    """True when the last unconditional fetch is 24 h old or more (or never happened).

    A 304 is a hint, not proof (invariant 6), so conditional headers are dropped once a day.
    """
    require_aware(now, "now")
    if last_unconditional_at is None:
        return True
    require_aware(last_unconditional_at, "last_unconditional_at")
    return now - last_unconditional_at >= UNCONDITIONAL_EVERY


def priority_rank(priority: str, role: str) -> tuple[int, int]:
    """Sort key for recovery order: critical, then primary/discovery roles, then the rest.

    Within a group the priority orders high < normal < low. Unknown values raise ValueError.
    """
    if priority not in _PRIORITY_ORDER:
        raise ValueError(f"unknown priority {priority!r}: expected one of {list(_PRIORITY_ORDER)}")
    if not role:
        raise ValueError("role must not be empty")
    if priority == "critical":
        group = 0
    elif role in _FIRST_ROLES:
        group = 1
    else:
        group = 2
    return group, _PRIORITY_ORDER[priority]


def _floor_for(error_class: str | None, retry_after_s: float | None) -> timedelta:
    """The least a publisher's signal demands, whatever the jitter draws."""
    if error_class == "gone":
        return GONE_BACKOFF
    if error_class == "challenge":
        return CHALLENGE_BACKOFF
    if error_class == "rate-limited" and retry_after_s is not None and retry_after_s > 0:
        return min(timedelta(seconds=retry_after_s), RETRY_AFTER_CAP)
    return BACKOFF_FLOOR


def next_backoff(
    consecutive_failures: int,
    now: datetime,
    *,
    error_class: str | None,
    retry_after_s: float | None,
    rng: random.Random,
) -> datetime:
    """When a failing Source may be tried again (`backoff_until`).

    Exponential with full jitter: a uniform draw in [0, min(24 h, 5 min * 2**(n-1))], then
    raised to the floor the failure demands (Retry-After capped at 6 h for rate-limited,
    6 h for a challenge page, 24 h for gone, else 1 minute). Never more than 24 h later:
    there is no permanent stop, a Source keeps being retried. Whole seconds.
    """
    require_aware(now, "now")
    if consecutive_failures < 1:
        raise ValueError(f"consecutive_failures must be >= 1, got {consecutive_failures}")
    cap_s = BACKOFF_CAP.total_seconds()
    # Clamp the exponent so huge failure counts cannot overflow the float.
    ceiling_s = min(cap_s, BACKOFF_BASE.total_seconds() * 2 ** min(consecutive_failures - 1, 32))
    delay_s = max(
        rng.uniform(0.0, ceiling_s), _floor_for(error_class, retry_after_s).total_seconds()
    )
    return now + timedelta(seconds=round(min(delay_s, cap_s)))
