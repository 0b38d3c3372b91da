"""Where each Source sits on its cadence: waves of Sources that are next to each other in
partition order, so that Sources due together are one contiguous block, one run.

A run costs a fresh interpreter (docs/operations.md, "The due rule"), and the collection
schedule launches one run per contiguous block of the Sources due in a tick. With each Source
on its own sha256 offset, Sources due in the same minute lie anywhere in partition order and
nearly every check is a run of its own. Instead, the partitions of one cadence are cut, in
partition order, into waves of at most `WAVE_SIZE`; a wave shares one grid offset, so its
Sources are due in the same minute and, when the partitions of that cadence are contiguous
(new keys are added ordered by cadence: `partition_order`), make one block.

The offset of wave k is `base + cadence * spread(k)` (modulo the cadence) with spread the
bit-reversed fraction (0, 1/2, 1/4, 3/4, 1/8, ...): the waves share the cadence evenly, and a
new wave never moves the older ones; `base`, one for every cadence, is the stable offset within
a day of the first placed Source, so Radars with other registries do not all fetch at the top
of the hour, and the first waves of cadences that divide one another (hourly, 6-hourly, daily)
fall in the same minutes, where partition order makes them one block. Positions count the
eligible Sources only. A Source added later and eligible at once is a new partition at the end:
its position among the Sources of its cadence is the last, so it joins the last wave (or opens
a new one) and no other Source's wave changes. A Source that becomes eligible later (approved,
re-enabled, its cadence changed) takes its partition's place, and one that stops being
eligible or is removed frees it: the later ones shift by one, the first Source of each later
wave moving to the wave before (the first placed Source moves every wave's common base).
Either way the
bounds of the due rule hold for any offset (never sooner than half a cadence after the last
success, never later than a cadence), and a Source whose wave moved is on its new wave's slot
starts within two checks (core/plan/schedule.next_check_at).

A Source that is not (yet) a partition, or a collection decided without the partition order,
keeps its own sha256 offset (`stable_offset`): the CLI syncs the partitions before it decides,
and the schedule skips Sources that are not partitions, so both place every Source they launch
the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from fractions import Fraction

from radar_pipeline.core.plan.schedule import stable_offset

# At most this many Sources share one offset. A run's fixed cost (a fresh interpreter that
# imports Dagster, ~3 s CPU, and the `signal_checks` run after it) is paid per wave, so fewer,
# larger waves cost less: 200 Sources of three cadences are 24 runs a day at 100, 58 at 50
# (`python -m benchmarks.due_day`). A wave is one burst of fetches, paced per host as any
# run's; the registry grows by more waves.
WAVE_SIZE = 100
# The period the common base of every cadence's waves is drawn in (see `place`).
BASE_PERIOD = timedelta(days=1)


def spread(wave: int) -> Fraction:
    """The van der Corput fraction of `wave`: its bits mirrored after the binary point
    (0, 1/2, 1/4, 3/4, 1/8, 5/8, ...). The first 2**j waves split [0, 1) evenly."""
    if wave < 0:
        raise ValueError(f"wave must be >= 0, got {wave}")
    out, weight = Fraction(0), Fraction(1, 2)
    while wave:
        if wave & 1:
            out += weight
        wave >>= 1
        weight /= 2
    return out


def wave_offset(wave: int, cadence: timedelta, base: timedelta = timedelta(0)) -> timedelta:
    """The grid offset of wave `wave` of a cadence: `base` plus `spread(wave)` of the cadence,
    modulo the cadence, in whole seconds."""
    seconds = int(cadence.total_seconds())
    if seconds < 1:
        raise ValueError(f"cadence must be at least one second, got {cadence}")
    return timedelta(seconds=(int(base.total_seconds()) + int(spread(wave) * seconds)) % seconds)


@dataclass(frozen=True)
class Placement:
    """Each placed Source's grid offset, for the cadence it was placed with; any other Source
    (or a cadence changed since) on its own stable sha256 offset."""

    placed: Mapping[str, tuple[timedelta, timedelta]] = field(default_factory=dict)

    def offset(self, source_id: str, cadence: timedelta) -> timedelta:
        """The offset of the Source's due grid (see core/plan/schedule.next_check_at)."""
        entry = self.placed.get(source_id)
        if entry is not None and entry[0] == cadence:
            return entry[1]
        return stable_offset(source_id, cadence)


UNPLACED = Placement()


def place(
    order: Sequence[str], cadences: Mapping[str, timedelta], size: int = WAVE_SIZE
) -> Placement:
    """Waves by position: the Sources of `cadences` (the ones the due rule concerns), in
    partition order `order`; position p among those of the same cadence is wave p // size.
    Every cadence's waves start from one base, the stable offset within a day of the first
    placed Source (`BASE_PERIOD`), so Radars with different registries do not all fetch at the
    top of the hour, and the first wave of a longer cadence falls on a grid point of the first
    wave of every shorter one that divides it (hourly, 6-hourly, daily): Sources of several
    cadences due in the same minute, next to each other in partition order, are one block.
    Sources of `cadences` missing from `order` stay unplaced. (`size`: the benchmarks compare
    sizes.)"""
    seen: dict[timedelta, int] = {}
    base: timedelta | None = None
    placed: dict[str, tuple[timedelta, timedelta]] = {}
    for sid in order:
        cadence = cadences.get(sid)
        if cadence is None or sid in placed:
            continue
        position = seen.get(cadence, 0)
        seen[cadence] = position + 1
        if base is None:
            base = stable_offset(sid, BASE_PERIOD)
        placed[sid] = (cadence, wave_offset(position // size, cadence, base))
    return Placement(placed)


def partition_order(sources: Iterable[tuple[str, timedelta | None]]) -> list[str]:
    """The order new partition keys are added in: by cadence (shortest first), then id;
    `manual` Sources last. Sources of one cadence added together so lie together, which is
    what lets a wave be one block. Existing partitions are never re-added to reorder (that
    would drop their history): a registry that grew out of this order just makes more blocks."""
    rows = list(sources)
    return [
        sid for sid, _ in sorted(rows, key=lambda r: (r[1] is None, r[1] or timedelta(0), r[0]))
    ]
