"""The store as the machine breaks it: a DuckDB file cut short (by half: it does not open; by a
tenth: it opens and fails halfway through a collection), a header that fails its checksum, a
file another process holds. Each ends in one line naming the file and what to do; `radar index
rebuild` moves an unreadable file aside (never deletes it), lists what the vault cannot give
back, and the next collection creates nothing twice and loses nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from radar_pipeline.core.errors import StoreError, StoreLocked, explain
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.store.connection import Store, StoreSettings
from radar_pipeline.core.store.heal import (
    NOT_RESTORED,
    move_aside_if_unreadable,
    unreadable_reason,
)
from radar_pipeline_tests.faults.farm import (
    FULL,
    Farm,
    RadarHome,
    check_invariants,
    collect_json,
    epoch_time,
    record_figures,
)
from radar_pipeline_tests.feedserver import FeedServer


def _stamp(farm: Farm) -> str:
    return epoch_time(farm.epoch).strftime("%Y-%m-%dT%H:%M:%SZ")


def _setup(tmp_path: Path, server: FeedServer) -> tuple[Farm, RadarHome]:
    farm = Farm(server, count=3)
    home = RadarHome(tmp_path / "h")
    farm.write_sources(home.vault)
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and report["created"] > 0, stderr
    return farm, home


def _snapshot(vault: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (vault / SIGNALS_DIR).glob("*.md")}


def _the_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("radar: "), stderr
    assert not lines[0].endswith(":"), stderr
    return lines[0]


def _heal_and_go_on(farm: Farm, home: RadarHome, before: dict[str, bytes], broken: bytes) -> None:
    """`index rebuild` moves the broken file aside and says what is not restored; the next
    collection creates nothing twice (its fetches are unconditional) and loses nothing."""
    rebuild = home.run("index", "rebuild", "--json")
    assert rebuild.returncode == 0, rebuild.stderr
    payload = json.loads(rebuild.stdout)
    assert payload["indexed"] == len(before)
    moved = Path(payload["movedAside"])
    assert moved.read_bytes() == broken, "the unreadable file must be kept, not deleted"
    assert payload["notRestored"] == list(NOT_RESTORED) and payload["movedAsideReason"]
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and not stderr.strip(), stderr
    assert report["created"] == 6 * len(farm.sources), "only the new epoch's items are new"
    assert report["reused"] > 0
    assert check_invariants(home, farm, settled=True, expect_all_items=True) == []
    assert all(_snapshot(home.vault)[name] == data for name, data in before.items())


@pytest.mark.slow
@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_store_cut_short_names_rebuild_and_heals(
    tmp_path: Path, feed_server: FeedServer, keep: float
) -> None:
    farm, home = _setup(tmp_path, feed_server)
    before = _snapshot(home.vault)
    os.truncate(home.db, int(home.db.stat().st_size * keep))
    broken = home.db.read_bytes()
    farm.advance()
    code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    line = _the_line(stderr)
    assert code == 1
    # Cut by half the file does not open; by a tenth it opens and a read halfway fails, in
    # the Dagster run: the same line either way, with the run named first.
    assert line.endswith(f"store unreadable: {home.db}; run `radar index rebuild`"), line
    assert _snapshot(home.vault) == before
    _heal_and_go_on(farm, home, before, broken)
    record_figures(f"store-cut-{keep}", {"collect_stderr": line})


@pytest.mark.slow
def test_a_store_header_failing_its_checksum_heals(tmp_path: Path, feed_server: FeedServer) -> None:
    farm, home = _setup(tmp_path, feed_server)
    before = _snapshot(home.vault)
    with open(home.db, "r+b") as handle:  # the storage version a newer DuckDB might write
        handle.seek(12)
        handle.write((9999).to_bytes(8, "little"))
    broken = home.db.read_bytes()
    farm.advance()
    code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    line = _the_line(stderr)
    assert code == 1 and line == f"radar: store unreadable: {home.db}; run `radar index rebuild`"
    _heal_and_go_on(farm, home, before, broken)


def _hold(db: Path) -> subprocess.Popen[str]:
    """A second process holding the DuckDB file open until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,sys\nc=duckdb.connect({str(db)!r})\nprint('held',flush=True)\n"
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_held_store_names_the_holder_and_is_never_moved(tmp_path: Path) -> None:
    db = tmp_path / "radar.duckdb"
    Store(db).schema_version()
    holder = _hold(db)
    try:
        with pytest.raises(StoreError) as raised:
            Store(db, StoreSettings(lock_timeout_s=0.5)).schema_version()
        assert move_aside_if_unreadable(db, datetime.now(UTC)) is None
    finally:
        holder.communicate("")
    assert isinstance(raised.value, StoreLocked)
    assert raised.value.holder_pid == holder.pid and raised.value.holder_process
    why = explain(raised.value)
    assert why.error_class == "store-locked"
    assert why.line.startswith(f"store {db} is held by PID {holder.pid} (")
    assert f"PID {holder.pid}" in str(raised.value) and "stayed locked for 0 s" in str(raised.value)
    assert db.exists() and Store(db).schema_version() > 0


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="waits the CLI's full 120 s lock timeout: `make faults`")
def test_collect_against_a_held_store_names_the_holder(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    farm, home = _setup(tmp_path, feed_server)
    holder = _hold(home.db)
    try:
        farm.advance()
        code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    finally:
        holder.communicate("")
    line = _the_line(stderr)
    assert code == 1 and f"is held by PID {holder.pid} (" in line, line
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and not stderr.strip(), stderr
    assert check_invariants(home, farm, settled=True, expect_all_items=True) == []


def test_a_readable_store_is_never_moved(tmp_path: Path) -> None:
    db = tmp_path / "radar.duckdb"
    Store(db).schema_version()
    assert unreadable_reason(db) is None
    assert move_aside_if_unreadable(db, datetime.now(UTC)) is None and db.exists()
