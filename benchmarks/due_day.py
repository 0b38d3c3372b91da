"""How many runs a day of the collection schedule launches, by due rule (no daemon; the pure
decision): `python -m benchmarks.due_day [--n 200]`.

N Sources with mixed cadences (hourly, 6-hourly, daily, a third each, assigned in turn as a
registry that grew over time would have them), every check succeeding at the tick it is due.
Each minute's due Sources become one run per contiguous block in partition order
(`partition_blocks`, what the schedule launches). The decisions are the real rule's
(`is_due` on the grids `place` gives, partitions added in `partition_order`); counted over the
second day (the first burst and its spreading excluded): checks, runs, Sources per run and the
largest run, for
- `offset`: the former rule, each Source on its own sha256 offset, partitions in file order;
- `waves`: the due rule, partitions added by cadence then id (a registry imported at once);
- `waves, file order`: the due rule on partitions added in file order (an instance that
  predates the cadence order: its partitions are never reordered);
- `waves, grown`: the due rule on a registry that grew: half imported at once, then the
  rest added five at a time (each batch in cadence order at the end);
- `waves of 25`, `waves of 50`: the due rule with waves of at most 25 or 50 Sources instead
  of `WAVE_SIZE`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from radar_pipeline.core.plan.schedule import is_due
from radar_pipeline.core.plan.waves import UNPLACED, WAVE_SIZE, Placement, partition_order, place
from radar_pipeline.defs.partitions import partition_blocks

CADENCES = (timedelta(hours=1), timedelta(hours=6), timedelta(days=1))
START = datetime(2026, 11, 2, tzinfo=UTC)


def simulate(
    order: Sequence[str], cadence: dict[str, timedelta], placement: Placement
) -> dict[str, float]:
    """A minute-by-minute replay of two days; the second day's checks and runs."""
    last: dict[str, datetime | None] = dict.fromkeys(order, None)
    offset = {sid: placement.offset(sid, cadence[sid]) for sid in order}
    checks = runs = largest = 0
    now = START
    while now < START + timedelta(days=2):
        due = [s for s in order if is_due(s, cadence[s], last[s], now, offset=offset[s])]
        if due:
            blocks = partition_blocks(order, due)
            if now >= START + timedelta(days=1):
                checks += len(due)
                runs += len(blocks)
                largest = max(largest, *map(len, blocks))
            for sid in due:
                last[sid] = now
        now += timedelta(minutes=1)
    return {
        "checks": checks,
        "runs": runs,
        "sources_per_run": round(checks / max(runs, 1), 2),
        "largest_run": largest,
    }


def grown(ids: list[str], cadence: dict[str, timedelta], batch: int = 5) -> list[str]:
    """Partition order of a registry half imported at once, then grown `batch` at a time."""
    first = len(ids) // 2
    order = partition_order((s, cadence[s]) for s in ids[:first])
    for k in range(first, len(ids), batch):
        order += partition_order((s, cadence[s]) for s in ids[k : k + batch])
    return order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    ids = [f"bench-{i:03d}" for i in range(n)]
    cadence = {sid: CADENCES[i % 3] for i, sid in enumerate(ids)}
    fresh = partition_order((s, cadence[s]) for s in ids)
    later = grown(ids, cadence)
    rules = {
        "offset": (ids, UNPLACED),
        "waves": (fresh, place(fresh, cadence)),
        "waves, file order": (ids, place(ids, cadence)),
        "waves, grown": (later, place(later, cadence)),
        "waves of 25": (fresh, place(fresh, cadence, size=25)),
        "waves of 50": (fresh, place(fresh, cadence, size=50)),
    }
    out = {name: simulate(o, cadence, p) for name, (o, p) in rules.items()}
    print(json.dumps({"sources": n, "wave_size": WAVE_SIZE, "rules": out}, indent=2))


if __name__ == "__main__":
    main()
