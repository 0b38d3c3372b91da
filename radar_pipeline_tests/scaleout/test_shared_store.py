"""Workers on several hosts share one PostgreSQL store and one vault (the team profile).

Two `radar collect` processes, each with its own Dagster home, collect the same Sources at the
same time into one vault and one store: every Signal is made exactly once. The per-Source
advisory locks hold across lock folders (two hosts do not share flock), and a worker killed
while it holds them leaves none behind. Needs RADAR_TEST_STORE_URL (`make test-postgres`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.postgres import SOURCE_LOCK_CLASS, connect, source_lock_key
from radar_pipeline_tests.conftest import store_url_under_test
from radar_pipeline_tests.feedserver import FeedServer, drip
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source


def held_source_locks(url: str) -> list[int]:
    """The Source lock keys any session of the server holds now (pg_locks)."""
    con = connect(url)
    try:
        rows = con.raw.execute(
            "SELECT objid::INTEGER FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 "
            "AND granted",
            [SOURCE_LOCK_CLASS],
        ).fetchall()
        return [int(r[0]) for r in rows]
    finally:
        con.close()


pytestmark = pytest.mark.skipif(
    not store_url_under_test(), reason="needs a PostgreSQL store: run `make test-postgres`"
)

RADAR = str(Path(sys.executable).parent / "radar")
SOURCES = ("alpha", "beta", "gamma", "delta")
ITEMS_PER_SOURCE = 5


def _worker_env(radar_env: dict[str, Path], name: str) -> dict[str, str]:
    """One worker's environment: the shared vault and store, its own Dagster home."""
    home = radar_env["root"] / f"home-{name}"
    home.mkdir(exist_ok=True)
    return {**os.environ, "DAGSTER_HOME": str(home), "RADAR_VAULT": str(radar_env["vault"])}


def _feed(source: str) -> bytes:
    return rss(
        [
            {
                "title": f"{source} {i}",
                "guid": f"{source}-{i}",
                "link": f"https://e.com/{source}/{i}",
            }
            for i in range(ITEMS_PER_SOURCE)
        ]
    )


@pytest.mark.slow
def test_two_workers_collecting_the_same_sources_make_each_signal_once(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    for source in SOURCES:
        write_source(vault, source, feed_server.add(f"/{source}.xml", _feed(source), latency_s=0.3))
    write_fixture_source(
        vault, "fixture", rss([{"title": "F", "guid": "f-1", "link": "https://e.com/f/1"}])
    )
    workers = [
        subprocess.Popen(
            [RADAR, "collect", "--all", "--json"],
            env=_worker_env(radar_env, name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    reports = []
    for proc in workers:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))

    expected = len(SOURCES) * ITEMS_PER_SOURCE + 1
    assert sum(r["created"] for r in reports) == expected, reports
    files = signal_files(vault)
    assert len(files) == expected
    with Store.of(Settings.from_env().paths).transaction() as con:
        row = con.execute("SELECT count(*), count(DISTINCT identity) FROM signals").fetchone()
    assert row == (expected, expected)
    assert {p.stem for p in files} == _indexed_ids()
    # A Source either worker left aside was skipped for the other's lock, nothing else.
    for report in reports:
        for source in report["sources"]:
            assert source["outcome"] in ("passed", "skipped"), source
            if source["outcome"] == "skipped":
                assert "lock" in (source["error"] or ""), source
    assert held_source_locks(store_url_under_test()) == []


def _indexed_ids() -> set[str]:
    with Store.of(Settings.from_env().paths).transaction() as con:
        return {str(r[0]) for r in con.execute("SELECT signal_id FROM signals").fetchall()}


def test_the_advisory_lock_holds_across_hosts_that_share_no_lock_folder(
    radar_env: dict[str, Path],
) -> None:
    store = Store.of(Settings.from_env().paths)
    # Two hosts: each its own lock folder (flock does not reach across machines).
    first = LockBook(radar_env["root"] / "host-a", store.source_locks())
    second = LockBook(radar_env["root"] / "host-b", store.source_locks())
    try:
        assert first.try_acquire("c1", "alpha")
        assert not second.try_acquire("c2", "alpha")
        assert second.try_acquire("c2", "beta")
        first.release_all("c1")
        assert second.try_acquire("c2", "alpha")
    finally:
        first.release_all()
        second.release_all()
    assert held_source_locks(store_url_under_test()) == []


@pytest.mark.slow
def test_a_worker_killed_while_it_holds_a_source_leaves_no_lock(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    body = _feed("slow")
    write_source(vault, "slow", feed_server.add("/slow.xml", handler=drip(body, interval_s=0.05)))
    env = _worker_env(radar_env, "killed")
    proc = subprocess.Popen(
        [RADAR, "collect", "--source", "slow", "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = store_url_under_test()
    try:
        deadline = time.monotonic() + 120
        while source_lock_key("slow") not in held_source_locks(url):
            assert proc.poll() is None, "the worker ended before it took the lock"
            assert time.monotonic() < deadline, "the worker never took the Source's lock"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while held_source_locks(url):  # the server ends the session when its socket closes
        assert time.monotonic() < deadline, "the killed worker's lock outlived it"
        time.sleep(0.2)

    feed_server.add("/slow.xml", body)  # answered at once now
    again = subprocess.run(
        [RADAR, "collect", "--source", "slow", "--json"],
        env=_worker_env(radar_env, "next"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert [s["outcome"] for s in report["sources"]] == ["passed"], report
    assert report["created"] == ITEMS_PER_SOURCE
    assert held_source_locks(url) == []
