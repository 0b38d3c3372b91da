"""Scenario 9, `scheduled`: N due Sources launched by the real schedule through a real
`dagster-daemon` (the repository's dagster.yaml: DefaultRunLauncher, the queued run
coordinator with 4 concurrent runs), side by side with one `radar collect --all` of the same N
Sources in a vault of its own.

The daemon runs in its own session with the repository's workspace, a temporary DAGSTER_HOME
and the farm's feeds. The registry sensor adds the N partitions, the next minute's tick of
`due_sources_schedule` requests one run per contiguous block of due Sources (N fresh Sources:
one block), and the harness polls the instance until collection runs covering all N Sources
have ended and the `signal_checks` run that follows them has ended too; then it stops the
daemon with Ctrl-C and reaps it. Runs launched and checks runs are counted. Wall: from
the daemon's start to the last collection run's end, minus the wait for the first schedule
tick (the tick is on the minute; a team's daemon is already running). CPU: `os.wait4`'s
rusage of the daemon, which holds that of every process it and its code server reaped (the
run workers), so the total covers the daemon, the code server, every run worker and the
checks runs the sensor requested until the stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import dagster as dg

from benchmarks.measure import REPO, Measured

DAGSTER_DAEMON = Path(sys.executable).parent / "dagster-daemon"
COLLECT_JOB = "collect_signals"
# How long the harness waits for the N runs before it gives up (the figures are then void).
DEADLINE_S = 3600


def start_in_session(
    argv: list[str], env: dict[str, str], log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """Start a Dagster process (`dagster-daemon run`, `dagster-webserver`) in a session of its
    own, so that Ctrl-C to its group stops it and everything it started."""
    return subprocess.Popen(
        argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def prepare_home(env: dict[str, str]) -> Path:
    """`env`'s DAGSTER_HOME, created, with the repository's dagster.yaml."""
    home = Path(env["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text("utf-8"), "utf-8")
    return home


def start_daemon(env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    """`dagster-daemon run` with the repository's workspace, on `env`'s DAGSTER_HOME."""
    prepare_home(env)
    argv = [str(DAGSTER_DAEMON), "run", "-w", str(REPO / "workspace.yaml")]
    return start_in_session(argv, env, log)


def stop_and_reap(proc: subprocess.Popen[bytes]) -> Any:
    """Ctrl-C to the process's group, then its rusage (that of every process it reaped:
    the daemon's code server and the run workers it reaped)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    return _reap(proc)


def run_daemon_until_collected(env: dict[str, str], n: int) -> tuple[Measured, dict[str, Any]]:
    """Start `dagster-daemon run`, wait until finished collection runs covered `n` Sources
    (and their checks ran), stop it; measured."""
    home = Path(env["DAGSTER_HOME"])
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        proc = start_daemon(env, log)
        try:
            figures = _wait_for_runs(home, n, started, proc)
        finally:
            usage = stop_and_reap(proc)
        log.seek(0)
        tail = log.read().decode("utf-8", "replace")[-2000:]
    measured = Measured(
        wall_s=figures["wall_s"],
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        returncode=0,
        stdout="",
        stderr=tail,
    )
    return measured, figures


def covered(run: dg.DagsterRun) -> int:
    """How many Sources a collection run was asked to check (its config's selection)."""
    config = (run.run_config or {}).get("ops", {}).get("signals", {}).get("ops", {})
    return len(config.get("fetch", {}).get("config", {}).get("sources", [])) or 1


def _wait_for_runs(
    home: Path, n: int, started: float, proc: subprocess.Popen[bytes]
) -> dict[str, Any]:
    done_statuses = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE]
    first_run: float | None = None
    collected: float | None = None
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.perf_counter() - started < DEADLINE_S:
            if proc.poll() is not None:
                raise RuntimeError(f"dagster-daemon exited with {proc.returncode}")
            runs = instance.get_runs(filters=dg.RunsFilter(job_name=COLLECT_JOB))
            if runs and first_run is None:
                first_run = time.perf_counter()
            finished = [r for r in runs if r.status in done_statuses]
            covered = sum(covered(r) for r in finished)
            everything = first_run is not None and covered >= n and len(finished) == len(runs)
            if collected is None and everything:
                collected = time.perf_counter()
            checks = instance.get_runs(filters=dg.RunsFilter(job_name="signal_checks"))
            checked = [r for r in checks if r.status in done_statuses]
            if collected is not None and checked:
                ended = time.perf_counter()
                assert first_run is not None
                return {
                    "wall_s": collected - first_run,
                    "daemon_wall_s": round(ended - started, 1),
                    "until_first_run_s": round(first_run - started, 1),
                    "checks_after_s": round(ended - collected, 1),
                    "runs": len(runs),
                    "sources_covered": covered,
                    "succeeded": sum(r.status == dg.DagsterRunStatus.SUCCESS for r in runs),
                    "checks_runs": len(checks),
                }
            time.sleep(2)
    raise RuntimeError(f"collection runs covering {n} Sources did not finish in {DEADLINE_S} s")


def _reap(proc: subprocess.Popen[bytes]) -> Any:
    """Wait for the daemon (Ctrl-C sent), SIGKILL its group after 120 s; its rusage."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage
