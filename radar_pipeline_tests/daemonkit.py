"""A real Dagster instance for tests: `dagster dev` (webserver, daemon, code server) on a free
loopback port against workspace.yaml, in a temp DAGSTER_HOME, driven through GraphQL (what the
UI sends) and read back from the instance's own storage.

`DagsterDev` always tears its whole process group down (Ctrl-C first, SIGKILL for what
survives), also when a test fails; `kill()` is the crash: SIGKILL to every process of the tree.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from radar_pipeline.core.config import REPO_ROOT
from radar_pipeline_tests.feedserver import Handler, RequestHandler

DAGSTER = str(Path(sys.executable).parent / "dagster")
T = TypeVar("T")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def terminal_like() -> None:
    """What an interactive shell gives a foreground job: SIGINT at its default. (A process
    started in the background by a script inherits SIGINT ignored; docs/testing.md.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    as_a_shell_gives()


def as_a_shell_gives() -> None:
    """SIGTERM at its default and no signal blocked, as a shell starts any job. The test
    process that starts the child may carry an ignored SIGTERM or a blocked signal from code
    it ran before (a child inherits both, and make keeps a SIGTERM it was started with
    ignored), which no user's shell hands on."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def group_alive(pgid: int) -> list[int]:
    """Live (not zombie) processes of the group, read from /proc: a zombie left for an
    unreaping parent would still answer kill(0)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = 90) -> list[int]:
    """Ctrl-C to the process group of `proc` (its own session), wait for every member to end,
    SIGKILL the survivors. Returns the pids that outlived Ctrl-C (empty when all stopped)."""
    pgid = proc.pid
    if group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGINT)
    stopped_at = time.monotonic()
    while time.monotonic() < stopped_at + grace_s:
        proc.poll()  # reap the leader itself
        if not group_alive(pgid):
            break
        time.sleep(0.5)
    survivors = group_alive(pgid)
    if survivors:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    return survivors


def wait_serving(base: str, proc: subprocess.Popen[bytes], log: Path, timeout: float) -> float:
    """Wait until the webserver at `base` answers /server_info; returns the seconds waited."""
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise AssertionError(log.read_text(errors="replace")[-3000:])
        if time.monotonic() > started + timeout:
            raise AssertionError(f"dagster dev never answered /server_info in {timeout:g} s")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/server_info", timeout=5).status_code == 200:
                return time.monotonic() - started
        time.sleep(0.5)


def graphql(base: str, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST one GraphQL document to the webserver; raises on transport or GraphQL errors."""
    response = httpx.post(
        f"{base}/graphql", json={"query": query, "variables": variables or {}}, timeout=60
    )
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise AssertionError(f"GraphQL errors: {body['errors']}")
    data: dict[str, Any] = body["data"]
    return data


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 1) -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def read_db(db: Path, sql: str, timeout: float = 60) -> list[tuple[Any, ...]]:
    """Rows of a read-only query on the DuckDB file while the instance may be writing it: a
    read-only connection is refused while any process holds it read-write (docs/deployment.md),
    so retry until the writer's short transaction is over."""
    import duckdb

    deadline = time.monotonic() + timeout
    while True:
        try:
            con = duckdb.connect(str(db), read_only=True)
        except duckdb.IOException as exc:
            if "lock" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        try:
            return con.execute(sql).fetchall()
        finally:
            con.close()


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def write_instance_yaml(home: Path, overrides: dict[str, Any] | None = None) -> Path:
    """The repository's dagster.yaml in `home`, with `overrides` merged in (tests shorten the
    run monitoring timings)."""
    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    target.write_text(yaml.safe_dump(deep_merge(config, overrides or {}), sort_keys=False))
    return target


# -- GraphQL documents the UI sends -----------------------------------------------------------

REPOSITORIES = """
{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } } } } }
"""

LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on InvalidSubsetError { message }
    ... on PartitionSetNotFoundError { message }
    ... on UnauthorizedError { message }
  }
}
"""

JOB_NAMES = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { jobNames } }
}
"""

LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message stack }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}
"""

PARTITIONS = '{ assetNodes(assetKeys: [{path: ["signals"]}]) { partitionKeys } }'

PARTITION_STATUSES = """
{ assetNodes(assetKeys: [{path: ["signals"]}]) {
    assetPartitionStatuses { __typename ... on DefaultPartitionStatuses {
      materializedPartitions failedPartitions materializingPartitions } } } }
"""

SCHEDULE = """
query($selector: ScheduleSelector!) {
  scheduleOrError(scheduleSelector: $selector) {
    __typename
    ... on Schedule { name cronSchedule description
      scheduleState { status ticks(limit: 100) { tickId status timestamp runIds skipReason } } }
    ... on PythonError { message }
  }
}
"""


class DagsterDev:
    """`dagster dev -w workspace.yaml -h 127.0.0.1 -p <free port>` in its own session, with
    DAGSTER_HOME=`home` and the given environment (RADAR_VAULT, RADAR_DB, ...)."""

    def __init__(self, home: Path, env: dict[str, str], log: Path) -> None:
        self.home = home
        self.env = {**env, "DAGSTER_HOME": str(home)}
        self.log = log
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s: list[float] = []  # seconds to /server_info, per start
        self.survivors: list[int] = []  # pids that outlived the last Ctrl-C (then SIGKILLed)
        self._location: tuple[str, str] | None = None

    def start(self, timeout: float = 180) -> DagsterDev:
        """Start (or restart after kill()) and wait until the webserver answers."""
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [DAGSTER, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(self.port)],
                cwd=REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=terminal_like,
            )
        try:
            self.ready_s.append(wait_serving(self.base, self.proc, self.log, timeout))
        except BaseException:
            self.stop()  # `with` does not call __exit__ when __enter__ raised
            raise
        return self

    def pids(self) -> list[int]:
        """Every live process of the tree (webserver, daemon, code servers, run workers)."""
        return group_alive(self.proc.pid) if self.proc else []

    def stop(self) -> list[int]:
        """Ctrl-C and wait; SIGKILL what survives. Returns the pids that outlived Ctrl-C."""
        if self.proc is None:
            return []
        self.survivors = stop_group(self.proc)
        self.proc = None
        return self.survivors

    def kill(self) -> None:
        """The crash: SIGKILL every process of the tree at once, then wait until all are gone."""
        assert self.proc is not None
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        wait_for("the killed tree to be gone", lambda: not group_alive(pgid), 30, 0.2)
        self.proc.wait(timeout=30)
        self.proc = None

    def __enter__(self) -> DagsterDev:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- GraphQL -------------------------------------------------------------------------------

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        return graphql(self.base, query, variables)

    def location(self) -> tuple[str, str]:
        """(code location name, repository name) of workspace.yaml's one location."""
        if self._location is None:
            [node] = self.graphql(REPOSITORIES)["repositoriesOrError"]["nodes"]
            self._location = (node["location"]["name"], node["name"])
        return self._location

    def partition_keys(self) -> list[str]:
        [node] = self.graphql(PARTITIONS)["assetNodes"]
        return list(node["partitionKeys"])

    def partition_statuses(self) -> dict[str, list[str]]:
        """What the `signals` Partitions tab shows: materialized, failed, materializing keys."""
        [node] = self.graphql(PARTITION_STATUSES)["assetNodes"]
        statuses = node["assetPartitionStatuses"]
        return {
            "materialized": sorted(statuses["materializedPartitions"]),
            "failed": sorted(statuses["failedPartitions"]),
            "materializing": sorted(statuses["materializingPartitions"]),
        }

    def schedule(self, name: str) -> dict[str, Any]:
        """A schedule as Automation shows it: its state and its ticks (newest first)."""
        location, repository = self.location()
        selector = {
            "repositoryLocationName": location,
            "repositoryName": repository,
            "scheduleName": name,
        }
        result: dict[str, Any] = self.graphql(SCHEDULE, {"selector": selector})["scheduleOrError"]
        assert result["__typename"] == "Schedule", result
        return result

    def wait_partitions(self, keys: list[str], timeout: float = 120) -> None:
        """Wait until the registry sensor (run by the daemon) made the partitions `keys`."""
        wait_for(
            f"partitions {keys}",
            lambda: sorted(self.partition_keys()) == sorted(keys) or None,
            timeout,
        )

    def launch_backfill(self, partitions: list[str], asset: str = "signals") -> str:
        """The asset page's Materialize > partitions > Launch, sent as the dialog sends it: it
        takes the first of the asset's job names (sorted by Dagster); unless that is the hidden
        `__ASSET_JOB`, the backfill names that job's partition set. Returns the backfill id."""
        params: dict[str, Any] = {
            "assetSelection": [{"path": [asset]}],
            "partitionNames": partitions,
            "fromFailure": False,
            "tags": [],
        }
        job = self.launch_dialog_job(asset)
        if not job.startswith("__ASSET_JOB"):
            location, repository = self.location()
            params["selector"] = {
                "partitionSetName": f"{job}_partition_set",
                "repositorySelector": {
                    "repositoryLocationName": location,
                    "repositoryName": repository,
                },
            }
        result = self.graphql(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        assert result["__typename"] == "LaunchBackfillSuccess", result
        return str(result["backfillId"])

    def launch_dialog_job(self, asset: str = "signals") -> str:
        """The job the asset page's launch dialog targets: the first of its job names."""
        node = self.graphql(JOB_NAMES, {"key": {"path": [asset]}})["assetNodeOrError"]
        return str(node["jobNames"][0])

    def launch_run(self, job: str, partition: str, run_config: dict[str, Any] | None = None) -> str:
        """The UI's "Materialize" of one partition of `job` (queued, launched by the daemon)."""
        location, repository = self.location()
        params = {
            "selector": {
                "repositoryLocationName": location,
                "repositoryName": repository,
                "jobName": job,
            },
            "runConfigData": run_config or {},
            "mode": "default",
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
        }
        result = self.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
        assert result["__typename"] == "LaunchRunSuccess", result
        return str(result["run"]["runId"])

    # -- the instance, read directly -----------------------------------------------------------

    @contextlib.contextmanager
    def instance(self) -> Iterator[Any]:
        """The same instance the daemon writes, opened from its DAGSTER_HOME (SQLite)."""
        import dagster as dg

        instance = dg.DagsterInstance.from_config(str(self.home))
        try:
            yield instance
        finally:
            instance.dispose()


def run_worker_pid(instance: Any, run_id: str) -> int | None:
    """The pid of the process executing `run_id`, from its engine event
    `Started process for run (pid: N).` (None until the worker started)."""
    import dagster as dg

    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        found = re.search(r"Started process for run \(pid: (\d+)\)", entry.message or "")
        if found:
            return int(found.group(1))
    return None


def run_messages(instance: Any, run_id: str) -> list[str]:
    """Every event message of a run (for reports and assertions)."""
    return [e.message or "" for e in instance.all_logs(run_id)]


DRIP_S = 3.0


def gate(body: bytes, release: threading.Event, hold_s: float = 18) -> tuple[Handler, list[int]]:
    """A handler that holds each request until `release` is set (at most `hold_s`), then serves
    the rest of `body`; the list counts the requests that arrived (the run is then inside its
    fetch op). While it holds, it drip-feeds the body a byte every `DRIP_S`, under the fetch's
    read timeout (10 s), so the hold lasts up to the check's overall deadline (20 s) and not
    just the read timeout: a loaded machine's CLI may need most of that to reach its lock."""
    arrived: list[int] = []

    def handle(req: RequestHandler) -> None:
        arrived.append(1)
        req.send_response(200)
        req.send_header("Content-Type", "application/rss+xml; charset=utf-8")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        sent, until = 0, time.monotonic() + hold_s
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < len(body) - 1 and not release.wait(min(DRIP_S, until - time.monotonic())):
                if time.monotonic() >= until:
                    break
                req.wfile.write(body[sent : sent + 1])
                req.wfile.flush()
                sent += 1
            req.wfile.write(body[sent:])

    return handle, arrived
