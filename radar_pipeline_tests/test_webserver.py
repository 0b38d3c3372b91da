"""`make ui` as a user runs it: dagster dev on a loopback port, asked through its GraphQL API
for what the UI shows, then stopped with Ctrl-C (SIGINT to its process group)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.config import REPO_ROOT
from radar_pipeline_tests.daemonkit import (
    free_port,
    graphql,
    stop_group,
    terminal_like,
    wait_serving,
)
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

QUERY = """
{
  assetNodes(assetKeys: [{path: ["signals"]}]) {
    partitionKeys
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
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "ui", f"UI_PORT={port}"],
            cwd=REPO_ROOT,
            env=dict(os.environ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=terminal_like,
        )
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
        assert sensors == {
            "source_registry_sensor": "RUNNING",
            "source_freshness_sensor": "RUNNING",
            "run_failure_dead_letter_sensor": "RUNNING",
            "signal_checks_after_collection": "RUNNING",
            "signal_checks_after_failed_collection": "RUNNING",
        }
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
