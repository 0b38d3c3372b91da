"""Cadence, due slots, recovery coverage and backoff: table-driven tests of the pure math."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radar_pipeline.core.clock import EPOCH, format_utc, parse_cadence, parse_utc
from radar_pipeline.core.plan.schedule import (
    OVERLAP,
    RECOVERY_CAP,
    coverage_from,
    due_slot,
    is_due,
    is_overdue,
    needs_unconditional,
    next_backoff,
    next_check_at,
    next_due_at,
    priority_rank,
    stable_offset,
)

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
H = timedelta(hours=1)
SIX_H = timedelta(hours=6)
IDS = ["openai-news", "react-blog", "nextjs-blog", "github-changelog", "cloudflare-blog"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("PT6H", timedelta(hours=6)),
        ("P1D", timedelta(days=1)),
        ("PT30M", timedelta(minutes=30)),
        ("PT45S", timedelta(seconds=45)),
        ("P1DT12H", timedelta(days=1, hours=12)),
        ("PT1H30M15S", timedelta(hours=1, minutes=30, seconds=15)),
        ("P2W", timedelta(weeks=2)),
        ("P1W", timedelta(days=7)),
        (" PT6H ", timedelta(hours=6)),
        ("manual", None),
    ],
)
def test_parse_cadence_valid(value: str, expected: timedelta | None) -> None:
    assert parse_cadence(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "P",
        "PT",
        "P1DT",
        "PT0H",
        "P0D",
        "-PT6H",
        "PT-6H",
        "P1M",  # a month has no fixed length
        "P1Y",
        "PT1.5H",
        "pt6h",
        "6h",
        "daily",
        "Manual",
        "P1H",  # hours need the T
        "P99999999999D",
    ],
)
def test_parse_cadence_invalid(value: str) -> None:
    with pytest.raises(ValueError, match="cadence"):
        parse_cadence(value)


@pytest.mark.parametrize(
    ("cadence", "last_success", "now", "backoff_until", "expected"),
    [
        pytest.param(SIX_H, None, NOW, None, True, id="never-checked"),
        pytest.param(SIX_H, NOW - 7 * H, NOW, None, True, id="due"),
        pytest.param(SIX_H, NOW - SIX_H, NOW, None, True, id="due-exactly-at-cadence"),
        pytest.param(SIX_H, NOW - 2 * H, NOW, None, False, id="not-yet-due"),
        pytest.param(SIX_H, NOW - 3 * H, NOW, None, False, id="half-cadence-is-never-due"),
        pytest.param(SIX_H, NOW - 7 * H, NOW, NOW + H, False, id="in-backoff"),
        pytest.param(SIX_H, None, NOW, NOW + H, False, id="never-checked-in-backoff"),
        pytest.param(SIX_H, NOW - 7 * H, NOW, NOW, True, id="backoff-just-ended"),
        pytest.param(SIX_H, NOW - 7 * H, NOW, NOW - H, True, id="backoff-over"),
        pytest.param(None, None, NOW, None, False, id="manual-never-checked"),
        pytest.param(None, NOW - timedelta(days=30), NOW, None, False, id="manual-old"),
        pytest.param(
            SIX_H, NOW, NOW + timedelta(days=400), None, True, id="as-of-far-future-recovery"
        ),
    ],
)
def test_is_due(
    cadence: timedelta | None,
    last_success: datetime | None,
    now: datetime,
    backoff_until: datetime | None,
    expected: bool,
) -> None:
    # Cases here hold for every Source id (see next_check_at); the grid cases follow.
    for source_id in IDS:
        assert is_due(source_id, cadence, last_success, now, backoff_until) is expected


@pytest.mark.parametrize(
    ("cadence", "last_success", "expected"),
    [
        (SIX_H, None, True),
        (SIX_H, NOW - 7 * H, True),
        (SIX_H, NOW - 5 * H, False),
        (None, None, False),
        (None, NOW - timedelta(days=30), False),
    ],
)
def test_is_overdue_ignores_backoff(
    cadence: timedelta | None, last_success: datetime | None, expected: bool
) -> None:
    assert is_overdue(cadence, last_success, NOW) is expected


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        is_due("a", SIX_H, None, datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        next_check_at("a", SIX_H, datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        coverage_from(datetime(2026, 1, 1), NOW)
    with pytest.raises(ValueError, match="aware"):
        format_utc(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("last_success", "now", "expected"),
    [
        pytest.param(NOW - 2 * H, NOW, NOW - 3 * H, id="recent-success"),
        pytest.param(NOW - timedelta(days=30), NOW, NOW - RECOVERY_CAP - OVERLAP, id="old"),
        pytest.param(None, NOW, NOW - RECOVERY_CAP - OVERLAP, id="never"),
        pytest.param(
            NOW - RECOVERY_CAP, NOW, NOW - RECOVERY_CAP - OVERLAP, id="exactly-at-the-cap"
        ),
        pytest.param(
            NOW,
            NOW + timedelta(days=400),
            NOW + timedelta(days=393) - OVERLAP,
            id="as-of-far-future",
        ),
    ],
)
def test_coverage_from(last_success: datetime | None, now: datetime, expected: datetime) -> None:
    assert coverage_from(last_success, now) == expected


@pytest.mark.parametrize(
    ("last", "expected"),
    [(None, True), (NOW - timedelta(hours=24), True), (NOW - timedelta(hours=23), False)],
)
def test_needs_unconditional(last: datetime | None, expected: bool) -> None:
    assert needs_unconditional(last, NOW) is expected


def test_offsets_are_stable_distinct_and_in_range() -> None:
    offsets = [stable_offset(i, SIX_H) for i in IDS]
    assert offsets == [stable_offset(i, SIX_H) for i in IDS]
    assert len(set(offsets)) == 5
    for offset in offsets:
        assert timedelta(0) <= offset < SIX_H
        assert offset.microseconds == 0


def test_offsets_spread_over_the_whole_cadence() -> None:
    ids = [f"source-{n:03d}" for n in range(200)]
    buckets = [0] * 8
    for source_id in ids:
        buckets[stable_offset(source_id, SIX_H) // (SIX_H / 8)] += 1
    for count in buckets:
        assert 10 <= count <= 40, buckets  # 5%..20% of 200 in every eighth


def test_due_slot_stable_within_slot_and_changes_at_boundary() -> None:
    slot = due_slot("openai-news", SIX_H, NOW)
    assert slot <= NOW < slot + SIX_H
    assert (slot - EPOCH - stable_offset("openai-news", SIX_H)) % SIX_H == timedelta(0)
    assert due_slot("openai-news", SIX_H, slot) == slot
    assert due_slot("openai-news", SIX_H, slot + SIX_H - timedelta(seconds=1)) == slot
    assert due_slot("openai-news", SIX_H, slot + SIX_H) == slot + SIX_H
    assert due_slot("openai-news", SIX_H, slot - timedelta(seconds=1)) == slot - SIX_H


def _on_grid(source_id: str, cadence: timedelta, instant: datetime) -> bool:
    """A slot start of the Source's grid (its stable offset when no wave places it)."""
    return (instant - EPOCH - stable_offset(source_id, cadence)) % cadence == timedelta(0)


@pytest.mark.parametrize("source_id", IDS)
def test_next_check_lands_on_the_sources_own_grid(source_id: str) -> None:
    slot = due_slot(source_id, SIX_H, NOW)
    mid = slot + SIX_H / 2
    eighth = SIX_H / 8
    cases = [
        # (last success, next check): a check at a slot start comes back at the next one.
        (slot, slot + SIX_H),
        (slot + timedelta(seconds=20), slot + SIX_H),
        # A check at a slot middle (the first check after a recovery can land there) goes
        # back to the slot start, half a cadence on.
        (mid, slot + SIX_H),
        # Off the grid: the first slot start at least half a cadence on, when it is at most
        # a cadence on; else an eighth of a cadence before the middle (at the earliest half a
        # cadence on), so that the check after it is a slot start again.
        (slot - 4 * H, slot),  # the slot start is 4 h after: earlier than last + 6 h
        (slot - H, mid - eighth),  # the slot start is 7 h after: too late
        (slot - H + timedelta(seconds=30), mid - eighth),
        (slot - timedelta(minutes=10), slot + 2 * H + timedelta(minutes=50)),  # last + 3 h
        (slot + 2 * H, slot + SIX_H),
        (mid - eighth + timedelta(minutes=5), slot + SIX_H),  # a check late in the eighth
    ]
    for last, expected in cases:
        assert next_check_at(source_id, SIX_H, last) == expected, (last, expected)
        assert not is_due(source_id, SIX_H, last, expected - timedelta(seconds=1))
        assert is_due(source_id, SIX_H, last, expected)
    assert next_check_at(source_id, SIX_H, None) is None


def test_sources_checked_together_fall_apart_onto_their_offsets() -> None:
    """Five six-hour Sources on their own offsets (no wave places them) recovered in one
    collection do not fire together again."""
    recovery = NOW
    first = {i: next_check_at(i, SIX_H, recovery) for i in IDS}
    times = sorted(t for t in first.values() if t is not None)
    assert len(times) == 5
    # Each in a minute (a schedule tick) of its own.
    assert all(later - earlier >= timedelta(minutes=1) for earlier, later in pairwise(times))
    for source_id, instant in first.items():
        assert instant is not None
        assert recovery + SIX_H / 2 <= instant <= recovery + SIX_H
        # Checked at its time, it is on its grid by the next check: once per cadence on.
        second = next_check_at(source_id, SIX_H, instant + timedelta(seconds=30))
        assert second is not None and _on_grid(source_id, SIX_H, second)
        assert next_check_at(source_id, SIX_H, second + timedelta(seconds=30)) == second + SIX_H


@given(
    st.text(min_size=1, max_size=30),
    st.integers(min_value=1, max_value=14 * 86400),
    st.datetimes(
        min_value=datetime(1960, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
)
def test_next_check_bounds_and_steady_cadence(
    source_id: str, cadence_s: int, last: datetime
) -> None:
    cadence = timedelta(seconds=cadence_s)
    half = timedelta(seconds=cadence_s // 2)
    first = next_check_at(source_id, cadence, last)
    assert first is not None
    # Never later than the contract's lastSuccessAt + cadence, never sooner than half of it.
    assert last + half <= first <= last + cadence
    assert is_overdue(cadence, last, first) <= is_due(source_id, cadence, last, first)
    # Checked exactly when due, a Source is on its grid by the second check, and from then
    # on it is checked once per cadence.
    second = next_check_at(source_id, cadence, first)
    assert second is not None and _on_grid(source_id, cadence, second)
    assert last + half <= first + half <= second <= first + cadence
    third = next_check_at(source_id, cadence, second)
    assert third == second + cadence


def test_due_slots_differ_between_sources() -> None:
    slots = {due_slot(i, SIX_H, NOW) for i in IDS}
    assert len(slots) == 5


@given(
    st.text(min_size=1, max_size=30),
    st.integers(min_value=1, max_value=14 * 86400),
    st.datetimes(
        min_value=datetime(1960, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
)
def test_due_slot_contains_now(source_id: str, cadence_s: int, now: datetime) -> None:
    cadence = timedelta(seconds=cadence_s)
    slot = due_slot(source_id, cadence, now)
    assert slot <= now < slot + cadence
    assert due_slot(source_id, cadence, slot) == slot


@pytest.mark.parametrize(
    ("priority", "role", "expected"),
    [
        ("critical", "research", (0, 0)),
        ("critical", "primary", (0, 0)),
        ("high", "primary", (1, 1)),
        ("low", "discovery", (1, 3)),
        ("high", "engineering-blog", (2, 1)),
        ("normal", "research", (2, 2)),
    ],
)
def test_priority_rank(priority: str, role: str, expected: tuple[int, int]) -> None:
    assert priority_rank(priority, role) == expected


def test_priority_rank_orders_recovery() -> None:
    sources = [
        ("blog-low", "low", "engineering-blog"),
        ("research-crit", "critical", "research"),
        ("primary-normal", "normal", "primary"),
        ("blog-high", "high", "engineering-blog"),
        ("discovery-high", "high", "discovery"),
    ]
    ordered = [s[0] for s in sorted(sources, key=lambda s: priority_rank(s[1], s[2]))]
    assert ordered == ["research-crit", "discovery-high", "primary-normal", "blog-high", "blog-low"]


def test_priority_rank_refuses_unknown() -> None:
    with pytest.raises(ValueError, match="priority"):
        priority_rank("urgent", "primary")


def _delay(n: int, seed: int = 1, **kw: object) -> timedelta:
    params: dict[str, object] = {"error_class": None, "retry_after_s": None}
    params.update(kw)
    until = next_backoff(n, NOW, rng=random.Random(seed), **params)  # type: ignore[arg-type]
    return until - NOW


@pytest.mark.parametrize(
    ("failures", "ceiling"),
    [
        (1, timedelta(minutes=5)),
        (2, timedelta(minutes=10)),
        (3, timedelta(minutes=20)),
        (6, timedelta(minutes=160)),
        (9, timedelta(hours=24)),  # 5 min * 256 > 24 h: capped
        (50, timedelta(hours=24)),
        (10_000, timedelta(hours=24)),
    ],
)
def test_backoff_jitter_stays_within_bounds(failures: int, ceiling: timedelta) -> None:
    delays = [_delay(failures, seed) for seed in range(200)]
    assert all(timedelta(minutes=1) <= d <= ceiling for d in delays)
    assert all(d.microseconds == 0 for d in delays)
    # Full jitter: the draws cover the range rather than clustering at the ceiling.
    assert len(set(delays)) > 20
    assert min(delays) < ceiling / 4 or ceiling == timedelta(minutes=5)
    assert max(delays) > ceiling * 3 / 4


def test_backoff_grows_with_failures() -> None:
    means = []
    for failures in (1, 3, 5, 7):
        delays = [_delay(failures, seed).total_seconds() for seed in range(300)]
        means.append(sum(delays) / len(delays))
    assert means == sorted(means)
    assert means[-1] > 8 * means[0]


def test_backoff_is_deterministic_for_a_seed() -> None:
    assert _delay(4, seed=42) == _delay(4, seed=42)
    assert {_delay(4, seed=s) for s in range(10)} != {_delay(4, seed=42)}


@pytest.mark.parametrize(
    ("error_class", "retry_after_s", "least", "most"),
    [
        ("rate-limited", 3600.0, timedelta(hours=1), timedelta(hours=1, minutes=5)),
        ("rate-limited", 86400.0 * 3, timedelta(hours=6), timedelta(hours=6)),  # capped 6 h
        ("rate-limited", None, timedelta(minutes=1), timedelta(minutes=5)),
        ("challenge", None, timedelta(hours=6), timedelta(hours=6)),
        ("gone", None, timedelta(hours=24), timedelta(hours=24)),
        ("http-5xx", 3600.0, timedelta(minutes=1), timedelta(minutes=5)),  # only 429 honours it
    ],
)
def test_backoff_honours_publisher_signals(
    error_class: str, retry_after_s: float | None, least: timedelta, most: timedelta
) -> None:
    for seed in range(50):
        delay = _delay(1, seed, error_class=error_class, retry_after_s=retry_after_s)
        assert least <= delay <= most


def test_backoff_never_exceeds_a_day() -> None:
    assert _delay(10_000, error_class="gone") == timedelta(hours=24)
    assert _delay(10_000, error_class="rate-limited", retry_after_s=1e12) <= timedelta(hours=24)


def test_backoff_refuses_zero_failures() -> None:
    with pytest.raises(ValueError, match="consecutive_failures"):
        _delay(0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T01:02:03Z", datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)),
        ("2026-11-30T03:02:03+02:00", datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)),
        ("2026-11-29T20:02:03-05:00", datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)),
        ("2026-11-30T01:02:03", datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)),
        ("2026-11-30T01:02:03.250Z", datetime(2026, 11, 30, 1, 2, 3, 250000, tzinfo=UTC)),
    ],
)
def test_parse_utc(text: str, expected: datetime) -> None:
    parsed = parse_utc(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["", "   ", "yesterday", "2026-13-01T00:00:00Z", "30/11/2026"])
def test_parse_utc_invalid(text: str) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        parse_utc(text)


def test_format_utc_round_trip() -> None:
    value = datetime(2026, 11, 30, 3, 2, 3, 999999, tzinfo=UTC)
    assert format_utc(value) == "2026-11-30T03:02:03Z"
    assert parse_utc(format_utc(NOW)) == NOW
    offset = parse_utc("2026-11-30T03:02:03+02:00")
    assert format_utc(offset) == "2026-11-30T01:02:03Z"


def test_next_due_at_is_the_next_check_not_before_the_backoff() -> None:
    six = timedelta(hours=6)
    last = NOW - timedelta(hours=1)
    assert next_due_at("a", None, last, None, NOW) is None  # manual
    assert next_due_at("a", six, None, None, NOW) == NOW  # never succeeded: due now
    assert next_due_at("a", six, last, None, NOW) == next_check_at("a", six, last)
    later = NOW + timedelta(days=1)
    assert next_due_at("a", six, last, later, NOW) == later  # in backoff: when it ends
    assert next_due_at("a", six, None, later, NOW) == later
