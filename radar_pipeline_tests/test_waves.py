"""The due rule's waves (core/plan/waves): pure tests of where Sources sit on their cadence,
and a simulated week of checks with Sources added and removed under the real rule."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from radar_pipeline.core.plan.schedule import due_slot, next_check_at, stable_offset
from radar_pipeline.core.plan.waves import (
    BASE_PERIOD,
    UNPLACED,
    WAVE_SIZE,
    partition_order,
    place,
    spread,
    wave_offset,
)
from radar_pipeline.defs.partitions import partition_blocks

H = timedelta(hours=1)
SIX_H = timedelta(hours=6)
DAY = timedelta(days=1)
CADENCES = (H, SIX_H, DAY)
T0 = datetime(2026, 11, 2, 0, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def test_spread_splits_each_power_of_two_evenly() -> None:
    for bits in range(6):
        first = sorted(spread(k) for k in range(2**bits))
        assert first == [Fraction(k, 2**bits) for k in range(2**bits)]
    with pytest.raises(ValueError):
        spread(-1)


def test_waves_follow_partition_order_inside_each_cadence() -> None:
    hourly = [f"h-{n:03d}" for n in range(2 * WAVE_SIZE + 10)]
    daily = [f"d-{n:03d}" for n in range(10)]
    order = [
        sid for pair in zip(hourly, [*daily, *[""] * len(hourly)], strict=False) for sid in pair
    ]
    cadences = {**dict.fromkeys(hourly, H), **dict.fromkeys(daily, DAY)}
    placement = place([s for s in order if s], cadences)
    offsets = [placement.offset(s, H) for s in hourly]
    waves = [offsets[k * WAVE_SIZE : (k + 1) * WAVE_SIZE] for k in range(3)]
    assert [len(set(w)) for w in waves] == [1, 1, 1]  # a wave shares one offset
    assert len({w[0] for w in waves}) == 3
    # One base for every cadence: the first placed Source's stable offset within a day.
    base = stable_offset(hourly[0], BASE_PERIOD)
    assert [w[0] for w in waves] == [wave_offset(k, H, base) for k in range(3)]
    assert all(timedelta(0) <= o < H for o in offsets)
    # The daily Sources are their own cadence's first wave, whatever lies between them, and it
    # falls on a grid point of the first hourly wave: both are due in the same minute.
    [daily_offset] = {placement.offset(s, DAY) for s in daily}
    assert daily_offset == wave_offset(0, DAY, base)
    assert daily_offset % H == waves[0][0]


def test_unplaced_sources_keep_their_stable_offset() -> None:
    placement = place(["a", "b"], {"a": H, "b": H})
    assert placement.offset("new", H) == stable_offset("new", H)  # not a partition yet
    assert placement.offset("a", SIX_H) == stable_offset("a", SIX_H)  # cadence edited since
    assert UNPLACED.offset("a", H) == stable_offset("a", H)


def test_added_sources_move_no_one_and_a_removal_moves_one_per_later_wave() -> None:
    ids = [f"s-{n:03d}" for n in range(3 * WAVE_SIZE - 5)]  # room left in the last wave
    cadences = dict.fromkeys(ids, H)
    before = place(ids, cadences)
    grown = place([*ids, "z-new"], {**cadences, "z-new": H})
    assert all(grown.offset(s, H) == before.offset(s, H) for s in ids)
    assert grown.offset("z-new", H) == before.offset(ids[-1], H)  # joins the last wave
    removed = ids[10]
    rest = [s for s in ids if s != removed]
    after = place(rest, cadences)
    moved = [s for s in rest if after.offset(s, H) != before.offset(s, H)]
    assert moved == [ids[WAVE_SIZE], ids[2 * WAVE_SIZE]]  # the first of each later wave


def test_new_partitions_are_ordered_by_cadence_then_id_manual_last() -> None:
    rows = [("b", DAY), ("m", None), ("a", H), ("c", H), ("d", SIX_H)]
    assert partition_order(rows) == ["a", "c", "d", "b", "m"]


def _fresh_registry(n: int) -> tuple[list[str], dict[str, timedelta]]:
    ids = [f"src-{k:03d}" for k in range(n)]
    cadences = {sid: CADENCES[k % 3] for k, sid in enumerate(ids)}
    return partition_order((s, cadences[s]) for s in ids), cadences


def _day_of_blocks(order: list[str], cadences: dict[str, timedelta], size: int) -> int:
    """Runs of the second day of a registry that first succeeded together at T0."""
    placement = place(order, cadences, size)
    offset = {s: placement.offset(s, cadences[s]) for s in order}
    next_at = {s: next_check_at(s, cadences[s], T0, offset[s]) or T0 for s in order}
    runs = 0
    now = T0
    while now < T0 + 2 * DAY:
        now += MINUTE
        due = [s for s in order if now >= next_at[s]]
        for sid in due:
            next_at[sid] = next_check_at(sid, cadences[sid], now, offset[sid]) or now
        if due and now > T0 + DAY:
            runs += len(partition_blocks(order, due))
    return runs


def test_a_day_costs_one_run_per_wave_and_period() -> None:
    order, cadences = _fresh_registry(90)  # 30 per cadence: waves of 8 -> 4 per cadence
    assert _day_of_blocks(order, cadences, size=8) == 4 * 24 + 4 * 4 + 4 * 1


def test_cadences_of_one_wave_each_are_due_together_as_one_block() -> None:
    """The first waves of all cadences share their base: with one wave a cadence, the
    6-hourly and daily ones are due in a minute of the hourly one, next to it in partition
    order, so a day is one run an hour."""
    order, cadences = _fresh_registry(90)
    assert _day_of_blocks(order, cadences, size=30) == 24


def test_a_simulated_week_keeps_the_bounds_with_sources_added_and_removed() -> None:
    """Minute ticks for a week; every check succeeds; each day some Sources come and go
    (new ones appended to the partition order, as the registry sensor adds them), and the
    Sources are placed again, as the schedule does every tick. Every check is at least half a
    cadence and at most a cadence after the previous one, a slot holds one check, and once
    the registry is quiet the Sources of one wave are due in the same minute."""
    rng = random.Random(25)
    order, cadences = _fresh_registry(60)
    size = 8  # several waves per cadence with few Sources
    last: dict[str, datetime | None] = dict.fromkeys(order, None)
    slot_of_last: dict[str, datetime] = {}
    added = 0
    quiet_from = T0 + 4 * DAY  # no change after day 4; every wave settles within two days
    # One change a day at a random minute: a new Source's first check falls anywhere.
    changes = {T0 + d * DAY + rng.randrange(1, 1440) * MINUTE for d in range(4)}
    placement = place(order, cadences, size)
    next_at: dict[str, datetime | None] = dict.fromkeys(order)
    checks = together = 0
    now = T0
    while now < T0 + 7 * DAY:
        if now in changes:
            for sid in rng.sample(order, 3):
                order.remove(sid)
                for book in (last, cadences, next_at, slot_of_last):
                    book.pop(sid, None)  # type: ignore[attr-defined]
            new = [f"new-{added + k:03d}" for k in range(4)]
            added += len(new)
            cadences.update({s: CADENCES[rng.randrange(3)] for s in new})
            order += partition_order((s, cadences[s]) for s in new)
            last.update(dict.fromkeys(new))
            placement = place(order, cadences, size)
            next_at = {
                s: next_check_at(s, cadences[s], last[s], placement.offset(s, cadences[s]))
                for s in order
            }
        due = [s for s in order if (at := next_at[s]) is None or now >= at]
        for sid in due:
            cadence, offset = cadences[sid], placement.offset(sid, cadences[sid])
            previous, slot = last[sid], due_slot(sid, cadence, now, offset)
            if previous is not None:
                assert cadence / 2 <= now - previous <= cadence, (sid, previous, now)
                assert slot_of_last[sid] != slot  # one check per slot
            last[sid], slot_of_last[sid] = now, slot
            checks += 1
            next_at[sid] = next_check_at(sid, cadence, now, offset)
        if due and now >= quiet_from + 2 * DAY:
            waves: dict[tuple[timedelta, timedelta], set[str]] = {}
            for sid in order:
                waves.setdefault((cadences[sid], placement.offset(sid, cadences[sid])), set())
                waves[(cadences[sid], placement.offset(sid, cadences[sid]))].add(sid)
            for members in waves.values():
                assert members <= set(due) or not members & set(due), members & set(due)
                together += len(members) > 1 and members <= set(due)
        now += MINUTE
    assert checks > 60 * 7 * 3 and together > 2 * 24  # the week did check, waves together
    for sid in order:  # nobody was left behind: each checked within its last cadence
        seen = last[sid]
        assert seen is not None and now - seen <= cadences[sid]
