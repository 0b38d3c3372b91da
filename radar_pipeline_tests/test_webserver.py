"""`make ui` as a user runs it: dg dev on a loopback port, asked through its GraphQL API
for what the UI shows, then stopped with Ctrl-C (SIGINT to its process group); and as a script
runs it, in the background (SIGINT ignored, as POSIX gives a background job), stopped by
SIGTERM to the PID it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.config import REPO_ROOT
from radar_pipeline_tests.daemonkit import (
    as_a_shell_gives,
    free_port,
    graphql,
    group_alive,
    stop_group,
    terminal_like,
    wait_serving,
)
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

QUERY = """
{
  assetNodes(assetKeys: [{path: ["signals"]}]) {
    partitionKeys
    dependencyKeys { path }
    assetChecksOrError { ... on AssetChecks { checks { name } } }
    internalFreshnessPolicy { ... on TimeWindowFreshnessPolicy { failWindowSeconds } }
  }
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes { sensors { name sensorState { status } } schedules { name } }
    }
  }
}
"""

# What Overview > Automation lists for each schedule and sensor: its name, description,
# status, cadence and latest ticks (with the skip reason a tick shows); and the jobs.
AUTOMATION = """
{
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        jobs { name description }
        schedules { name description cronSchedule
          scheduleState { status ticks(limit: 5) { status skipReason } } }
        sensors { name description
          sensorState { status ticks(limit: 25) { status skipReason } } }
      }
    }
  }
  assetNodes { assetKey { path } description isMaterializable isObservable }
}
"""


def automation(base: str) -> dict[str, Any]:
    """The Automation page's schedules and sensors, and the jobs and assets, by name."""
    data = graphql(base, AUTOMATION)
    [repo] = data["repositoriesOrError"]["nodes"]
    return {
        "jobs": {j["name"]: j for j in repo["jobs"] if not j["name"].startswith("__")},
        "schedules": {s["name"]: s for s in repo["schedules"]},
        "sensors": {s["name"]: s for s in repo["sensors"]},
        "assets": {"/".join(a["assetKey"]["path"]): a for a in data["assetNodes"]},
    }


def start_ui(
    target: str, port: int, log_path: Path, background: bool = False
) -> subprocess.Popen[bytes]:
    """`make <target>` in its own session: as from a terminal (SIGINT at its default), or,
    `background`, as `setsid make ui &` from a script (SIGINT ignored, as POSIX gives an
    asynchronous command when job control is off)."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            ["make", "--no-print-directory", target, f"UI_PORT={port}"],
            cwd=REPO_ROOT,
            env={k: v for k, v in os.environ.items() if k != "RADAR_AUTOMATION"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=as_background_job if background else terminal_like,
        )


def as_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    as_a_shell_gives()


def ui_graphql(base: str) -> dict[str, Any]:
    return graphql(base, QUERY)


@pytest.mark.slow  # dagster dev takes ~10-30 s to serve on a busy 2-core machine
def test_make_ui_serves_signals_and_stops_on_ctrl_c(radar_env: dict[str, Path]) -> None:
    from radar_pipeline.definitions import defs

    vault, home = radar_env["vault"], radar_env["home"]
    feed = rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])
    for sid in ("fx-a", "fx-b"):  # manual cadence: nothing is due, no run starts
        write_fixture_source(vault, sid, feed)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = radar_env["root"] / "ui.log"
    proc = start_ui("ui", port, log_path)
    try:
        wait_serving(base, proc, log_path, 180)

        # The registry sensor, run by the daemon inside dagster dev, adds the partitions.
        deadline = time.monotonic() + 120
        while True:
            data = ui_graphql(base)
            [node] = data["assetNodes"]
            if sorted(node["partitionKeys"]) == ["fx-a", "fx-b"] or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert sorted(node["partitionKeys"]) == ["fx-a", "fx-b"]
        assert "on_cadence" in {c["name"] for c in node["assetChecksOrError"]["checks"]}
        assert node["internalFreshnessPolicy"] == {"failWindowSeconds": 86400}
        [repo] = data["repositoriesOrError"]["nodes"]
        sensors = {s["name"]: s["sensorState"]["status"] for s in repo["sensors"]}
        assert sensors == {s.name: "RUNNING" for s in defs.sensors or []}
        assert node["dependencyKeys"] == [{"path": ["source_registry"]}]
        shown = automation(base)
        # Every schedule, sensor, job and asset says what it does; the prune ticks daily.
        for kind in ("jobs", "schedules", "sensors", "assets"):
            blank = [name for name, d in shown[kind].items() if not d["description"]]
            assert not blank, f"{kind} without a description: {blank}"
        assert shown["schedules"]["run_history_schedule"]["cronSchedule"] == "30 0 * * *"
        assert {s["scheduleState"]["status"] for s in shown["schedules"].values()} == {"RUNNING"}
        # The registry is observed, not materialized; its sensor's tick says what it did.
        registry = shown["assets"]["source_registry"]
        assert not registry["isMaterializable"]
        ticks = shown["sensors"]["source_registry_sensor"]["sensorState"]["ticks"]
        reasons = " | ".join(t["skipReason"] or "" for t in ticks)
        assert "added 2 partition(s): fx-a, fx-b" in reasons, ticks
        assert "registry observed (2 valid Sources, 0 issues)" in reasons, ticks
        assert "empty result" not in reasons
        assert {"idempotency", "provenance", "overdue", "agreement"} <= {
            c["name"] for c in node["assetChecksOrError"]["checks"]
        }
        assert {s["name"] for s in repo["schedules"]} == {s.name for s in defs.schedules or []}
        # `make ui` set up the empty DAGSTER_HOME, and the instance stores there.
        assert (home / "dagster.yaml").read_text() == (REPO_ROOT / "dagster.yaml").read_text()
        assert (home / "history").is_dir()
    finally:
        survivors = stop_group(proc)  # Ctrl-C in the terminal
    assert not survivors, f"processes of `make ui` outlived Ctrl-C: {survivors}"
    assert proc.returncode is not None
    # The instance home is the documented one, and Dagster does not say otherwise; the start
    # is the one Dagster 1.13 recommends (`dg dev`), so no warning points at another.
    log = log_path.read_text(errors="replace")
    assert "will not be used" not in log and f"instance {home}" in log, log[-2000:]
    assert "dg dev on http" in log and "Supersession" not in log, log[-2000:]


@pytest.mark.slow
def test_make_ui_paused_starts_every_schedule_and_sensor_stopped(
    radar_env: dict[str, Path],
) -> None:
    from radar_pipeline.definitions import defs

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = radar_env["root"] / "ui-paused.log"
    proc = start_ui("ui-paused", port, log_path)
    try:
        wait_serving(base, proc, log_path, 180)
        shown = automation(base)
        schedules = {n: s["scheduleState"]["status"] for n, s in shown["schedules"].items()}
        sensors = {n: s["sensorState"]["status"] for n, s in shown["sensors"].items()}
        assert schedules == {s.name: "STOPPED" for s in defs.schedules or []}
        assert sensors == {s.name: "STOPPED" for s in defs.sensors or []}
        # Stopped means no tick at all: the registry sensor did not add the partitions.
        assert not any(s["sensorState"]["ticks"] for s in shown["sensors"].values())
    finally:
        survivors = stop_group(proc)
    assert not survivors, f"processes of `make ui-paused` outlived Ctrl-C: {survivors}"
    assert "STOPPED by default" in log_path.read_text(errors="replace")


# How long the whole tree may take to stop after SIGTERM: the webserver and the daemon are
# told at once; measured 3-10 s on a quiet 2-core machine, while 60 s did not suffice once in a
# full `make test` on a loaded one (6 processes left): the bound of every other stop of the
# group (stop_group's grace for Ctrl-C is 90 s), with room.
STOP_BOUND_S = 120


@pytest.mark.slow
def test_make_ui_started_in_the_background_stops_on_sigterm_to_its_pid(
    radar_env: dict[str, Path],
) -> None:
    """A script's `setsid make ui &` then `kill <pid>`: nothing of the group is left."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = radar_env["root"] / "ui-background.log"
    proc = start_ui("ui-paused", port, log_path, background=True)
    try:
        wait_serving(base, proc, log_path, 180)
        assert len(group_alive(proc.pid)) >= 3  # make's dg dev, its webserver and daemon
        os.kill(proc.pid, signal.SIGTERM)  # to make, the process the script started
        sent = time.monotonic()
        while group_alive(proc.pid) and time.monotonic() < sent + STOP_BOUND_S:
            proc.poll()
            time.sleep(0.5)
        stopped_s = time.monotonic() - sent
        left = commands(group_alive(proc.pid))  # read before the clean-up below ends them
    finally:
        stop_group(proc, grace_s=5)
    assert not left, (
        f"processes of `make ui` left {stopped_s:.0f} s after SIGTERM: {left}\n"
        + log_path.read_text(errors="replace")[-4000:]
    )


def commands(pids: list[int]) -> list[str]:
    """Each process's command line as /proc read it when it was seen alive (or its pid)."""
    lines = []
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            raw = b""
        text = raw.replace(b"\0", b" ").decode(errors="replace")
        lines.append(f"{pid}: {text[:200]}")
    return lines
