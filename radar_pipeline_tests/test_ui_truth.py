"""What a person sees in the Dagster UI, asked with the very GraphQL documents the UI's pages
send (captured from the pages of `dagster dev` 1.13 into `ui_queries/`): the Partitions tab
(`PartitionHealthQuery`), a partition's page (`AssetPartitionDetailQuery`), the Checks tab
(`AssetChecksQuery`) and a run's page (`RunStepStatsQuery`: its steps, as the Gantt chart and
the step list draw them), against a real `dagster dev` with its daemon in a temp home.

- A partition's state is its Source's last check: an attempt that checks nothing (a replay in
  the Source's backoff, a backfill that meets a minimum interval or a publisher's wait) leaves
  it as it was, whether the page read it before the attempt or first after it (Dagster caches
  a partition's status and brings it up to date from new events when read).
- A failed partition's page carries the failure's line: the error, the HTTP status, the next
  attempt (the latest run's failure message and the observation the page lists).
- A backfill from the UI: the Sources it could not check keep their state with the reason on
  their partition; it reads Success when every Source it requested was checked or so skipped,
  and every check is evaluated after it (none reads "Not evaluated"). Its run's page lists the
  step that checked its Sources, named by their plan positions, and the failure on the step
  that records the partitions (a failing Source is a check's outcome, not a step's crash).
- After a failed backfill of a failing Source (its run carries every check of `signals`, which
  Dagster records "Execution failed"), each check's newest execution on `signals`, the
  registry and `weekly_cleanup` is an evaluation that agrees with `radar report --json`, name
  for name, verdict and severity."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.audit.run import CHECK_NAMES, DECLARED_SEVERITY
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME
from radar_pipeline.defs.collection.jobs import EVIDENCE_KEYS_AFTER_COLLECTION
from radar_pipeline_tests.daemonkit import DagsterDev, wait_for
from radar_pipeline_tests.faults.farm import RadarHome, record_figures
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

QUERIES = Path(__file__).parent / "ui_queries"
SIGNALS = {"path": ["signals"]}
OK = "t-ok"  # passes every time
SLOW = "t-min"  # passes, then must not be asked again for a day (minIntervalSeconds)
WAIT = "t-wait"  # answers 429 with Retry-After: an hour's wait the publisher asked for
# Every check on `signals` that follows a collection (the registry's and `retention` are on
# their own assets' tabs).
SIGNALS_CHECKS = {k.name for k in EVIDENCE_KEYS_AFTER_COLLECTION if k.asset_key.path == ["signals"]}


def ui(dev: DagsterDev, name: str, **variables: Any) -> dict[str, Any]:
    """Send the document the UI page sends, as it sends it."""
    query = (QUERIES / f"{name}.graphql").read_text(encoding="utf-8")
    data = dev.graphql(query, variables)
    assert "errors" not in data, data
    return data


def partition_health(dev: DagsterDev) -> dict[str, list[str]]:
    """The Partitions tab: which Sources are materialized and which failed."""
    node = ui(dev, "PartitionHealthQuery", assetKey=SIGNALS)["assetNodeOrError"]
    statuses = node["assetPartitionStatuses"]
    return {
        "materialized": sorted(statuses["materializedPartitions"]),
        "failed": sorted(statuses["failedPartitions"]),
    }


def partition_page(dev: DagsterDev, key: str) -> dict[str, Any]:
    """A partition's page: its latest run and its events, newest first."""
    asset = ui(dev, "AssetPartitionDetailQuery", assetKey=SIGNALS, partitionKey=key)["assetOrError"]
    events = sorted(
        asset["assetEventHistory"]["results"], key=lambda e: -int(float(e["timestamp"]))
    )
    return {"latestRun": asset["definition"]["latestRunForPartition"], "events": events}


def checks_tab(dev: DagsterDev, asset: str) -> dict[str, Any]:
    """The Checks tab: each check's execution for the asset's latest materialization (None is
    what the page draws as "Not evaluated")."""
    node = ui(dev, "AssetChecksQuery", assetKey={"path": [asset]})["assetNodeOrError"]
    return {
        c["name"]: c["executionForLatestMaterialization"]
        for c in node["assetChecksOrError"]["checks"]
    }


def run_steps(dev: DagsterDev, run_id: str) -> dict[str, str]:
    """A run's page: each step it ran (a row of the Gantt chart) and its status."""
    run = ui(dev, "RunStepStatsQuery", runId=run_id)["pipelineRunOrError"]
    return {step["stepKey"]: step["status"] for step in run["stepStats"]}


def evaluated_after(dev: DagsterDev, run_id: str) -> dict[str, dict[str, Any]] | None:
    """Every check's newest execution on the three assets, once each is an evaluation recorded
    by another run than `run_id` (None until then)."""
    newest: dict[str, dict[str, Any]] = {}
    for asset in ("signals", "source_registry", "weekly_cleanup"):
        for name, execution in checks_tab(dev, asset).items():
            if execution is None or execution["runId"] == run_id:
                return None
            if execution["status"] not in ("SUCCEEDED", "FAILED"):
                return None
            newest[name] = execution
    return newest


def agrees_with_report(newest: dict[str, dict[str, Any]], report: dict[str, Any]) -> None:
    """The Checks tab and `radar report --json` name the same checks and say the same of each:
    passed or failed, and the severity (a passing evaluation carries its declared one)."""
    assert set(newest) == set(report["checks"]), (set(newest), set(report["checks"]))
    declared = {CHECK_NAMES[a]: s for a, s in DECLARED_SEVERITY.items()}
    for name, execution in newest.items():
        verdict = report["checks"][name]
        evaluation = execution["evaluation"]
        assert (execution["status"] == "SUCCEEDED") == verdict["passed"], (name, execution)
        expected = declared[name] if verdict["passed"] else verdict["severity"]
        assert evaluation["severity"] == expected, (name, evaluation["severity"], expected)


def feed(source_id: str) -> bytes:
    return rss(
        [
            {"title": f"{source_id} {i}", "guid": f"{source_id}-{i}", "link": f"https://e.x/{i}"}
            for i in range(2)
        ]
    )


def open_letter(home: RadarHome, source_id: str) -> str:
    proc = home.run("dlq", "list", "--json")
    letters = json.loads(proc.stdout)["deadLetters"]
    [letter] = [d for d in letters if d["sourceId"] == source_id and d["status"] == "open"]
    return str(letter["id"])


def backfill_status(dev: DagsterDev, backfill_id: str) -> str | None:
    with dev.instance() as instance:
        status = instance.get_backfill(backfill_id).status.value
    return None if status in ("REQUESTED", "CANCELING") else str(status)


def created_after(dev: DagsterDev, run_id: str, launched: float) -> float:
    """Seconds from a launch to the creation of one of its runs (what the backfill daemon and
    the queue add before any work)."""
    with dev.instance() as instance:
        record = instance.get_run_record_by_id(run_id)
    return round(record.create_timestamp.timestamp() - launched, 1)


def planned_checks(dev: DagsterDev, run_id: str) -> int:
    """How many check evaluations a run planned."""
    import dagster as dg

    with dev.instance() as instance:
        kind = dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED
        return len(instance.all_logs(run_id, of_type=kind))


def runs_of(dev: DagsterDev, **tags: str) -> list[Any]:
    import dagster as dg

    with dev.instance() as instance:
        return list(instance.get_runs(dg.RunsFilter(tags=tags)))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_partitions_checks_and_backfills_as_the_ui_shows_them(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    home = RadarHome(tmp_path / "h")
    write_source(home.vault, OK, feed_server.add(f"/{OK}.xml", feed(OK)), cadence="manual")
    write_source(
        home.vault,
        SLOW,
        feed_server.add(f"/{SLOW}.xml", feed(SLOW)),
        cadence="manual",
        minIntervalSeconds=86400,
    )
    write_source(
        home.vault,
        WAIT,
        feed_server.add(f"/{WAIT}.xml", b"slow down", 429, {"Retry-After": "3600"}),
        cadence="manual",
    )
    every = sorted([OK, SLOW, WAIT])
    figures: dict[str, Any] = {}
    # The first collection, before the UI is up: nothing has read the partitions yet.
    first = home.run("collect", "--all", "--json")
    assert first.returncode == 2, first.stderr
    letter = open_letter(home, WAIT)
    # A replay in the publisher's wait checks nothing: it says so, and plans no partition.
    replay = home.run("dlq", "replay", letter)
    assert replay.returncode == 1 and "was not checked" in replay.stderr, replay.stderr

    with DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log") as dev:
        dev.wait_partitions(every)
        # Read first after the skipped attempt: the state is the last check's.
        assert partition_health(dev) == {"materialized": [SLOW, OK], "failed": [WAIT]}
        # Read before a second skipped attempt, then after it: the same.
        again = home.run("dlq", "replay", letter)
        assert again.returncode == 1, again.stderr
        assert partition_health(dev) == {"materialized": [SLOW, OK], "failed": [WAIT]}

        # The failed partition's page: the latest run failed with the Source's line, and the
        # page's events carry it as their description (no -1 status).
        page = partition_page(dev, WAIT)
        assert page["latestRun"]["status"] == "FAILURE"
        [observed] = [e for e in page["events"] if e["__typename"] == "ObservationEvent"]
        assert observed["description"].startswith("FAILED · fetch: rate-limited")
        # A manual Source: run by hand, not before the publisher's wait (its Retry-After) ends.
        assert re.search(
            r"; HTTP 429; next attempt when run by hand, not before \d{4}-\d\d-\d\dT[\d:]{8}Z$",
            observed["description"],
        ), observed["description"]
        labels = {m["label"]: m for m in observed["metadataEntries"]}
        assert labels["http_status"]["intValue"] == 429

        # Every check on `signals` and the registry's was evaluated after the collection.
        signal_checks = checks_tab(dev, "signals")
        assert set(signal_checks) == SIGNALS_CHECKS
        assert all(e is not None and e["evaluation"] for e in signal_checks.values())
        registry = checks_tab(dev, "source_registry")
        assert registry["registry_validity"] is not None
        assert checks_tab(dev, "weekly_cleanup")["retention"] is not None
        overdue = signal_checks["overdue"]["evaluation"]["description"]
        # The headline states the finding (manual Sources are never overdue), no verdict word.
        assert overdue.startswith("No eligible Source past its cadence at "), overdue

        # A backfill of every partition from the UI: OK is checked, SLOW meets its minimum
        # interval (its last check passed: it stays materialized, the reason on its page),
        # WAIT meets the publisher's wait (it is still failing: the run fails naming it).
        launched = time.time()
        backfill = dev.launch_backfill(every)
        [run] = wait_for(
            "the backfill's run",
            lambda: runs_of(dev, **{"dagster/backfill": backfill}) or None,
            120,
        )
        figures["backfill_run_created_s"] = created_after(dev, run.run_id, launched)
        # The asset page's dialog targets the collection job, and the backfill runs it (the
        # Overview names it; no "Jobless asset materializations", no skipped check steps).
        assert dev.launch_dialog_job() == COLLECT_JOB_NAME
        assert run.job_name == COLLECT_JOB_NAME
        status = wait_for("the backfill's end", lambda: backfill_status(dev, backfill), 240)
        figures["backfill_done_s"] = round(time.time() - launched, 1)
        assert status == "COMPLETED_FAILED"
        # Its run's page: one step checked the three Sources (plan positions 1 to 3); the
        # step that records the partitions is the one that failed (WAIT's failed check).
        assert run_steps(dev, run.run_id) == {
            "signals.plan": "SUCCESS",
            "signals.check_sources[sources_1_3]": "SUCCESS",
            "signals.pages": "SUCCESS",
            "signals.signal_materialize": "FAILURE",
        }
        assert partition_health(dev) == {"materialized": [SLOW, OK], "failed": [WAIT]}
        slow = partition_page(dev, SLOW)["events"][0]
        assert slow["__typename"] == "MaterializationEvent"
        assert slow["description"].startswith("not checked (")
        meta = {m["label"]: m for m in slow["metadataEntries"]}
        assert meta["outcome"]["text"] == "skipped" and meta["last_success_at"]["text"]

        # Without the failing Source: Success, and every check evaluated after it.
        launched = time.time()
        second = dev.launch_backfill([SLOW, OK])
        status = wait_for("the second backfill's end", lambda: backfill_status(dev, second), 240)
        figures["second_backfill_done_s"] = round(time.time() - launched, 1)
        assert status == "COMPLETED_SUCCESS"
        [run] = runs_of(dev, **{"dagster/backfill": second})

        def checks_followed() -> dict[str, Any] | None:
            tab = checks_tab(dev, "signals")
            done = all(
                e is not None and e["status"] in ("SUCCEEDED", "FAILED") for e in tab.values()
            )
            return tab if done else None

        tab = wait_for("the checks after the backfill", checks_followed, 180)
        assert {e["runId"] for e in tab.values()} != {run.run_id}

        # A backfill of the failing Source alone, as a person launches it from the asset's
        # page: it fails, its run carried every check of `signals` and Dagster recorded them
        # "Execution failed"; the checks run that follows makes each newest execution an
        # evaluation again, agreeing with `radar report`.
        launched = time.time()
        failing = dev.launch_backfill([WAIT])
        status = wait_for("the failing backfill's end", lambda: backfill_status(dev, failing), 240)
        assert status == "COMPLETED_FAILED"
        [run] = runs_of(dev, **{"dagster/backfill": failing})
        # The scenario itself: the backfill's run carried the checks on `signals`.
        assert planned_checks(dev, run.run_id) == len(SIGNALS_CHECKS)
        newest = wait_for(
            "the checks after the failed backfill", lambda: evaluated_after(dev, run.run_id), 240
        )
        figures["failed_backfill_checks_true_s"] = round(time.time() - launched, 1)
        report = json.loads(home.run("report", "--json").stdout)
        agrees_with_report(newest, report)
        assert partition_health(dev) == {"materialized": [SLOW, OK], "failed": [WAIT]}
    record_figures("ui-truth", figures)
