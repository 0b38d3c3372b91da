"""Kill at any instant: SIGKILL `radar collect --all` after a seeded random delay, run it again.

Design invariants 4, 5, 6: no partial Signal, none written twice, a crash between file and
record is repaired by the next run, validators and watermark never ahead of persisted items.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from radar_pipeline_tests.faults.farm import (
    PHASES,
    Farm,
    RadarHome,
    check_invariants,
    collect_json,
    epoch_time,
    record_figures,
    run_phase,
    seeded,
    trials,
)
from radar_pipeline_tests.feedserver import FeedServer

SERIES = 10  # a fresh vault every SERIES trials, so first (large) collections get killed too


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_kill_at_any_instant(tmp_path: Path, feed_server: FeedServer) -> None:
    count = trials(2, 50)
    rng = seeded("kill-at-any-instant")
    farm = Farm(feed_server)
    durations: list[float] = [6.0]  # seconds a complete run takes; refined by measurement
    phases: Counter[str] = Counter()
    kills: list[tuple[float, str]] = []
    violations: list[str] = []
    home = RadarHome(tmp_path / "h0")
    for trial in range(count):
        if trial % SERIES == 0:
            home = RadarHome(tmp_path / f"h{trial}")
            farm.write_sources(home.vault)
        farm.advance()
        as_of = epoch_time(farm.epoch)
        stamp = as_of.strftime("%Y-%m-%dT%H:%M:%SZ")
        # Kill anywhere from start-up to a little past the expected end of the run.
        delay = rng.uniform(0.0, 1.15 * statistics.median(durations))
        proc = home.popen("collect", "--all", "--json", "--as-of", stamp)
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            phase = run_phase(home, stamp)
        else:
            proc.communicate()
            phase = "completed"
        phases[phase] += 1
        kills.append((round(delay, 2), phase))
        found = [
            f"trial {trial} after kill ({phase}): {x}"
            for x in check_invariants(home, farm, settled=False, expect_all_items=False)
        ]
        started = time.monotonic()
        later = (as_of + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        code, report, stderr = collect_json(home, "--all", "--as-of", later)
        elapsed = time.monotonic() - started
        if phase in ("startup", "run-start"):  # the repeat did the whole run's work
            durations.append(elapsed)
        if code != 0 or report is None or report["failed"] or stderr.strip():
            found.append(f"trial {trial}: repeat run exit {code}: {stderr.strip()[-300:]}")
        found += [
            f"trial {trial} after repeat: {x}"
            for x in check_invariants(home, farm, settled=True, expect_all_items=True)
        ]
        violations += found
        record_figures("kill-trial", {"trial": trial, "delay_s": delay, "phase": phase, "v": found})
    record_figures(
        "kill",
        {
            "trials": count,
            "violations": violations,
            "phases": {p: phases[p] for p in PHASES if phases[p]},
            "kill_delays_s": sorted(kills),
            "median_run_s": round(statistics.median(durations), 2),
        },
    )
    assert not violations, "\n".join(violations[:30])
