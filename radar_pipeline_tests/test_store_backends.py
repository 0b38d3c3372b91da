"""The store's two backends: the embedded DuckDB file stays as it was (no PostgreSQL driver
loaded), and the dialect translation of core/store/postgres.py, statement by statement."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import StoreError
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.migrations import SCHEMA_VERSION
from radar_pipeline.core.store.postgres import postgres_text, redacted
from radar_pipeline_tests.conftest import store_url_under_test
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

_NO_DRIVER = """
import sys
from radar_pipeline.cli import main
code = main(["collect", "--all", "--json"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "psycopg2"))
loaded += [m for m in sys.modules if m == "radar_pipeline.core.store.postgres"]
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def test_embedded_collection_loads_no_postgresql_driver(radar_env: dict[str, Path]) -> None:
    if store_url_under_test():
        pytest.skip("the embedded profile only")
    write_fixture_source(radar_env["vault"], "fixture", rss([{"title": "A", "guid": "g"}]))
    env = {k: v for k, v in os.environ.items() if k != "RADAR_STORE_URL"}
    proc = subprocess.run(
        [sys.executable, "-c", _NO_DRIVER], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stderr, proc.stderr
    assert radar_env["db"].exists()  # the DuckDB file at RADAR_DB holds the provenance


def test_marks_and_percent_signs_are_translated_outside_quotes_only() -> None:
    sql = "SELECT a FROM t WHERE b = ? AND c LIKE 'pending:%' AND d = '?' AND e % 2 = ?"
    assert postgres_text(sql) == (
        "SELECT a FROM t WHERE b = %s AND c LIKE 'pending:%%' AND d = '?' AND e %% 2 = %s"
    )


def test_type_names_postgresql_spells_differently() -> None:
    assert postgres_text("CREATE TABLE t (h UBIGINT, d DOUBLE, p DOUBLE PRECISION)") == (
        "CREATE TABLE t (h NUMERIC(20), d DOUBLE PRECISION, p DOUBLE PRECISION)"
    )
    assert postgres_text("SELECT unnest(?::UBIGINT[]), unnest(?::DOUBLE[])") == (
        "SELECT unnest(%s::NUMERIC(20)[]), unnest(%s::DOUBLE PRECISION[])"
    )


def test_a_url_in_a_message_carries_no_password() -> None:
    assert (
        redacted("postgresql://radar:s3cret@db:5432/radar")
        == "postgresql://radar:***@db:5432/radar"
    )


def test_an_unreachable_postgresql_store_is_one_clear_error(tmp_path: Path) -> None:
    # A port nothing listens on (bound and closed): the connection is refused at once.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://radar:pw@127.0.0.1:{port}/radar"
    store = Store.of(RadarPaths(tmp_path / "vault", tmp_path / "radar.duckdb", store_url=url))
    with pytest.raises(StoreError, match=r"cannot connect to the PostgreSQL store") as err:
        store.schema_version()
    assert "pw" not in str(err.value).replace("PostgreSQL", "")
    assert not (tmp_path / "radar.duckdb").exists()


def test_the_store_of_the_settings_is_migrated_at_start(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    assert bool(store.url) == bool(store_url_under_test())
