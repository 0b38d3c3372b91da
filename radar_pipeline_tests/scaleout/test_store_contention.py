"""DuckDB's single-writer rule across processes: a held file is waited for, and counted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from radar_pipeline.core.store.connection import Store, lock_wait_stats
from radar_pipeline.core.store.migrations import SCHEMA_VERSION

HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


def test_a_held_file_is_waited_for_and_the_wait_counted(tmp_path: Path) -> None:
    db = tmp_path / "radar.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), "1.0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = lock_wait_stats()
        assert Store(db).schema_version() == SCHEMA_VERSION  # blocks until the holder lets go
        after = lock_wait_stats()
    finally:
        holder.wait(timeout=30)
    assert after.connects == before.connects + 1
    assert after.waited == before.waited + 1
    assert 0.2 < after.wait_s - before.wait_s < 30
