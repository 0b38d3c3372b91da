"""DuckDB's single-writer rule across processes: a held file is waited for, and the wait
logged (`radar_lock_wait_s` on the store's log record)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.migrations import SCHEMA_VERSION

HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_a_held_file_is_waited_for_and_the_wait_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "radar.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), "1.0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with caplog.at_level(logging.INFO, logger="radar_pipeline.core.store.connection"):
            assert Store(db).schema_version() == SCHEMA_VERSION  # blocks until the holder ends
    finally:
        holder.wait(timeout=30)
    waits = [r.radar_lock_wait_s for r in caplog.records if hasattr(r, "radar_lock_wait_s")]
    assert len(waits) == 1
    assert 0.2 < waits[0] < 30
