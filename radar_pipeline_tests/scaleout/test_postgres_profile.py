"""The team profile on a real PostgreSQL server: runs queued on the instance, launched by the
daemon's run coordinator through the DefaultRunLauncher in their own processes.

Needs a server (DAGSTER_PG_* set) and the extra packages: `make test-postgres` provides both
and sets RADAR_TEST_POSTGRES=1; plain `make test` skips this module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import REPO_ROOT
from radar_pipeline.core.store.collections import report_for
from radar_pipeline.core.store.connection import Store
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("RADAR_TEST_POSTGRES") != "1",
        reason="needs a PostgreSQL server: run `make test-postgres`",
    ),
]

BIN = Path(sys.executable).parent
WORKSPACE = REPO_ROOT / "workspace.yaml"
PROFILE = REPO_ROOT / "radar_pipeline" / "deploy" / "dagster.postgres.yaml"
RUN_TIMEOUT_S = 240.0


@dataclass
class Deployment:
    """One team deployment: vault, DuckDB, a PostgreSQL-backed instance, a running daemon."""

    root: Path
    vault: Path
    db: Path
    home: Path
    env: dict[str, str]
    instance: Any  # dg.DagsterInstance (imported lazily: dagster_postgres is optional)
    server: FeedServer
    daemon: subprocess.Popen[bytes]

    def add_sources(self, *ids: str) -> None:
        self.instance.add_dynamic_partitions("sources", list(ids))

    def submit(
        self, tags: dict[str, str], config: dict[str, Any] | None = None
    ) -> subprocess.Popen[bytes]:
        """`dagster job launch` in its own process: the run is queued on the instance and
        left to the daemon; returns the launcher process (its run id is in `.args`)."""
        run_id = str(uuid.uuid4())
        args = [str(BIN / "dagster"), "job", "launch", "-w", str(WORKSPACE)]
        args += ["-j", "Collect_signals", "--run-id", run_id, "--tags", json.dumps(tags)]
        if config is not None:
            args += ["--config-json", json.dumps(config)]
        return subprocess.Popen(
            args, cwd=REPO_ROOT, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def launched(self, proc: subprocess.Popen[bytes]) -> str:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out.decode(errors="replace")
        return str(proc.args[proc.args.index("--run-id") + 1])  # type: ignore[union-attr]

    def wait(self, run_id: str) -> Any:
        from dagster import DagsterRunStatus

        done = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            run = self.instance.get_run_by_id(run_id)
            if run is not None and run.status in done:
                assert run.status == DagsterRunStatus.SUCCESS, self._failure(run_id)
                return self.instance.get_run_record_by_id(run_id)
            assert self.daemon.poll() is None, "the daemon exited; see daemon.log"
            time.sleep(0.5)
        raise AssertionError(f"run {run_id} not finished after {RUN_TIMEOUT_S:.0f} s")

    def report(self, run_id: str) -> dict[str, Any]:
        report = report_for(Store(self.db), run_id)
        assert report is not None, f"run {run_id} recorded no collection"
        return report.json_object()

    def _failure(self, run_id: str) -> str:
        logs = self.instance.all_logs(run_id)
        return "\n".join(str(e.message or e.dagster_event) for e in logs[-15:])


def _range_tags(first: str, last: str) -> dict[str, str]:
    return {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }


def _fetch_config(**config: Any) -> dict[str, Any]:
    return {"ops": {"signals": {"ops": {"plan": {"config": config}}}}}


def _stop_automation(instance: Any) -> list[str]:
    """Stop every sensor and schedule of the code location on the instance before the daemon
    starts, and return their names.

    They are declared RUNNING, so a daemon would tick them: the due-Sources sensor would launch
    its own run for each Source a test writes, which takes that Source's file lock (the test's
    run is then `skipped` / `locked`) and its `dagster/partition` queue slot, and the checks
    sensor would queue a run after each collection. Every test here submits its own runs and
    counts the requests it caused; the sensors themselves are tested in test_sensors.py.
    """
    # What `dagster sensor stop` / `dagster schedule stop` do, for all of them with one load of
    # workspace.yaml (one CLI process per name costs ~6 s each on a loaded 2-core machine).
    # The location is loaded through the workspace file, as the daemon loads it, so the stored
    # states carry the origin and selector ids the daemon looks up.
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    stopped: list[str] = []
    target = WorkspaceFileTarget(paths=[str(WORKSPACE)])
    with WorkspaceProcessContext(instance, target) as context:
        workspace = context.create_request_context()
        for name in workspace.code_location_names:
            location = workspace.get_code_location(name)
            for repo in location.get_repositories().values():
                for sensor in repo.get_sensors():
                    instance.stop_sensor(sensor.get_remote_origin_id(), sensor.selector_id, sensor)
                    stopped.append(sensor.name)
                for schedule in repo.get_schedules():
                    instance.stop_schedule(
                        schedule.get_remote_origin_id(), schedule.selector_id, schedule
                    )
                    stopped.append(schedule.name)
    return stopped


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    missing = [
        k
        for k in ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_DB")
        if not os.environ.get(k)
    ]
    assert not missing, f"set {', '.join(missing)} (make test-postgres does)"
    root = tmp_path_factory.mktemp("team")
    vault, db, home = root / "vault", root / "radar.duckdb", root / "dagster_home"
    (vault / "Radar" / "Sources").mkdir(parents=True)
    home.mkdir()
    shutil.copyfile(PROFILE, home / "dagster.yaml")
    env = {
        **os.environ,
        "RADAR_VAULT": str(vault),
        "RADAR_DB": str(db),
        "DAGSTER_HOME": str(home),
        "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
    }
    server = FeedServer().start()
    with pytest.MonkeyPatch.context() as mp:
        for key in ("RADAR_VAULT", "RADAR_DB", "DAGSTER_HOME", "RADAR_ALLOWED_PRIVATE_HOSTS"):
            mp.setenv(key, env[key])
        import dagster as dg

        instance = dg.DagsterInstance.get()
        stopped = _stop_automation(instance)
        states = {s.name: s.status.name for s in instance.all_instigator_state()}
        assert states == dict.fromkeys(stopped, "STOPPED"), states
        log = (root / "daemon.log").open("wb")
        daemon = subprocess.Popen(
            [str(BIN / "dagster-daemon"), "run", "-w", str(WORKSPACE)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its code server and run workers form its own group
        )
        try:
            yield Deployment(root, vault, db, home, env, instance, server, daemon)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait(timeout=10)
            log.close()
            instance.dispose()
            server.stop()


def test_instance_stores_runs_events_and_schedules_in_postgres(deployment: Deployment) -> None:
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    inst = deployment.instance
    assert isinstance(inst.run_storage, PostgresRunStorage)
    assert isinstance(inst.event_log_storage, PostgresEventLogStorage)
    assert isinstance(inst.schedule_storage, PostgresScheduleStorage)
    assert type(inst.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert type(inst.run_launcher).__name__ == "DefaultRunLauncher"


def test_fixture_created_then_reused_through_the_daemon(deployment: Deployment) -> None:
    from dagster import DagsterEventType

    d = deployment
    write_fixture_source(
        d.vault, "fixture", rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])
    )
    d.add_sources("fixture")
    outcomes = []
    for _ in range(2):
        run_id = d.launched(d.submit({"dagster/partition": "fixture"}))
        d.wait(run_id)
        src = d.report(run_id)["sources"]
        outcomes.append({k: src[0][k] for k in ("id", "outcome", "created", "reused")})
        events = d.instance.all_logs(run_id)
        kinds = {e.dagster_event.event_type for e in events if e.dagster_event}
        # Queued on the instance, dequeued by the daemon, executed in another process.
        assert {DagsterEventType.RUN_ENQUEUED, DagsterEventType.RUN_STARTING} <= kinds, kinds
        pids = {e.dagster_event.pid for e in events if e.dagster_event and e.step_key}
        assert pids and os.getpid() not in pids and d.daemon.pid not in pids
    assert outcomes == [
        {"id": "fixture", "outcome": "passed", "created": 1, "reused": 0},
        {"id": "fixture", "outcome": "passed", "created": 0, "reused": 1},
    ]
    assert len(signal_files(d.vault)) == 1
    import dagster as dg

    assert "fixture" in d.instance.get_materialized_partitions(dg.AssetKey("signals"))


def test_queue_runs_one_source_at_a_time(deployment: Deployment) -> None:
    """Two per-partition runs of one Source submitted together: the tag concurrency limit on
    `dagster/partition` keeps the second queued until the first has finished."""
    d = deployment
    feed = rss([{"title": "q", "guid": "q1", "link": "https://example.com/q1"}])
    write_source(d.vault, "queued", d.server.add("/queued.xml", feed, latency_s=3.0))
    d.add_sources("queued")
    procs = [d.submit({"dagster/partition": "queued"}) for _ in range(2)]
    # In the order they ran: the two launch processes race to create their runs, and the
    # queue starts the one created first, not necessarily the one submitted first.
    records = sorted((d.wait(d.launched(p)) for p in procs), key=lambda r: r.start_time)
    spans = [(r.start_time, r.end_time) for r in records]
    assert spans[0][1] <= spans[1][0], f"runs of one Source overlapped: {spans}"
    reports = [d.report(r.dagster_run.run_id) for r in records]
    # The second sees the same body: passed (reused) or not-modified, never skipped.
    assert reports[0]["sources"][0]["outcome"] == "passed"
    assert reports[1]["sources"][0]["outcome"] in ("passed", "not-modified")
    assert len(d.server.requests_for("/queued.xml")) == 2


def test_range_run_and_partition_run_meet_the_source_lock(deployment: Deployment) -> None:
    """A range run carries no `dagster/partition` tag, so the queue starts it beside a
    per-partition run of the same Source; the per-Source file lock lets one check it and
    reports the other `skipped` (`locked`)."""
    d = deployment
    feed = rss([{"title": "l", "guid": "l1", "link": "https://example.com/l1"}])
    write_source(d.vault, "locky", d.server.add("/locky.xml", feed, latency_s=8.0))
    d.add_sources("locky")
    procs = [
        d.submit(_range_tags("locky", "locky"), _fetch_config(mode="explicit", sources=["locky"])),
        d.submit({"dagster/partition": "locky"}),
    ]
    run_ids = [d.launched(p) for p in procs]
    records = [d.wait(r) for r in run_ids]
    spans = sorted((r.start_time, r.end_time) for r in records)
    assert spans[0][1] > spans[1][0], f"the two runs did not overlap: {spans}"
    outcomes = sorted((s["outcome"], s["error"]) for r in run_ids for s in d.report(r)["sources"])
    assert outcomes == [("passed", None), ("skipped", "locked")], outcomes
    assert len(d.server.requests_for("/locky.xml")) == 1


def test_due_collection_after_downtime_checks_each_overdue_source_once(
    deployment: Deployment,
) -> None:
    d = deployment
    ids = ("rec-a", "rec-b")
    for sid in ids:
        feed = rss([{"title": sid, "guid": sid, "link": f"https://example.com/{sid}"}])
        write_source(d.vault, sid, d.server.add(f"/{sid}.xml", feed), cadence="PT1H")
    d.add_sources(*ids)
    # Later than any other test's collection, so this module's runs do not interfere.
    t0 = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    tags = _range_tags(ids[0], ids[1])

    def due_run(as_of: datetime) -> dict[str, Any]:
        config = _fetch_config(mode="due", sources=list(ids), as_of=format_utc(as_of))
        run_id = d.launched(d.submit(tags, config))
        d.wait(run_id)
        return d.report(run_id)

    first = due_run(t0)
    passed = sorted(s["id"] for s in first["sources"] if s["outcome"] == "passed")
    assert passed == list(ids), first["sources"]
    before = {sid: len(d.server.requests_for(f"/{sid}.xml")) for sid in ids}
    # Five hours of downtime with a one-hour cadence: both are overdue, each checked once.
    after = due_run(t0 + timedelta(hours=5))
    assert after["downtimeFrom"] == format_utc(t0)
    assert after["overdue"] >= 2
    assert sorted(s["id"] for s in after["sources"]) == list(ids)
    assert {s["outcome"] for s in after["sources"]} <= {"passed", "not-modified"}
    assert {sid: len(d.server.requests_for(f"/{sid}.xml")) - before[sid] for sid in ids} == {
        "rec-a": 1,
        "rec-b": 1,
    }
    # Nothing is due a minute later: no check, no request.
    again = due_run(t0 + timedelta(hours=5, minutes=1))
    assert again["sources"] == []
