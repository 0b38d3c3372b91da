"""Overlap with the Dagster daemon: runs the due schedule launches (inside a real `dagster dev`)
over the farm's 10 Sources while `radar collect` processes run at once on the same vault,
DuckDB file and instance. Each round is a new epoch: dagster dev starts with RADAR_AS_OF at the
epoch, its due schedule requests one run over the block of the 10 due Sources on its first
tick, and as soon as that run has started four CLI collections start, one every
`CLI_STAGGER_S` (3 `--all`, 1 `--source farm-03`), while its fetches are in flight.

Invariants as in test_overlap: no DuckDB lock error escapes (not in the CLI's stderr, not in
any run's event log), no run fails (except by naming the Sources that failed, after its
commit), no duplicate Signal, every served item is a Signal once,
every CLI exits 0 (or 2 with classed failures) and a Source held elsewhere is `locked`.
"""

from __future__ import annotations

import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline_tests.daemonkit import DagsterDev, wait_for, write_instance_yaml
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

CLI_ARGS = [("--all",)] * 3 + [("--source", "farm-03")]
FEED_LATENCY_S = 1.0  # every feed answers after 1 s, so collections stay in fetch a while
# DuckDB's words, and the StoreLocked line the store translates them into (core/errors.py).
LOCK_WORDS = (
    "Could not set lock",
    "Conflicting lock",
    "IOException",
    "database is locked",
    "held by PID",
    "held by another process",
)
SCHEDULED = "schedule"  # the radar/trigger tag of the due schedule's runs
CLI_STAGGER_S = 0.5  # between CLI starts: they overlap the scheduled run and one another


def round_runs(dev: DagsterDev, since: float) -> list[Any]:
    """Run records created since `since` (epoch s): the daemon's and the CLI's."""
    with dev.instance() as instance:
        records = instance.get_run_records()
    return [r for r in records if r.create_timestamp.timestamp() >= since]


def finished_round(dev: DagsterDev, since: float) -> list[Any] | None:
    """The round's run records once the due schedule's run exists and every run ended."""
    records = round_runs(dev, since)
    sensor = sum(r.dagster_run.tags.get("radar/trigger") == SCHEDULED for r in records)
    if sensor < 1 or not all(r.dagster_run.is_finished for r in records):
        return None
    return records


def started_sensor_runs(dev: DagsterDev, since: float, at_least: int) -> bool:
    started = sum(
        1
        for r in round_runs(dev, since)
        if r.dagster_run.tags.get("radar/trigger") == SCHEDULED and r.start_time is not None
    )
    return started >= at_least


def run_findings(dev: DagsterDev, run_id: str) -> tuple[dict[str, int], list[str]]:
    """(the run's collection report counts, problems found in its event log). A run that
    failed because Sources failed (named in its step failure, after its commit) is no problem."""
    import dagster as dg

    from radar_pipeline.defs.collection.config import failed_sources_of

    counts: dict[str, int] = {}
    problems: list[str] = []
    with dev.instance() as instance:
        by_sources = failed_sources_of(instance, run_id) is not None
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            text = entry.message or ""
            if any(w in text for w in LOCK_WORDS):
                problems.append(f"lock error in run {run_id}: {text[:200]}")
            if event is None:
                continue
            if not by_sources and event.event_type in (
                dg.DagsterEventType.STEP_FAILURE,
                dg.DagsterEventType.RUN_FAILURE,
            ):
                problems.append(f"run {run_id}: {event.event_type.value} {text[:200]}")
            observation = entry.asset_observation
            if observation is not None and observation.partition is None:
                meta = observation.metadata
                for key in ("passed", "failed", "skipped", "created"):
                    counts[key] = int(getattr(meta[key], "value", meta[key]))
    return counts, problems


def failed_by_sources(dev: DagsterDev, run_id: str) -> bool:
    from radar_pipeline.defs.collection.config import failed_sources_of

    with dev.instance() as instance:
        return failed_sources_of(instance, run_id) is not None


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_daemon_runs_overlap_cli_collections(tmp_path: Path, feed_server: FeedServer) -> None:
    rounds = trials(1, 5)
    farm = Farm(feed_server)
    for route in feed_server.routes.values():
        route.latency_s = FEED_LATENCY_S
    home = RadarHome(tmp_path / "h")
    farm.write_sources(home.vault)
    write_instance_yaml(home.home)
    # The partitions exist before the daemon starts (as after any earlier `radar collect`), so
    # the due schedule's very first tick requests every Source.
    import dagster as dg

    with dg.DagsterInstance.from_config(str(home.home)) as instance:
        instance.add_dynamic_partitions("sources", [s.source_id for s in farm.sources])
    violations: list[str] = []
    run_statuses: Counter[str] = Counter()
    run_totals: Counter[str] = Counter()
    cli_outcomes: Counter[str] = Counter()
    exits: Counter[int] = Counter()
    round_s: list[float] = []
    for rnd in range(rounds):
        farm.advance()
        stamp = epoch_time(farm.epoch).strftime("%Y-%m-%dT%H:%M:%SZ")
        started = time.time()
        dev = DagsterDev(
            home.home, {**home.environ(), "RADAR_AS_OF": stamp}, tmp_path / f"dev-{rnd}.log"
        )
        try:
            dev.start()
            # The CLIs start once the scheduled block run has started: its fetches (1 s each)
            # and the CLI collections overlap.
            wait_for(
                "the scheduled run to start",
                partial(started_sensor_runs, dev, started, 1),
                180,
                0.2,
            )
            procs = []
            for args in CLI_ARGS:
                procs.append(home.popen("collect", "--json", "--as-of", stamp, *args))
                time.sleep(CLI_STAGGER_S)
            for n, proc in enumerate(procs):
                violations += judge_cli_collection(
                    proc, f"round {rnd} CLI {n}", exits, cli_outcomes, timeout=600
                )
            # Every run of the round (the due schedule's, the freshness sensor's check runs, the
            # CLI's) must be finished before Ctrl-C, which would fail a run still going.
            records = wait_for(
                "every run of the round to finish",
                partial(finished_round, dev, started),
                600,
            )
            for record in records:
                run = record.dagster_run
                kind = run.tags.get("radar/trigger") or run.job_name
                run_statuses[f"{kind}:{run.status.value}"] += 1
                counts, problems = run_findings(dev, run.run_id)
                if run.tags.get("radar/trigger") == SCHEDULED:
                    run_totals.update(counts)
                violations += [f"round {rnd}: {p}" for p in problems]
                failed_ok = run.status.value == "FAILURE" and failed_by_sources(dev, run.run_id)
                if run.status.value != "SUCCESS" and not failed_ok:
                    violations.append(f"round {rnd}: run {run.run_id} ({kind}) {run.status.value}")
        finally:
            dev.stop()
        violations += [f"round {rnd}: outlived Ctrl-C: {dev.survivors}"] if dev.survivors else []
        violations += [
            f"round {rnd}: {x}"
            for x in check_invariants(home, farm, settled=True, expect_all_items=True)
        ]
        round_s.append(round(time.time() - started, 1))
    record_figures(
        "daemon-overlap",
        {
            "rounds": rounds,
            "sensor_runs": dict(run_statuses),
            "sensor_run_sources": dict(run_totals),
            "cli_processes": rounds * len(CLI_ARGS),
            "cli_exits": dict(exits),
            "cli_source_outcomes": dict(cli_outcomes),
            "round_s": round_s,
            "violations": violations,
        },
    )
    assert not violations, "\n".join(violations[:30])
