"""Overlapping collections: 4 `radar collect --all` plus one `--source` at once, repeated.

Invariant 4 (docs/architecture.md) (no Signal written twice, even with two processes) and the
store's single writer rule: no DuckDB lock error escapes, every process exits 0 (or 2 with
classed failures) and a Source another process holds is reported `skipped` with reason `locked`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from radar_pipeline_tests.faults.farm import (
    Farm,
    RadarHome,
    check_invariants,
    epoch_time,
    judge_cli_collection,
    record_figures,
    trials,
)
from radar_pipeline_tests.feedserver import FeedServer

ALL_PROCESSES = 4
SINGLE = "farm-03"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_overlapping_collections(tmp_path: Path, feed_server: FeedServer) -> None:
    rounds = trials(1, 10)
    farm = Farm(feed_server)
    home = RadarHome(tmp_path / "h")
    farm.write_sources(home.vault)
    violations: list[str] = []
    outcomes: Counter[str] = Counter()
    exits: Counter[int] = Counter()
    for rnd in range(rounds):
        farm.advance()
        stamp = epoch_time(farm.epoch).strftime("%Y-%m-%dT%H:%M:%SZ")
        argv = [("collect", "--all", "--json", "--as-of", stamp)] * ALL_PROCESSES
        argv.append(("collect", "--source", SINGLE, "--json", "--as-of", stamp))
        procs = [home.popen(*a) for a in argv]
        for n, proc in enumerate(procs):
            violations += judge_cli_collection(
                proc, f"round {rnd} process {n}", exits, outcomes, timeout=900
            )
        violations += [
            f"round {rnd}: {x}"
            for x in check_invariants(home, farm, settled=True, expect_all_items=True)
        ]
    record_figures(
        "overlap",
        {
            "rounds": rounds,
            "processes": rounds * (ALL_PROCESSES + 1),
            "exits": dict(exits),
            "source_outcomes": dict(outcomes),
            "violations": violations,
        },
    )
    assert not violations, "\n".join(violations[:30])
