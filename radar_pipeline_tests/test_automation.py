"""Automation says what it does and does it: every job, schedule, sensor, asset and check of
the Definitions has a description; each schedule's description names the cadence its cron
ticks at; `RADAR_AUTOMATION=stopped` starts every schedule and sensor stopped; the sensors'
tick length is defined once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import dagster as dg
import pytest

from radar_pipeline.core.config import REPO_ROOT

PACKAGE = REPO_ROOT / "radar_pipeline"


def _repository() -> dg.RepositoryDefinition:
    from radar_pipeline.definitions import defs

    return defs.get_repository_def()


def test_every_job_schedule_sensor_asset_and_check_has_a_description() -> None:
    repo = _repository()
    graph = repo.asset_graph
    described: dict[str, str | None] = {}
    for job in repo.get_all_jobs():
        if not job.name.startswith("__"):  # Dagster's implicit asset job, hidden in the UI
            described[f"job {job.name}"] = job.description
    described |= {f"schedule {s.name}": s.description for s in repo.schedule_defs}
    described |= {f"sensor {s.name}": s.description for s in repo.sensor_defs}
    for key in graph.get_all_asset_keys():
        described[f"asset {key.to_user_string()}"] = graph.get(key).description
    for check in graph.asset_check_keys:
        described[f"check {check.to_user_string()}"] = graph.get(check).description
    missing = sorted(name for name, text in described.items() if not (text or "").strip())
    assert not missing, f"no description: {missing}"
    # Every kind is there: the loop above saw each of them.
    kinds = {name.split()[0] for name in described}
    assert kinds == {"job", "schedule", "sensor", "asset", "check"}


def _cadence(cron: str) -> str:
    """The cadence a five-field cron ticks at, in the words a description uses."""
    minute, hour, day, month, weekday = cron.split()
    if cron == "* * * * *":
        return "every minute"
    if minute.isdigit() and hour.isdigit() and day == month == "*":
        return "daily" if weekday == "*" else "weekly"
    raise AssertionError(f"no cadence word for cron {cron!r}")


def test_each_schedule_ticks_at_the_cadence_it_describes() -> None:
    schedules = _repository().schedule_defs
    assert schedules
    for schedule in schedules:
        cron = schedule.cron_schedule
        assert isinstance(cron, str)
        words = _cadence(cron)
        text = (schedule.description or "").lower()
        assert words in text, f"{schedule.name}: cron {cron!r} but described as {text!r}"
        others = {"every minute", "daily", "weekly"} - {words}
        assert not [w for w in others if re.search(rf"\b{w}\b", text)], (schedule.name, text)
    by_name = {s.name: s for s in schedules}
    assert by_name["run_history_schedule"].cron_schedule == "30 0 * * *"


PROBE = (
    "import json; from radar_pipeline.definitions import defs; r = defs.get_repository_def(); "
    "print(json.dumps({d.name: d.default_status.value for d in "
    "[*r.schedule_defs, *r.sensor_defs]}))"
)


@pytest.mark.parametrize(("value", "status"), [("", "RUNNING"), ("stopped", "STOPPED")])
def test_radar_automation_sets_every_default_status(value: str, status: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RADAR_AUTOMATION"}
    if value:
        env["RADAR_AUTOMATION"] = value
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    statuses = json.loads(proc.stdout)
    repo = _repository()
    assert set(statuses) == {d.name for d in [*repo.schedule_defs, *repo.sensor_defs]}
    assert set(statuses.values()) == {status}


def test_the_sensor_tick_is_defined_once() -> None:
    definitions = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^TICK_SECONDS\s*=", path.read_text(encoding="utf-8"), re.M)
    ]
    assert definitions == ["radar_pipeline/defs/automation.py"]
