"""Scenario 9, `scheduled`: N due Sources launched by the real schedule through a real
`dagster-daemon` (the repository's dagster.yaml: DefaultRunLauncher, the queued run
coordinator with 4 concurrent runs), side by side with one `radar collect --all` of the same N
Sources in a vault of its own.

The daemon runs in a process group of its own with a code server it reads the definitions
from (`start_daemon`), a temporary DAGSTER_HOME and the farm's feeds. The registry sensor
adds the N partitions, the next minute's tick of `due_sources_schedule` requests one run per
contiguous block of due Sources (N fresh Sources: one block), and the harness polls the
instance until collection runs covering all N Sources have ended and the `signal_checks` run
that follows them has ended too; then it stops the daemon and its code server with Ctrl-C and
reaps them. Runs launched and checks runs are counted. Wall: from
the daemon's start to the last collection run's end, minus the wait for the first schedule
tick (the tick is on the minute; a team's daemon is already running). CPU: `os.wait4`'s
rusage of the daemon and of the code server, which holds that of every run worker it launched
and reaped, so the total covers the daemon, the code server, every run worker and the checks
runs the sensor requested until the stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import dagster as dg
import yaml

from benchmarks.measure import REPO, Measured
from radar_pipeline.defs.instance import open_instance
from radar_pipeline_tests.daemonkit import free_port

DAGSTER_DAEMON = Path(sys.executable).parent / "dagster-daemon"
DAGSTER = Path(sys.executable).parent / "dagster"
# The deployment's workspace file: the code server's address and location name (the port is moved).
GRPC_WORKSPACE = REPO / "radar_pipeline" / "deploy" / "workspace.grpc.yaml"
SERVER_DEADLINE_S = 300  # the code server loading the definitions on a loaded machine
SERVER_STOP_S = 10
COLLECT_JOB = "Collect_signals"
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


@dataclass
class Daemon:
    """`dagster-daemon run` and the code server it reads the definitions from, in one process
    group of their own (the server's pid): Ctrl-C to the group stops both."""

    proc: subprocess.Popen[bytes]  # dagster-daemon run
    server: subprocess.Popen[bytes]  # dagster api grpc
    workspace: Path  # the workspace file that names the server

    @property
    def pgid(self) -> int:
        return self.server.pid

    def exited(self) -> str | None:
        """Which of the two ended (and how), None while both run."""
        for name, proc in (("dagster-daemon", self.proc), ("the code server", self.server)):
            if proc.poll() is not None:
                return f"{name} exited with {proc.returncode}"
        return None


@dataclass
class Usage:
    """The CPU (and peak RSS) of processes reaped with `os.wait4`, summed."""

    ru_utime: float
    ru_stime: float
    ru_maxrss: int


def start_daemon(env: dict[str, str], log: IO[bytes]) -> Daemon:
    """`dagster-daemon run` on `env`'s DAGSTER_HOME with the repository's dagster.yaml, reading
    the definitions from a code server of its own (`start_deployment`)."""
    prepare_home(env)
    return start_deployment(env, log)


def start_deployment(env: dict[str, str], log: IO[bytes]) -> Daemon:
    """docs/deployment.md's processes on `env`'s DAGSTER_HOME and the dagster.yaml it holds:
    the instance made first (`open_instance`, what `python -m radar_pipeline.defs.instance`
    runs), then a code server that lives as long as the daemon (`dagster api grpc` on
    127.0.0.1 and a free port, named in `deploy/workspace.grpc.yaml` with that port), then
    `dagster-daemon run` against it, as a deployment runs them and as `dagster dev` does.
    Given a `python_module` workspace the daemon starts a fresh code server every 60 s instead
    (its workspace refresh), which costs more CPU than everything else it does idle."""
    home = Path(env["DAGSTER_HOME"])
    open_instance(home).dispose()
    port = free_port()
    workspace = home / "workspace.yaml"
    config = yaml.safe_load(GRPC_WORKSPACE.read_text("utf-8"))
    [entry] = config["load_from"]
    entry["grpc_server"]["port"] = port
    workspace.write_text(yaml.safe_dump(config, sort_keys=False), "utf-8")
    location = entry["grpc_server"]["location_name"]
    argv = [str(DAGSTER), "api", "grpc", "-m", location, "-d", str(REPO)]
    server = subprocess.Popen(
        [*argv, "-h", "127.0.0.1", "-p", str(port), "--location-name", location],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        process_group=0,
    )
    deadline = time.monotonic() + SERVER_DEADLINE_S
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            break
        if server.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            raise RuntimeError(f"the code server did not answer on port {port}")
        time.sleep(0.5)
    return Daemon(_daemon_process(workspace, env, log, server.pid), server, workspace)


def restart_daemon(daemon: Daemon, env: dict[str, str], log: IO[bytes]) -> Daemon:
    """A new `dagster-daemon run` against the code server of `daemon`, whose daemon process
    ended (the code server and its runs kept going)."""
    proc = _daemon_process(daemon.workspace, env, log, daemon.pgid)
    return Daemon(proc, daemon.server, daemon.workspace)


def _daemon_process(
    workspace: Path, env: dict[str, str], log: IO[bytes], pgid: int
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(DAGSTER_DAEMON), "run", "-w", str(workspace)],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        process_group=pgid,
    )


def stop_daemon(daemon: Daemon) -> Usage:
    """Ctrl-C to the daemon's group, then the daemon's rusage and the code server's (each holds
    that of the processes it reaped: the code server launches and reaps the run workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(daemon.pgid, signal.SIGINT)
    first = _reap(daemon.proc, daemon.pgid)
    # The code server may ignore Ctrl-C (inherited from a shell that started the harness in the
    # background); once the daemon is gone nothing needs it, and its rusage survives a SIGKILL.
    with contextlib.suppress(ProcessLookupError):
        os.kill(daemon.server.pid, signal.SIGTERM)
    second = _reap(daemon.server, daemon.pgid, SERVER_STOP_S)
    return Usage(
        first.ru_utime + second.ru_utime,
        first.ru_stime + second.ru_stime,
        max(first.ru_maxrss, second.ru_maxrss),
    )


def stop_and_reap(proc: subprocess.Popen[bytes]) -> Any:
    """Ctrl-C to the process's group, then its rusage (that of every process it reaped)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    return _reap(proc, proc.pid)


def run_daemon_until_collected(env: dict[str, str], n: int) -> tuple[Measured, dict[str, Any]]:
    """Start `dagster-daemon run`, wait until finished collection runs covered `n` Sources
    (and their checks ran), stop it; measured."""
    home = Path(env["DAGSTER_HOME"])
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        daemon = start_daemon(env, log)
        try:
            figures = _wait_for_runs(home, n, started, daemon)
        finally:
            usage = stop_daemon(daemon)
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


def _wait_for_runs(home: Path, n: int, started: float, daemon: Daemon) -> dict[str, Any]:
    done_statuses = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE]
    first_run: float | None = None
    collected: float | None = None
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while time.perf_counter() - started < DEADLINE_S:
            if (exited := daemon.exited()) is not None:
                raise RuntimeError(exited)
            runs = instance.get_runs(filters=dg.RunsFilter(job_name=COLLECT_JOB))
            if runs and first_run is None:
                first_run = time.perf_counter()
            finished = [r for r in runs if r.status in done_statuses]
            sources_covered = sum(covered(r) for r in finished)
            everything = (
                first_run is not None and sources_covered >= n and len(finished) == len(runs)
            )
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
                    "sources_covered": sources_covered,
                    "succeeded": sum(r.status == dg.DagsterRunStatus.SUCCESS for r in runs),
                    "checks_runs": len(checks),
                }
            time.sleep(2)
    raise RuntimeError(f"collection runs covering {n} Sources did not finish in {DEADLINE_S} s")


def _reap(proc: subprocess.Popen[bytes], pgid: int, grace_s: float = 120) -> Any:
    """Wait for the process (Ctrl-C sent), SIGKILL its group after `grace_s`; its rusage."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage
