"""A sensor's tick says what it did, as a person reads it in the UI: a sensor's page lists its
tick history with the document the page sends (`TickHistoryQuery`, captured from the
`dagster dev` 1.13 bundle into `ui_queries/`), against a real `dagster dev` whose daemon ticks
the sensors in a temp home. No tick reads Dagster's "Sensor function returned an empty
result": the sensors that follow runs name what they saw (defs/run_watch.py), idle or not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.definitions import defs
from radar_pipeline.defs.history.jobs import PRUNE_JOB_NAME
from radar_pipeline_tests.daemonkit import LAUNCH_RUN, DagsterDev, wait_for
from radar_pipeline_tests.faults.farm import RadarHome

QUERY = (Path(__file__).parent / "ui_queries" / "TickHistoryQuery.graphql").read_text()
UTC_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
# The sensors that follow runs, and the status each follows.
FOLLOWING = {
    "run_failure_dead_letter_sensor": "failed",
    "signal_checks_after_collection": "succeeded",
    "signal_checks_after_failed_collection": "failed",
    "evidence_after_checks": "succeeded",
}


def tick_history(dev: DagsterDev, sensor: str) -> list[dict[str, Any]]:
    """A sensor page's tick history, oldest first."""
    location, repository = dev.location()
    selector = {"repositoryLocationName": location, "repositoryName": repository, "name": sensor}
    data = dev.graphql(QUERY, {"instigationSelector": selector, "limit": 25})
    assert "errors" not in data, data
    state = data["instigationStateOrError"]
    assert state["__typename"] == "InstigationState", state
    return sorted(state["ticks"], key=lambda t: float(t["timestamp"]))


def launch(dev: DagsterDev, job: str) -> str:
    """The Launchpad's "Launch run" of an unpartitioned job (queued, launched by the daemon)."""
    location, repository = dev.location()
    selector = {"repositoryLocationName": location, "repositoryName": repository, "jobName": job}
    params = {"selector": selector, "runConfigData": {}, "mode": "default"}
    result = dev.graphql(LAUNCH_RUN, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return str(result["run"]["runId"])


def ticked_twice(dev: DagsterDev) -> dict[str, list[dict[str, Any]]] | None:
    ticks = {name: tick_history(dev, name) for name in FOLLOWING}
    return ticks if all(len(t) >= 2 for t in ticks.values()) else None


def reasons(ticks: list[dict[str, Any]]) -> list[str]:
    return [str(t["skipReason"]) for t in ticks]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_every_tick_says_what_the_sensor_saw(tmp_path: Path) -> None:
    home = RadarHome(tmp_path / "h")
    with DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log") as dev:
        # The first tick starts watching; the next, with no run ended, says so.
        history = wait_for("two ticks of each sensor", lambda: ticked_twice(dev), 240, 5)
        for name, verb in FOLLOWING.items():
            first, idle, *_ = history[name]
            assert first["status"] == idle["status"] == "SKIPPED", history[name]
            found = re.fullmatch(
                rf"first tick: following runs that {verb} from now \(({UTC_TIME})\); "
                "earlier runs are not replayed",
                first["skipReason"],
            )
            assert found, first
            assert idle["skipReason"] == f"no run {verb} since {found.group(1)}", idle

        # A run the daemon launched ends: the next tick of each sensor of its status names it.
        run_id = launch(dev, PRUNE_JOB_NAME)

        def named(name: str) -> str | None:
            said = [r for r in reasons(tick_history(dev, name)) if run_id in r]
            return said[0] if said else None

        checks = wait_for(
            "the checks sensor's word", lambda: named("signal_checks_after_collection"), 240, 5
        )
        assert (
            checks == f"1 run(s) succeeded: run {run_id} of {PRUNE_JOB_NAME} collected no Signals"
        )
        evidence = wait_for(
            "the evidence sensor's word", lambda: named("evidence_after_checks"), 120, 5
        )
        assert (
            evidence == f"1 run(s) succeeded: run {run_id} of {PRUNE_JOB_NAME} evaluated no check"
        )

        # Nowhere on Automation does a sensor's tick read Dagster's wrapper text.
        for sensor in defs.sensors or []:
            said = reasons(tick_history(dev, sensor.name))
            assert not [r for r in said if "empty result" in r], (sensor.name, said)
