"""`radar store migrate --to postgresql://...`: an embedded store moved into PostgreSQL gives
the same report and the same evidence verdicts, and the next collection there creates nothing.
Needs RADAR_TEST_STORE_URL (`make test-postgres`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.config import Settings
from radar_pipeline.core.store.connection import Store
from radar_pipeline_tests.conftest import store_url_under_test
from radar_pipeline_tests.evidencekit import radar_process
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

pytestmark = pytest.mark.skipif(
    not store_url_under_test(), reason="needs a PostgreSQL store: run `make test-postgres`"
)


def _run(*args: str, env: dict[str, Path], store_url: str) -> Any:
    """`radar ARGS --json` on the DuckDB file ("") or on the PostgreSQL store."""
    saved = os.environ.get("RADAR_STORE_URL")
    os.environ["RADAR_STORE_URL"] = store_url
    try:
        proc = radar_process(*args, "--json", env=env)
    finally:
        if saved is None:
            del os.environ["RADAR_STORE_URL"]
        else:
            os.environ["RADAR_STORE_URL"] = saved
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _verdicts(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in ("at", "asOf", "generatedAt")}


def test_an_embedded_store_moved_into_postgresql_reads_the_same(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url = store_url_under_test()  # radar_env emptied its schema
    vault = radar_env["vault"]
    items = [{"title": f"T{i}", "guid": f"g{i}", "link": f"https://e.com/{i}"} for i in range(4)]
    write_source(vault, "web", feed_server.add("/feed.xml", rss(items)))
    write_fixture_source(
        vault, "fixture", rss([{"title": "F", "guid": "f", "link": "https://e.com/f"}])
    )
    first = _run("collect", "--all", env=radar_env, store_url="")
    assert first["created"] == 5
    embedded = _run("report", env=radar_env, store_url="")

    moved = _run("store", "migrate", "--to", url, env=radar_env, store_url="")
    assert moved["tables"]["signals"] == 5
    assert moved["rows"] >= 5 and "***" not in url

    team = _run("report", env=radar_env, store_url=url)
    assert _verdicts(team) == _verdicts(embedded)
    again = _run("collect", "--all", env=radar_env, store_url=url)
    assert (again["created"], again["failed"]) == (0, 0), again
    outcomes = {s["id"]: s["outcome"] for s in again["sources"]}
    # The fixture's Signal is known there; the web Source's validators moved with its feed
    # state, so its conditional request is answered 304.
    assert outcomes == {"fixture": "passed", "web": "not-modified"}, again
    assert again["reused"] == 1
    assert len(signal_files(vault)) == 5

    # Into a store that already holds rows: refused, nothing merged.
    proc = radar_process("store", "migrate", "--to", url, env=radar_env)
    assert proc.returncode == 1
    assert "already holds rows" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    with Store(Settings.from_env().paths.db, url=url).transaction() as con:
        assert con.execute("SELECT count(*) FROM signals").fetchone() == (5,)
