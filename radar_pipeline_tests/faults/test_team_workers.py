"""Two workers of the team profile, one SIGKILLed at a random instant, then a clean collection.

Design invariant 4 across hosts: two `radar collect --all` processes, each with its own Dagster
home, on one vault and one PostgreSQL store (`RADAR_STORE_URL`), collect the same farm Sources
at once; one of them (seeded: which one, and when) is SIGKILLed. The other must end as any
overlapping collection does (exit 0 or 2, a Source the other held `skipped`, `locked`); the
dead worker's session must take its advisory locks with it (none left in pg_locks); then a
clean collection in the dead worker's home must leave every item exactly one Signal file and
one index row, every check accounted for, and no DuckDB file (the store is the server).

The store: RADAR_TEST_STORE_URL (`make test-postgres`), or under RADAR_FAULTS_FULL=1 (`make
faults`) a throwaway server started here (radar_pipeline_tests/pgserver.py). `make test`
starts no server: it skips this case unless RADAR_TEST_STORE_URL is set.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline_tests.conftest import empty_postgres_store, store_url_under_test
from radar_pipeline_tests.faults.farm import (
    FULL,
    PHASES,
    Farm,
    RadarHome,
    check_invariants,
    collect_json,
    epoch_time,
    judge_cli_collection,
    record_figures,
    run_phase,
    seeded,
    trials,
)
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.pgserver import NO_BINARIES, server_binaries, throwaway_server

WORKERS = ("a", "b")
LOCKS_GONE_S = 30.0  # the server ends a dead client's session when its socket closes


@pytest.fixture(scope="module")
def team_store() -> Iterator[str]:
    """The PostgreSQL store's URL: RADAR_TEST_STORE_URL, or a throwaway server's under
    RADAR_FAULTS_FULL=1."""
    url = store_url_under_test()
    if url:
        yield url
        return
    if server_binaries() is None:
        pytest.skip(NO_BINARIES)
    if not FULL:
        pytest.skip("needs a PostgreSQL store: `make test-postgres`, or `make faults` starts one")
    with throwaway_server() as server:  # any other failure to start one is an error
        yield server.new_database("radar_store")


def advisory_locks(url: str) -> list[tuple[Any, ...]]:
    """Every advisory lock any session holds in the store's database (Source locks, the
    migration lock; a transaction's turn lock while it runs)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        return con.execute(
            "SELECT classid, objid, pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()


def locks_left(url: str) -> tuple[list[tuple[Any, ...]], float]:
    """The advisory locks still held after waiting up to LOCKS_GONE_S, and the wait."""
    started = time.monotonic()
    while (held := advisory_locks(url)) and time.monotonic() - started < LOCKS_GONE_S:
        time.sleep(0.1)
    return held, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_two_workers_one_killed(tmp_path: Path, feed_server: FeedServer, team_store: str) -> None:
    count = trials(2, 12)
    rng = seeded("two-workers-one-killed")
    empty_postgres_store(team_store)
    farm = Farm(feed_server)
    team = RadarHome(tmp_path / "team", store_url=team_store)
    farm.write_sources(team.vault)
    workers = {name: team.as_worker(name) for name in WORKERS}
    durations: list[float] = [10.0]  # seconds two overlapping runs take; refined by measurement
    phases: Counter[str] = Counter()
    exits: Counter[int] = Counter()
    outcomes: Counter[str] = Counter()
    lock_waits: list[float] = []
    violations: list[str] = []
    for trial in range(count):
        farm.advance()
        as_of = epoch_time(farm.epoch)
        stamp = as_of.strftime("%Y-%m-%dT%H:%M:%SZ")
        victim = rng.choice(WORKERS)
        survivor = next(w for w in WORKERS if w != victim)
        delay = rng.uniform(0.0, 1.15 * statistics.median(durations))
        started = time.monotonic()
        procs = {
            n: w.popen("collect", "--all", "--json", "--as-of", stamp) for n, w in workers.items()
        }
        time.sleep(delay)
        if procs[victim].poll() is None:
            os.killpg(procs[victim].pid, signal.SIGKILL)
            procs[victim].communicate()
            phase = run_phase(workers[victim], stamp)
        else:
            procs[victim].communicate()
            phase = "completed"
        phases[phase] += 1
        where = f"trial {trial} ({victim} killed, {phase})"
        found = judge_cli_collection(procs[survivor], f"{where}: {survivor}", exits, outcomes, 900)
        durations.append(time.monotonic() - started)
        held, waited = locks_left(team_store)
        lock_waits.append(round(waited, 2))
        found += [f"{where}: advisory lock left by the dead worker: {lock}" for lock in held]
        found += [
            f"{where}, after the kill: {x}"
            for x in check_invariants(team, farm, settled=False, expect_all_items=False)
        ]
        later = (as_of + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
        code, report, stderr = collect_json(workers[victim], "--all", "--as-of", later)
        if code != 0 or report is None or report["failed"] or stderr.strip():
            found.append(f"{where}: clean collection exit {code}: {stderr.strip()[-300:]}")
        found += [
            f"{where}, after the clean collection: {x}"
            for x in check_invariants(team, farm, settled=True, expect_all_items=True)
        ]
        found += [f"{where}: advisory lock left: {lock}" for lock in advisory_locks(team_store)]
        if team.db.exists():
            found.append(f"{where}: a DuckDB file appeared beside the PostgreSQL store")
        violations += found
        record_figures(
            "team-kill-trial",
            {"trial": trial, "victim": victim, "delay_s": delay, "phase": phase, "v": found},
        )
    record_figures(
        "team-kill",
        {
            "trials": count,
            "violations": violations,
            "phases": {p: phases[p] for p in PHASES if phases[p]},
            "survivor_exits": dict(exits),
            "survivor_outcomes": dict(outcomes),
            "locks_gone_after_s": sorted(lock_waits),
            "median_overlap_s": round(statistics.median(durations), 2),
        },
    )
    assert not violations, "\n".join(violations[:30])
