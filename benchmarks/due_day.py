"""How many runs a day of the collection schedule launches, by due rule (no daemon; the pure
decision): `python -m benchmarks.due_day [--n 200]`.

200 Sources with mixed cadences (hourly, 6-hourly, daily, a third each, assigned in turn as
a registry that grew over time would have them), every check succeeding at the tick it is
due. Each minute's due Sources become one run per contiguous block in partition order
(`partition_blocks`, what the schedule launches). Counted over the second day (the first
burst and its spreading excluded): checks, runs, and Sources per run, for
- `offset`: today's rule, each Source on its own stable offset (core/plan/schedule);
- `waves by position`: the offset keyed by the Source's position among the Sources of its
  cadence in partition order (W waves per cadence, contiguous positions share a wave);
- `waves, cadence-grouped order`: the same, with the partitions ordered by cadence.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from radar_pipeline.core.clock import EPOCH
from radar_pipeline.core.plan.schedule import stable_offset
from radar_pipeline.defs.partitions import partition_blocks

CADENCES = (timedelta(hours=1), timedelta(hours=6), timedelta(days=1))
START = datetime(2026, 11, 2, tzinfo=UTC)
WAVES = 4  # per cadence


def _next_check(origin: datetime, cadence: timedelta, last: datetime) -> datetime:
    """core/plan/schedule.next_check_at on a given origin: the first point of the half-cadence
    grid strictly after last + cadence / 2."""
    half = cadence / 2
    threshold = last + half
    first = origin + ((threshold - origin) // cadence + 1) * cadence
    second = origin + half + ((threshold - origin - half) // cadence + 1) * cadence
    return min(first, second)


def simulate(
    order: list[str], cadence: dict[str, timedelta], offset: Callable[[str], timedelta]
) -> dict[str, float]:
    last: dict[str, datetime | None] = dict.fromkeys(order, None)
    checks = runs = 0
    minute = timedelta(minutes=1)
    now = START
    while now < START + timedelta(days=2):
        due = []
        for sid in order:
            seen = last[sid]
            if seen is None or now >= _next_check(EPOCH + offset(sid), cadence[sid], seen):
                due.append(sid)
        if due:
            blocks = partition_blocks(order, due)
            if now >= START + timedelta(days=1):
                checks += len(due)
                runs += len(blocks)
            for sid in due:
                last[sid] = now
        now += minute
    return {"checks": checks, "runs": runs, "sources_per_run": round(checks / max(runs, 1), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    ids = [f"bench-{i:03d}" for i in range(n)]
    cadence = {sid: CADENCES[i % 3] for i, sid in enumerate(ids)}

    def waves(order: list[str]) -> Callable[[str], timedelta]:
        position: dict[str, timedelta] = {}
        for c in CADENCES:
            same = [s for s in order if cadence[s] == c]
            for p, sid in enumerate(same):
                position[sid] = (p * WAVES // len(same)) * c / WAVES
        return position.__getitem__

    grouped = sorted(ids, key=lambda s: (CADENCES.index(cadence[s]), s))
    rules = {
        "offset": (ids, lambda s: stable_offset(s, cadence[s])),
        "waves by position": (ids, waves(ids)),
        "waves, cadence-grouped order": (grouped, waves(grouped)),
    }
    print(json.dumps({name: simulate(o, cadence, f) for name, (o, f) in rules.items()}, indent=2))


if __name__ == "__main__":
    main()
