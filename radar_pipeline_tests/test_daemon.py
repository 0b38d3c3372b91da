"""The real Dagster daemon: a partition backfill launched through GraphQL (the UI's mutation)
and executed by the daemon, and a run whose process dies (the run worker alone, then the whole
`dagster dev` tree) marked failed and recovered. `daemonkit.DagsterDev` runs the instance."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline_tests.daemonkit import DagsterDev, gate, read_db, run_messages, wait_for
from radar_pipeline_tests.faults.farm import RadarHome, record_figures, view_vault
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

GOOD = ("bf-a", "bf-b", "bf-c")
BAD = "bf-bad"
HELD = "bf-c"  # its feed is held open so a CLI collection meets the backfill's lock


def items(source_id: str, n: int = 3) -> bytes:
    return rss(
        [
            {
                "title": f"{source_id} item {i}",
                "guid": f"{source_id}-{i}",
                "link": f"https://example.com/{source_id}/{i}",
            }
            for i in range(n)
        ]
    )


def signals_by_source(home: RadarHome) -> Counter[str]:
    view = view_vault(home.vault)
    return Counter(source for (source, _item), files in view.by_item.items() for _ in files)


def backfill_runs(dev: DagsterDev, backfill_id: str) -> Any:
    """The backfill's runs once it has some and all of them finished, else None."""
    import dagster as dg

    with dev.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    if not runs or any(not r.is_finished for r in runs):
        return None
    return [(r.run_id, r.status.value, dict(r.tags)) for r in runs]


def backfill_verdict(dev: DagsterDev, backfill_id: str) -> Any:
    """(status, materialized partitions, failed partitions) of the partitions a backfill asked
    for, once the daemon closed it (the asset page's dialog launches a backfill of the
    collection job: closed by its runs' statuses)."""
    from dagster._core.execution.backfill import BulkActionStatus

    with dev.instance() as instance:
        backfill = instance.get_backfill(backfill_id)
    if backfill.status in (BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING):
        return None
    picked = set(backfill.partition_names or ())
    statuses = dev.partition_statuses()
    return (
        backfill.status.value,
        sorted(picked & set(statuses["materialized"])),
        sorted(picked & set(statuses["failed"])),
    )


def partition_events(dev: DagsterDev, after: float) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """(kind, metadata) per Source partition of `signals` recorded after `after` (epoch s)."""
    import dagster as dg

    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    key = dg.AssetKey("signals")
    with dev.instance() as instance:
        for kind, fetch in (
            ("materialization", instance.fetch_materializations),
            ("observation", instance.fetch_observations),
        ):
            for rec in fetch(key, limit=200).records:
                if rec.timestamp < after or not rec.partition_key:
                    continue
                event = rec.asset_materialization or rec.asset_observation
                meta = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
                out.setdefault(rec.partition_key, []).append((kind, meta))
    return out


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_backfill_from_the_ui_through_the_daemon(tmp_path: Path, feed_server: FeedServer) -> None:
    home = RadarHome(tmp_path / "h")
    release = threading.Event()
    held_handler, held_arrived = gate(items(HELD), release)
    for sid in GOOD:
        url = (
            feed_server.add(f"/{sid}.xml", handler=held_handler)
            if sid == HELD
            else feed_server.add(f"/{sid}.xml", items(sid))
        )
        # manual: the schedule never launches a run of its own; backfills are explicit.
        write_source(home.vault, sid, url, cadence="manual")
    write_source(
        home.vault, BAD, feed_server.add(f"/{BAD}.xml", b"boom", status=500), cadence="manual"
    )
    every = sorted([*GOOD, BAD])
    figures: dict[str, Any] = {}
    with DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log") as dev:
        dev.wait_partitions(every)
        started = time.time()
        backfill_id = dev.launch_backfill(every)
        # The run is inside its fetch op once the held feed was asked for; a CLI collection of
        # the same Source now meets the per-Source lock.
        wait_for("the backfill run to fetch the held feed", lambda: bool(held_arrived), 120, 0.2)
        cli = home.run("collect", "--source", HELD, "--json", timeout=120)
        release.set()
        runs = wait_for("the backfill's runs", lambda: backfill_runs(dev, backfill_id), 180)
        figures["first_backfill_runs_s"] = round(time.time() - started, 1)
        events = partition_events(dev, started)

        assert cli.returncode == 0, cli.stdout + cli.stderr
        [cli_source] = json.loads(cli.stdout)["sources"]
        assert (cli_source["outcome"], cli_source["error"]) == ("skipped", "locked")

        [(run_id, run_status, tags)] = runs  # single-run policy: ONE run over the range
        # It checked a failing Source: a failed run naming it, its partition failed, the
        # passing Sources materialized.
        assert run_status == "FAILURE"
        assert any(f"1 Source failed\n{BAD}: " in m for m in step_failures(dev, run_id))
        statuses = dev.partition_statuses()
        assert statuses["failed"] == [BAD]
        assert set(GOOD) <= set(statuses["materialized"])
        assert (
            tags["dagster/asset_partition_range_start"],
            tags["dagster/asset_partition_range_end"],
        ) == (every[0], every[-1])
        for sid in GOOD:
            [(kind, meta)] = events[sid]
            assert (kind, meta["outcome"], meta["created"]) == ("materialization", "passed", 3)
        [(kind, meta)] = events[BAD]
        assert (kind, meta["outcome"], meta["http_status"]) == ("observation", "failed", 500)
        letters = read_db(home.db, "SELECT source_id, collection_id, stage FROM dead_letters")
        assert [(s, c) for s, c, _ in letters] == [(BAD, run_id)]
        assert signals_by_source(home) == {sid: 3 for sid in GOOD}

        # The same partitions again: every item is known, nothing new.
        again = time.time()
        second_id = dev.launch_backfill(every)
        runs2 = wait_for("the second backfill's runs", lambda: backfill_runs(dev, second_id), 180)
        figures["second_backfill_runs_s"] = round(time.time() - again, 1)
        events2 = partition_events(dev, again)
        assert [r[1] for r in runs2] == ["FAILURE"]  # the same Source failed again
        assert dev.partition_statuses()["failed"] == [BAD]
        assert sum(m["created"] for evs in events2.values() for _, m in evs) == 0
        assert signals_by_source(home) == {sid: 3 for sid in GOOD}
        figures["dead_letters"] = read_db(home.db, "SELECT source_id, stage FROM dead_letters")

        # The daemon closes the first backfill on a later tick, by its run's status: failed,
        # with the failing Source's partition failed and the rest materialized.
        verdict = wait_for(
            "the first backfill's verdict", lambda: backfill_verdict(dev, backfill_id), 120
        )
        figures["first_backfill"] = {
            "verdict": verdict,
            "runs": [(r[1], {k: v for k, v in r[2].items() if "range" in k}) for r in runs],
            "s": round(time.time() - started, 1),
        }
        assert verdict == ("COMPLETED_FAILED", list(GOOD), [BAD])
        figures["dagster_dev_ready_s"] = [round(s, 1) for s in dev.ready_s]
    assert not dev.survivors, f"processes outlived Ctrl-C: {dev.survivors}"
    view = view_vault(home.vault)
    assert not view.temp_files and not view.unreadable
    record_figures("daemon-backfill", figures)


# ---- Dagster process death --------------------------------------------------------------------

SHORT_MONITORING = {"run_monitoring": {"max_runtime_seconds": 20, "poll_interval_seconds": 2}}


def run_record(dev: DagsterDev, run_id: str) -> Any:
    with dev.instance() as instance:
        return instance.get_run_record_by_id(run_id)


def finished(dev: DagsterDev, run_id: str) -> Any:
    record = run_record(dev, run_id)
    return record.dagster_run if record and record.dagster_run.is_finished else None


def retry_of(dev: DagsterDev, run_id: str) -> Any:
    """The run the daemon relaunched for `run_id` (run_retries), once it finished."""
    import dagster as dg

    with dev.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/parent_run_id": run_id}))
    return runs[0] if runs and runs[0].is_finished else None


def step_failures(dev: DagsterDev, run_id: str) -> list[str]:
    """The error message of each failed step of a run (what the run page shows)."""
    import dagster as dg

    with dev.instance() as instance:
        entries = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    return [
        str(e.dagster_event.step_failure_data.error.message)  # type: ignore[union-attr]
        for e in entries
        if e.dagster_event is not None
    ]


def run_messages_of(dev: DagsterDev, run_id: str) -> list[str]:
    with dev.instance() as instance:
        return run_messages(instance, run_id)


def cli_runs(dev: DagsterDev) -> list[Any]:
    import dagster as dg

    with dev.instance() as instance:
        return list(instance.get_runs(dg.RunsFilter(tags={"radar/trigger": "cli"})))


def run_failure_letters(home: RadarHome) -> list[tuple[str, str]]:
    return read_db(
        home.db,
        "SELECT source_id, collection_id FROM dead_letters WHERE stage = 'dagster-run' "
        "ORDER BY created_at",
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_dagster_process_death(tmp_path: Path, feed_server: FeedServer) -> None:
    """A: the run worker SIGKILLed mid-fetch while its code server lives. B: the whole
    `dagster dev` tree SIGKILLed while a run is STARTED, then restarted with short monitoring."""
    from radar_pipeline_tests.daemonkit import run_worker_pid, write_instance_yaml

    home = RadarHome(tmp_path / "h")
    releases = {sid: threading.Event() for sid in ("pd-a", "pd-b", "pd-c")}
    arrivals: dict[str, list[int]] = {}
    for sid, release in releases.items():
        handler, arrivals[sid] = gate(items(sid), release, hold_s=60)
        write_source(
            home.vault, sid, feed_server.add(f"/{sid}.xml", handler=handler), cadence="manual"
        )
    write_instance_yaml(home.home)
    figures: dict[str, Any] = {}
    dev = DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log")
    try:
        dev.start()
        dev.wait_partitions(["pd-a", "pd-b", "pd-c"])

        # A. The run worker dies; its code server notices.
        run_a = dev.launch_run("Collect_signals", "pd-a")
        wait_for("run A to fetch", lambda: bool(arrivals["pd-a"]), 120, 0.2)
        with dev.instance() as instance:
            pid = run_worker_pid(instance, run_a)
        assert pid is not None and pid in dev.pids()
        killed_at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        releases["pd-a"].set()  # whatever comes next is served at once
        failed_a = wait_for("run A marked failed", lambda: finished(dev, run_a), 120, 0.2)
        figures["worker_kill_marked_failed_s"] = round(time.monotonic() - killed_at, 1)
        assert failed_a.status.value == "FAILURE"
        with dev.instance() as instance:
            messages_a = run_messages(instance, run_a)
        # The code server that started the worker saw it die (its cleanup thread, every 0.5 s).
        [death] = [m for m in messages_a if "[DagsterApiServer] Run execution process" in m]
        figures["worker_kill_message"] = death[:160]
        assert f"{run_a} was terminated by signal 9 (SIGKILL)" in death
        retry_a = wait_for("the retry of run A", lambda: retry_of(dev, run_a), 120)
        figures["worker_kill_retry"] = retry_a.status.value
        assert retry_a.status.value == "SUCCESS"

        # B. The whole tree dies while run B is STARTED; nobody is left to mark it. Before
        # that, a `radar collect` (an in-process run, no code server) dies mid-fetch too.
        run_b = dev.launch_run("Collect_signals", "pd-b")
        cli = home.popen("collect", "--source", "pd-c", "--json")
        wait_for("run B and the CLI to fetch", lambda: arrivals["pd-b"] and arrivals["pd-c"], 120)
        os.killpg(cli.pid, signal.SIGKILL)
        cli.communicate()
        dev.kill()
        killed_at = time.monotonic()
        [run_c] = [r.run_id for r in cli_runs(dev) if r.status.value == "STARTED"]
        assert run_record(dev, run_b).dagster_run.status.value == "STARTED"
        releases["pd-b"].set()
        releases["pd-c"].set()
        write_instance_yaml(home.home, SHORT_MONITORING)
        dev.start()
        failed_b = wait_for("run B marked failed", lambda: finished(dev, run_b), 180, 0.5)
        figures["tree_kill_marked_failed_s"] = round(time.monotonic() - killed_at, 1)
        assert failed_b.status.value == "FAILURE"
        with dev.instance() as instance:
            messages_b = run_messages(instance, run_b)
        # Nobody saw the worker die: run monitoring (daemon) fails it on max_runtime_seconds.
        assert "Canceling due to exceeding maximum runtime of 20 seconds." in messages_b
        assert any(m.startswith("This job is being forcibly marked as failed") for m in messages_b)
        retry_b = wait_for("the retry of run B", lambda: retry_of(dev, run_b), 120)
        figures["tree_kill_retry"] = retry_b.status.value
        assert retry_b.status.value == "SUCCESS"
        # The killed CLI run: the same monitoring verdict, but no relaunch (no job origin);
        # the next `radar collect` recovers its Source.
        failed_c = wait_for("the CLI run marked failed", lambda: finished(dev, run_c), 120, 0.5)
        assert failed_c.status.value == "FAILURE"
        assert "Canceling due to exceeding maximum runtime of 20 seconds." in run_messages_of(
            dev, run_c
        )
        # Dagster tags it will_retry=true, then finds no job origin and relaunches nothing.
        no_origin = "Run does not have an external job origin, unable to retry the run."
        wait_for(
            "the retry daemon to give up", lambda: no_origin in run_messages_of(dev, run_c), 60
        )
        figures["cli_kill_will_retry_tag"] = failed_c.tags.get("dagster/will_retry")
        assert retry_of(dev, run_c) is None
        again = home.run("collect", "--source", "pd-c", "--json", timeout=120)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["created"] == 3
        # The run-failure sensor ticks every 60 s: run A's dead letter comes with its next tick.
        wait_for(
            "the run-failure dead letter of run A",
            lambda: ("pd-a", run_a) in run_failure_letters(home) or None,
            150,
        )
        figures["dead_letters_at_end"] = run_failure_letters(home)
        figures["dagster_dev_ready_s"] = [round(s, 1) for s in dev.ready_s]
    finally:
        survivors = dev.stop()
    assert not survivors, f"processes outlived Ctrl-C: {survivors}"
    assert signals_by_source(home) == {"pd-a": 3, "pd-b": 3, "pd-c": 3}
    view = view_vault(home.vault)
    assert not view.temp_files and not view.unreadable
    figures["requests"] = {sid: len(a) for sid, a in arrivals.items()}
    record_figures("daemon-process-death", figures)
