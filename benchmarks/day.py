"""Scenario 10, `day`: a simulated day of N Sources with mixed cadences (hourly, 6-hourly,
daily, assigned in turn) through the real `dagster-daemon`, against the same checks done by
`radar collect`.

What is real and what stands in. The daemon's scheduler ticks once per real minute, and a code
server reads `RADAR_AS_OF` once when it starts, so a day on the real scheduler takes a day, and
a restart per simulated minute would take hours. So the real `dagster-daemon` (the queued run
coordinator, the DefaultRunLauncher and its run workers, the sensors: registry, freshness,
failure, and the checks after each launch) runs the whole time, and the harness stands in for
the scheduler's clock only:
- before the daemon starts, `dagster schedule stop due_sources_schedule` (the public CLI), so
  the daemon's scheduler never evaluates it; the other schedules keep running on the daemon;
- at each simulated minute T the harness evaluates the real `due_sources_schedule` with
  Dagster's public test API (`build_schedule_context(instance=..., scheduled_execution_time=T,
  repository_def=...)`, `evaluate_tick`), `RADAR_AS_OF=T` in its own environment for that
  evaluation only. A SkipReason costs only the evaluation;
- each RunRequest is submitted unchanged (run config and tags, plus the `dagster/run_key` and
  `dagster/schedule_name` tags the daemon's scheduler adds) to the instance's queue through
  `dagster_graphql.DagsterGraphQLClient.submit_job_execution` against a `dagster-webserver`
  the harness starts on 127.0.0.1 (one submission is a GraphQL call of a fraction of a second;
  `dagster job launch` is a process that loads the code location, several seconds each);
- the daemon dequeues and launches the runs; the harness waits until they ended, the
  `signal_checks` run the sensor requests after the launch's last run ended (at most
  `CHECKS_WAIT_S` after it), and no run is in flight; then the next minute.
The daemon's own sensors keep the clock they started with (`RADAR_AS_OF` = the day's start):
the collections and their checks date themselves by the run config's `as_of` (the daily prune
ticks at 00:30 of the real clock, so a simulated day holds no prune run), but
the freshness sensor judges lateness at the start (in a day where every Source is collected on
time, it flips once, after the first burst).

The twin: a vault, DuckDB file and DAGSTER_HOME of their own, where at each minute in which
the schedule launched anything the harness runs `radar collect --as-of T --json` (plain due
mode, its own checks run included). Its processes' CPU is summed (wait4 per process).

Counted: the daemon's process group: `dagster-daemon run` and the long-lived code server it
reads the definitions from (`benchmarks.scheduled.start_daemon`), os.wait4 of both after
Ctrl-C, so every run worker the code server launched and reaped too; start-up and the real
minutes it idled while the harness evaluated, submitted and ran the twin included. Not
counted, reported apart: the harness's evaluations (thread CPU of the evaluating thread) and
the webserver's group (submission; it starts code servers of its own from the repository's
workspace); together they stand for what the scheduler would spend. The daemon's idle CPU per
real hour (sampled at the end) says what a real day adds: there the daemon idles 24 hours,
here minutes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

import dagster as dg
from dagster_graphql import DagsterGraphQLClient

from benchmarks.measure import REPO, run_child
from benchmarks.scenarios import Context, Outcome, Workspace, json_or_error, write_sources
from benchmarks.scheduled import (
    Daemon,
    covered,
    prepare_home,
    start_daemon,
    start_in_session,
    stop_and_reap,
    stop_daemon,
)
from benchmarks.soak import group_cpu_s, size_of
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import AS_OF_ENV
from radar_pipeline.defs import tags
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, config_of
from radar_pipeline.defs.collection.jobs import SIGNAL_CHECKS_JOB_NAME
from radar_pipeline.defs.collection.schedules import IN_FLIGHT, due_sources_schedule
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import RadarResource
from radar_pipeline_tests.daemonkit import free_port

CADENCES = ("PT1H", "PT6H", "P1D")
BIN = Path(sys.executable).parent
WORKSPACE = str(REPO / "workspace.yaml")
SCHEDULE_NAME_TAG = "dagster/schedule_name"  # what the daemon's scheduler adds to its runs
STARTUP_DEADLINE_S = 300  # webserver answering, registry sensor adding the partitions
STEP_DEADLINE_S = 900  # a loaded shared machine queues runs for minutes
CHECKS_WAIT_S = 180  # the checks sensor ticks every 30 s; a launch that committed nothing has none
IDLE_SAMPLE_S = 60
RETENTION_DAYS = 30  # the default RADAR_RUN_RETENTION_DAYS, for the year's arithmetic
ENDED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


@dataclass
class Tally:
    """What the simulated day did, as it went."""

    minutes: int = 0
    launching_minutes: int = 0
    submitted: list[str] = field(default_factory=list)  # collection run ids
    eval_cpu_s: float = 0.0
    eval_wall_s: float = 0.0
    submit_wall_s: float = 0.0
    settle_wall_s: float = 0.0
    launches_without_checks: int = 0
    cli_cpu_s: float = 0.0
    cli_wall_s: float = 0.0
    cli_checks: int = 0
    cli_failed: int = 0
    db_after_first: int = 0
    first_checks: int = 0  # Sources the first launch covered (a never-checked burst)
    daemon_wall_s: float = 0.0  # from the daemon's start to the end of the day
    first_launch: datetime | None = None


def day(ctx: Context, n: int, hours: int) -> Outcome:
    """10. A simulated day (`hours` simulated hours) of `n` Sources through the real daemon
    vs `radar collect` at the same minutes: CPU per Source check of each (target <= 2x),
    runs, bytes per run, DAGSTER_HOME and DuckDB sizes, and a year on disk."""
    out = Outcome()
    name = f"10 day N={n} {hours} h"
    ws, twin = ctx.workspace(f"day-{n}"), ctx.workspace(f"day-cli-{n}")
    urls = ctx.farm.urls(n)
    for target in (ws, twin):
        write_sources(target.vault, urls, cadences=CADENCES)
    start = ctx.farm.now.replace(second=0, microsecond=0)
    env = {**ws.env(), AS_OF_ENV: format_utc(start)}
    tally = Tally()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        _stop_due_schedule(env, log)
        daemon = start_daemon(env, log)
        daemon_started = time.perf_counter()
        web = None
        idle_cpu = 0.0
        try:
            port = free_port()
            argv = [str(BIN / "dagster-webserver"), "-w", WORKSPACE, "-h", "127.0.0.1"]
            web = start_in_session([*argv, "-p", str(port)], env, log)
            _simulate(ctx.radar, ws, twin, start, hours, n, port, daemon, tally)
            tally.daemon_wall_s = time.perf_counter() - daemon_started
            idle_cpu = _idle_cpu(daemon.pgid)
        finally:
            web_usage = stop_and_reap(web) if web is not None else None
            usage = stop_daemon(daemon)
        wall = time.perf_counter() - started
        if tally.first_launch is None:
            log.seek(0)
            tail = log.read().decode("utf-8", "replace")[-2000:]
            raise RuntimeError(f"the simulated day launched nothing; log tail: {tail}")
    # The idle sample came after the day: not the day's.
    daemon_cpu = usage.ru_utime + usage.ru_stime - idle_cpu
    idle_cpu_per_h = idle_cpu * 3600 / IDLE_SAMPLE_S
    web_cpu = web_usage.ru_utime + web_usage.ru_stime if web_usage is not None else 0.0
    _report(out, name, ws, twin, tally, hours, wall, daemon_cpu, web_cpu, idle_cpu_per_h)
    return out


def _stop_due_schedule(env: dict[str, str], log: IO[bytes]) -> None:
    """`dagster schedule stop due_sources_schedule`: the harness is its clock from now on."""
    prepare_home(env)
    subprocess.run(
        [str(BIN / "dagster"), "schedule", "stop", due_sources_schedule.name, "-w", WORKSPACE],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        check=True,
        timeout=STARTUP_DEADLINE_S,
    )


def _simulate(
    radar_command: Path,
    ws: Workspace,
    twin: Workspace,
    start: datetime,
    hours: int,
    n: int,
    port: int,
    daemon: Daemon,
    tally: Tally,
) -> None:
    from radar_pipeline.definitions import defs

    repository = defs.get_repository_def()
    radar = RadarResource(vault=str(ws.vault), db=str(ws.db))
    with dg.DagsterInstance.from_config(str(ws.dagster_home)) as instance:
        _wait_for_partitions(instance, n, daemon)
        client = _client_when_up(port)
        for minute in range(hours * 60):
            when = start + timedelta(minutes=minute)
            tally.minutes += 1
            requests = _evaluate(instance, repository, radar, when, tally)
            if not requests:
                continue
            tally.launching_minutes += 1
            tally.first_launch = tally.first_launch or when
            t0 = time.perf_counter()
            ids = [_submit(client, r) for r in requests]
            tally.submit_wall_s += time.perf_counter() - t0
            tally.submitted += ids
            t0 = time.perf_counter()
            if not _settle(instance, ids, daemon):
                tally.launches_without_checks += 1
            tally.settle_wall_s += time.perf_counter() - t0
            _twin_collect(radar_command, twin, when, tally)
            if tally.launching_minutes == 1:
                tally.db_after_first = ws.db.stat().st_size
                tally.first_checks = sum(len(_sources(r)) for r in requests)
            _say(
                f"    {format_utc(when)}: {len(requests)} run(s), {len(tally.submitted)} so far "
                f"({tally.launching_minutes} launching minutes of {tally.minutes})"
            )


@contextlib.contextmanager
def _clock(when: datetime) -> Iterator[None]:
    """`RADAR_AS_OF` in the harness's own environment for one evaluation of the schedule
    (`schedule_clock` reads it through Settings.from_env)."""
    before = os.environ.get(AS_OF_ENV)
    os.environ[AS_OF_ENV] = format_utc(when)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(AS_OF_ENV, None)
        else:
            os.environ[AS_OF_ENV] = before


def _evaluate(
    instance: dg.DagsterInstance,
    repository: dg.RepositoryDefinition,
    radar: RadarResource,
    when: datetime,
    tally: Tally,
) -> list[dg.RunRequest]:
    """The real schedule's tick at the simulated minute `when` (its CPU: this thread's)."""
    cpu, wall = time.thread_time(), time.perf_counter()
    with _clock(when):
        context = dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=when,
            repository_def=repository,
            resources={"radar": radar},
        )
        data = due_sources_schedule.evaluate_tick(context)
    tally.eval_cpu_s += time.thread_time() - cpu
    tally.eval_wall_s += time.perf_counter() - wall
    return list(data.run_requests or [])


def _sources(request: dg.RunRequest) -> list[str]:
    config = config_of(request.run_config)
    return config.sources if config is not None else []


def _submit(client: DagsterGraphQLClient, request: dg.RunRequest) -> str:
    """Queue one run as the daemon's scheduler would: its config and tags as requested."""
    run_tags = {
        **request.tags,
        tags.RUN_KEY: str(request.run_key),
        SCHEDULE_NAME_TAG: due_sources_schedule.name,
    }
    return client.submit_job_execution(
        COLLECT_JOB_NAME, run_config=request.run_config, tags=run_tags
    )


def _settle(instance: dg.DagsterInstance, run_ids: list[str], daemon: Daemon) -> bool:
    """Until the runs ended, the checks run after them ended (False: none came within
    CHECKS_WAIT_S) and no run of any job is in flight."""
    deadline = time.monotonic() + STEP_DEADLINE_S
    collections_ended: float | None = None
    checked = False
    while time.monotonic() < deadline:
        if (exited := daemon.exited()) is not None:
            raise RuntimeError(exited)
        if collections_ended is None:
            runs = instance.get_runs(dg.RunsFilter(run_ids=run_ids))
            if len(runs) == len(run_ids) and all(r.status in ENDED for r in runs):
                collections_ended = time.monotonic()
        if collections_ended is not None and not checked:
            checks = instance.get_runs(dg.RunsFilter(job_name=SIGNAL_CHECKS_JOB_NAME), limit=20)
            checked = any(
                r.tags.get(tags.AFTER_RUN) in run_ids and r.status in ENDED for r in checks
            )
            if not checked and time.monotonic() - collections_ended > CHECKS_WAIT_S:
                return False
        if checked and not instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT), limit=1):
            return True
        time.sleep(1)
    raise RuntimeError(f"runs {run_ids} did not settle within {STEP_DEADLINE_S} s")


def _twin_collect(radar_command: Path, twin: Workspace, when: datetime, tally: Tally) -> None:
    """`radar collect --as-of T` (due mode) on the twin: the same minute's checks by the CLI."""
    argv = [str(radar_command), "collect", "--as-of", format_utc(when), "--json"]
    m = run_child(argv, twin.env())
    report = json_or_error(m, "radar collect")
    tally.cli_cpu_s += m.cpu_s
    tally.cli_wall_s += m.wall_s
    tally.cli_checks += int(report.get("passed", 0)) + int(report.get("failed", 0))
    tally.cli_failed += int(report.get("failed", 0))


def _wait_for_partitions(instance: dg.DagsterInstance, n: int, daemon: Daemon) -> None:
    """Until the daemon's registry sensor has made every Source a partition."""
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while len(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)) < n:
        if (exited := daemon.exited()) is not None:
            raise RuntimeError(exited)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the registry sensor did not add {n} partitions in time")
        time.sleep(1)


def _client_when_up(port: int) -> DagsterGraphQLClient:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        url = f"http://127.0.0.1:{port}/server_info"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=5):
            return DagsterGraphQLClient("127.0.0.1", port_number=port)
        time.sleep(1)
    raise RuntimeError(f"dagster-webserver did not answer on port {port}")


def _idle_cpu(pgid: int) -> float:
    """The daemon group's CPU over `IDLE_SAMPLE_S` with nothing to launch (its ticks and
    sensors alone)."""
    before = group_cpu_s(pgid)
    time.sleep(IDLE_SAMPLE_S)
    return group_cpu_s(pgid) - before


def _report(
    out: Outcome,
    name: str,
    ws: Workspace,
    twin: Workspace,
    tally: Tally,
    hours: int,
    wall: float,
    daemon_cpu: float,
    web_cpu: float,
    idle_cpu_per_h: float,
) -> None:
    with dg.DagsterInstance.from_config(str(ws.dagster_home)) as instance:
        records = [r.dagster_run for r in instance.get_run_records()]
    jobs: dict[str, int] = {}
    for run in records:
        jobs[run.job_name] = jobs.get(run.job_name, 0) + 1
    collections = [r for r in records if r.job_name == COLLECT_JOB_NAME]
    checks = sum(covered(r) for r in collections)
    failed = sum(r.status != dg.DagsterRunStatus.SUCCESS for r in collections)
    shards = _shard_bytes(ws.dagster_home, records)
    home_bytes, db_bytes = size_of(ws.dagster_home), ws.db.stat().st_size
    per_day = 24 / hours
    runs_a_day = len(records) * per_day
    per_run_all_in = home_bytes / max(len(records), 1)
    # DuckDB grows by what each check records; the first burst's new Signals left out.
    per_check_bytes = (db_bytes - tally.db_after_first) / max(checks - tally.first_checks, 1)
    db_a_year = db_bytes + per_check_bytes * checks * per_day * 365
    dagster_per_check = daemon_cpu / max(checks, 1)
    # The daemon's CPU less its idle rate over its wall: what the runs and their evaluation cost;
    # and a real day's: that plus the idle rate over the simulated hours (here compressed).
    idle_per_s = idle_cpu_per_h / 3600
    work_cpu = daemon_cpu - idle_per_s * tally.daemon_wall_s
    real_cpu = work_cpu + idle_per_s * hours * 3600
    cli_per_check = tally.cli_cpu_s / max(tally.cli_checks, 1)
    out.row(
        name,
        "dagster-daemon (harness as the schedule's clock, GraphQL submission)",
        None,
        wall_s=round(wall, 1),
        cpu_s=round(daemon_cpu, 1),
        runs=dict(sorted(jobs.items())),
        source_checks=checks,
        failed_collection_runs=failed,
        launching_minutes=f"{tally.launching_minutes} of {tally.minutes}",
        launches_without_checks=tally.launches_without_checks,
    )
    out.row(
        name,
        "radar collect --as-of T at each launching minute",
        None,
        wall_s=round(tally.cli_wall_s, 1),
        cpu_s=round(tally.cli_cpu_s, 1),
        source_checks=tally.cli_checks,
        failed_checks=tally.cli_failed,
    )
    ratio = dagster_per_check / cli_per_check
    out.check(name, "CPU per Source check: dagster / radar collect", ratio, 2, "<=")
    out.info(name, "collection runs a day (x 24 / hours)", len(collections) * per_day)
    out.info(name, "signal_checks runs a day", jobs.get(SIGNAL_CHECKS_JOB_NAME, 0) * per_day)
    out.info(name, "runs a day, all jobs", runs_a_day)
    out.info(name, "Source checks a day (schedule)", checks * per_day)
    out.info(name, "Source checks a day (radar collect)", tally.cli_checks * per_day)
    out.info(name, "dagster: CPU per Source check, ms", dagster_per_check * 1000)
    out.info(name, "radar collect: CPU per Source check, ms", cli_per_check * 1000)
    out.info(
        name,
        "dagster less idle: CPU per Source check / radar collect",
        work_cpu / max(checks, 1) / cli_per_check,
    )
    out.info(
        name,
        f"dagster over {hours} real hours (idle added): CPU per Source check / radar collect",
        real_cpu / max(checks, 1) / cli_per_check,
    )
    stand_ins = tally.eval_cpu_s + web_cpu
    out.info(
        name,
        "CPU per Source check with the stand-ins (evaluations + webserver) / radar collect",
        (daemon_cpu + stand_ins) / max(checks, 1) / cli_per_check,
    )
    out.info(name, "schedule evaluations: CPU s", tally.eval_cpu_s)
    out.info(name, "webserver (submission): CPU s", web_cpu)
    out.info(name, "daemon idle CPU s per real hour", idle_cpu_per_h)
    out.info(name, "harness wall s: evaluations", tally.eval_wall_s)
    out.info(name, "harness wall s: submissions", tally.submit_wall_s)
    out.info(name, "harness wall s: waiting for runs and checks", tally.settle_wall_s)
    out.info(name, "harness wall s: radar collect (twin)", tally.cli_wall_s)
    for job, sizes in sorted(shards.items()):
        out.info(name, f"bytes per run ({job}), mean", sum(sizes) / len(sizes))
    every = sorted(s for sizes in shards.values() for s in sizes)
    out.info(name, "bytes per run, median", every[len(every) // 2] if every else 0)
    out.info(name, "DAGSTER_HOME bytes at the end", home_bytes)
    out.info(name, "DAGSTER_HOME bytes per run, all in", per_run_all_in)
    out.info(name, "DuckDB bytes at the end", db_bytes)
    out.info(name, "DuckDB bytes after the first launch", tally.db_after_first)
    out.info(name, "DuckDB bytes per Source check after the first launch", per_check_bytes)
    out.info(name, "twin DuckDB bytes at the end", twin.db.stat().st_size)
    kept = runs_a_day * RETENTION_DAYS * per_run_all_in
    out.info(name, f"a year on disk: DAGSTER_HOME pruned at {RETENTION_DAYS} days, bytes", kept)
    out.info(name, "a year on disk: DuckDB (never pruned), bytes", db_a_year)
    out.notes.append(
        f"{name}: {tally.minutes} simulated minutes, "
        f"{tally.launching_minutes} of them launching, in {wall:.0f} s wall; a year on disk "
        f"with pruning at {RETENTION_DAYS} days: DAGSTER_HOME ~ {runs_a_day:.0f} runs a day x "
        f"{RETENTION_DAYS} x {per_run_all_in / 1000:.0f} KB = {kept / 1e9:.2f} GB, DuckDB ~ "
        f"{db_a_year / 1e9:.2f} GB (its growth per Source check after the first launch, "
        f"{per_check_bytes / 1000:.0f} KB, times a year of checks; DuckDB allocates 256 KB "
        "blocks, so a short run's figure is coarse)"
    )


def _shard_bytes(home: Path, runs: list[dg.DagsterRun]) -> dict[str, list[int]]:
    """Each run's event shard (DAGSTER_HOME/history/runs/<run id>.db), by job."""
    sizes: dict[str, list[int]] = {}
    for run in runs:
        shard = home / "history" / "runs" / f"{run.run_id}.db"
        if shard.is_file():
            sizes.setdefault(run.job_name, []).append(shard.stat().st_size)
    return sizes


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
