"""`make ui` as a user runs it: dagster dev on a loopback port, asked through its GraphQL API
for what the UI shows, then stopped with Ctrl-C (SIGINT to its process group)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from radar_pipeline.core.config import REPO_ROOT
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def terminal_like() -> None:
    """What an interactive shell gives a foreground job: SIGINT at its default. (A process
    started in the background by a script inherits SIGINT ignored; dagster-notes.md.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def graphql(base: str) -> dict[str, Any]:
    response = httpx.post(f"{base}/graphql", json={"query": QUERY}, timeout=30)
    response.raise_for_status()
    data: dict[str, Any] = response.json()["data"]
    return data


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
    pgid = proc.pid
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "dagster dev never answered /server_info"
            try:
                if httpx.get(f"{base}/server_info", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)

        # The registry sensor, run by the daemon inside dagster dev, adds the partitions.
        deadline = time.monotonic() + 120
        while True:
            data = graphql(base)
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
            "due_sources_sensor": "RUNNING",
            "source_freshness_sensor": "RUNNING",
            "run_failure_dead_letter_sensor": "RUNNING",
            "signal_checks_after_collection": "RUNNING",
        }
        assert {s["name"] for s in repo["schedules"]} == {s.name for s in defs.schedules or []}
        # `make ui` set up the empty DAGSTER_HOME, and the instance stores there.
        assert (home / "dagster.yaml").read_text() == (REPO_ROOT / "dagster.yaml").read_text()
        assert (home / "history").is_dir()
    finally:
        if proc.poll() is None:
            os.killpg(pgid, signal.SIGINT)  # Ctrl-C in the terminal
        stopped_at = time.monotonic()
        while time.monotonic() < stopped_at + 90:
            proc.poll()  # reap `make` itself
            if not group_alive(pgid):
                break
            time.sleep(0.5)
        survivors = group_alive(pgid)
        if survivors:
            os.killpg(pgid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert not survivors, f"processes of `make ui` outlived Ctrl-C: {survivors}"
    assert proc.returncode is not None
