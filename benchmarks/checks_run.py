"""The checks run of an unchanged re-run, two `radar` commands side by side.

    python -m benchmarks.checks_run RADAR_A RADAR_B [N] [REPEAT]   (default: 100 Sources, 3)

For each command (another checkout's `radar`, say, against this one's): a fresh workspace of N
farm Sources (32 origins, 100 ms) and one cold `radar collect --all`; then REPEAT unchanged
re-runs, A and B alternating. Each re-run's process wall (wait4) and, read from its Dagster
instance, the `signal_checks` run's wall (run start to end) and its steps (count, summed
durations, and those of the checks on `signals` alone). Prints the samples and the medians
as one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import dagster as dg

from benchmarks.farm import FeedFarm
from benchmarks.measure import run_child
from benchmarks.scenarios import Workspace, json_or_error, write_sources
from radar_pipeline.defs.collection.checks import SIGNAL_CHECK_SPECS

# The steps of the checks on `signals`: one op each before, one op for all of them after.
SIGNAL_STEPS = {"signal_evidence"} | {f"signals_{spec.name}" for spec in SIGNAL_CHECK_SPECS}


def _took(step: Any) -> float:
    return float((step.end_time or 0.0) - (step.start_time or 0.0))


def checks_run_figures(home: Path) -> dict[str, Any]:
    """The latest `signal_checks` run of the instance in `home`: wall, steps, step time, events;
    and the wall of the collection run before it."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(job_name="signal_checks"), limit=1)
        [collect] = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"), limit=1)
        stats, collected = (
            instance.get_run_stats(run.run_id),
            instance.get_run_stats(collect.run_id),
        )
        steps = instance.get_run_step_stats(run.run_id)
        evaluations = instance.all_logs(
            run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        events = instance.all_logs(run.run_id)
    return {
        "checks_wall_s": round((stats.end_time or 0.0) - (stats.start_time or 0.0), 3),
        "steps": len(steps),
        "step_s": round(sum(_took(s) for s in steps), 3),
        "signals_step_s": round(sum(_took(s) for s in steps if s.step_key in SIGNAL_STEPS), 3),
        "evaluations": len(evaluations),
        "events": len(events),
        "collect_wall_s": round((collected.end_time or 0.0) - (collected.start_time or 0.0), 3),
    }


def rerun(radar: Path, ws: Workspace) -> dict[str, Any]:
    m = run_child([str(radar), "collect", "--all", "--json"], ws.env())
    report = json_or_error(m, f"{radar} re-run")
    if report.get("itemsParsed", 0):
        raise RuntimeError("a re-run parsed items: not an unchanged re-run")
    return {
        "wall_s": round(m.wall_s, 3),
        "cpu_s": round(m.cpu_s, 3),
        **checks_run_figures(ws.dagster_home),
    }


def main(argv: list[str]) -> int:
    radars = [Path(argv[0]), Path(argv[1])]
    n = int(argv[2]) if len(argv) > 2 else 100
    repeat = int(argv[3]) if len(argv) > 3 else 3
    farm = FeedFarm(n, latency_s=0.1).start()
    samples: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    try:
        with tempfile.TemporaryDirectory(prefix="checks-run-") as tmp:
            spaces = [Workspace(Path(tmp) / side) for side in "AB"]
            for radar, ws in zip(radars, spaces, strict=True):
                write_sources(ws.vault, farm.urls())
                cold = run_child([str(radar), "collect", "--all", "--json"], ws.env())
                json_or_error(cold, f"{radar} cold")
            for _ in range(repeat):
                for side, radar, ws in zip("AB", radars, spaces, strict=True):
                    samples[side].append(rerun(radar, ws))
                    print(side, json.dumps(samples[side][-1]), file=sys.stderr, flush=True)
    finally:
        farm.stop()
    medians = {
        side: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
        for side, runs in samples.items()
    }
    print(json.dumps({"n": n, "repeat": repeat, "medians": medians, "samples": samples}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
