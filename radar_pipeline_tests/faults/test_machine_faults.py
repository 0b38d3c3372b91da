"""Faults of the Radar's own machine, on real mounts: the vault's disk full (a small tmpfs), the
store's disk full, a read-only vault (a read-only bind mount). Each run ends in one line naming
the root cause, its path and what to do; each Source the run was checking records the attempt,
the failure's class and a dead letter (in the store, in its file, or in a journal the next run
records first); nothing is half-written or lost and the next run, once the disk is fixed,
collects every item exactly once.

Mounting needs root (CAP_SYS_ADMIN); where `mount` is refused each test is skipped, saying so.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

from radar_pipeline.core.collect.run_failure import JOURNAL_DIR
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.store.dead_letters import RUN_FAILURE_STAGE
from radar_pipeline_tests.faults.farm import (
    Farm,
    RadarHome,
    check_invariants,
    collect_json,
    epoch_time,
    record_figures,
)
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import write_source


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"`mount {' '.join(args)}` refused: {proc.stderr.strip()}")


@contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of `size` at `where`, unmounted (lazily) when the block ends."""
    where.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@contextmanager
def _read_only(where: Path) -> Iterator[Path]:
    """`where` bound onto itself read-only until the block ends."""
    _mount("--bind", str(where), str(where))
    try:
        _mount("-o", "remount,bind,ro", str(where))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(folder: Path) -> Path:
    """Write a filler file into `folder` until its file system says ENOSPC."""
    filler = folder / "filler.bin"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def _stamp(farm: Farm) -> str:
    return epoch_time(farm.epoch).strftime("%Y-%m-%dT%H:%M:%SZ")


def _the_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("radar: "), stderr
    assert not lines[0].endswith(":"), stderr
    return lines[0]


def _first_run(farm: Farm, home: RadarHome) -> dict[str, bytes]:
    farm.write_sources(home.vault)
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and report["created"] > 0, stderr
    return {p.name: p.read_bytes() for p in (home.vault / SIGNALS_DIR).glob("*.md")}


def _recorded_per_source(home: RadarHome, farm: Farm, error_class: str, stamp: str) -> None:
    """Each Source of the failed run: its feed state names the class and the attempt, and an
    open dead letter carries the line."""
    ids = {s.source_id for s in farm.sources}
    states = home.rows("SELECT source_id, error_state, last_attempt_at FROM feed_state")
    assert {r[0] for r in states} == ids
    for source_id, state, attempt in states:
        assert state == error_class, (source_id, state)
        assert attempt.strftime("%Y-%m-%dT%H:%M:%SZ") == stamp, (source_id, attempt)
    letters = home.rows(
        "SELECT source_id, error_class, message FROM dead_letters "
        f"WHERE status = 'open' AND stage = '{RUN_FAILURE_STAGE}'"
    )
    assert {r[0] for r in letters} == ids and {r[1] for r in letters} == {error_class}


def _heals(farm: Farm, home: RadarHome, before: dict[str, bytes]) -> None:
    """The next run, on a machine fixed: records what was journaled, then collects every item
    once; no Signal changed, no temp file left, no journal left."""
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and not stderr.strip(), stderr
    assert report["created"] == 6 * len(farm.sources)
    assert check_invariants(home, farm, settled=True, expect_all_items=True) == []
    after = {p.name: p.read_bytes() for p in (home.vault / SIGNALS_DIR).glob("*.md")}
    assert all(after[name] == data for name, data in before.items())
    for folder in (home.vault / JOURNAL_DIR, home.root / JOURNAL_DIR):
        assert not list(folder.glob("*.json")) if folder.is_dir() else True


@pytest.mark.slow
def test_a_full_vault_names_the_path_and_records_each_source(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    root = tmp_path / "h"
    with _tmpfs(root / "vault", "16m"):
        farm = Farm(feed_server, count=3)
        home = RadarHome(root)
        before = _first_run(farm, home)
        filler = _fill(home.vault)
        farm.advance()
        code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
        line = _the_line(stderr)
        assert code == 1
        assert f"failed: no space left on device: {home.vault}/" in line, line
        assert line.endswith("; free space there and run again"), line
        _recorded_per_source(home, farm, "disk-full", _stamp(farm))
        # The Source files could not take the health keys: journaled beside the store.
        assert len(list((root / JOURNAL_DIR).glob("*.json"))) == 1
        assert check_invariants(home, farm, settled=True, expect_all_items=False) == []
        filler.unlink()
        _heals(farm, home, before)
    record_figures("vault-full", {"collect_stderr": line})


@pytest.mark.slow
def test_a_full_store_disk_names_the_file_and_records_each_source(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    root = tmp_path / "h"
    with _tmpfs(root / "store", "24m"):
        farm = Farm(feed_server, count=3)
        home = RadarHome(root)
        home.db = root / "store" / "radar.duckdb"
        before = _first_run(farm, home)
        filler = _fill(home.db.parent)
        farm.advance()
        code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
        line = _the_line(stderr)
        assert code == 1
        assert "no space left on device: " in line and str(home.db.parent) in line, line
        # The store could not take the failure: each Source file has it, and the vault a
        # journal for the store.
        assert len(list((home.vault / JOURNAL_DIR).glob("*.json"))) == 1
        for src in farm.sources:
            text = (home.vault / "Radar" / "Sources" / f"{src.source_id}.md").read_text()
            assert "errorState: disk-full" in text and f"lastAttemptAt: '{_stamp(farm)}'" in text
        filler.unlink()
        _heals(farm, home, before)
        letters = home.rows(
            f"SELECT count(*) FROM dead_letters WHERE stage = '{RUN_FAILURE_STAGE}' "
            "AND error_class = 'disk-full'"
        )
        assert letters == [(len(farm.sources),)]
    record_figures("store-full", {"collect_stderr": line})


@pytest.mark.slow
def test_a_read_only_vault_names_the_path_and_records_each_source(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    farm = Farm(feed_server, count=3)
    home = RadarHome(tmp_path / "h")
    before = _first_run(farm, home)
    farm.advance()
    with _read_only(home.vault):
        code, _, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    line = _the_line(stderr)
    assert code == 1
    assert f"failed: read-only file system: {home.vault}/" in line, line
    _recorded_per_source(home, farm, "read-only", _stamp(farm))
    assert len(list((home.root / JOURNAL_DIR).glob("*.json"))) == 1
    _heals(farm, home, before)
    record_figures("vault-read-only", {"collect_stderr": line})


@pytest.mark.slow
def test_the_clock_going_back_moves_no_health_backwards(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    farm = Farm(feed_server, count=3)
    home = RadarHome(tmp_path / "h")
    for src in farm.sources:
        write_source(
            home.vault, src.source_id, feed_server.url(f"/{src.source_id}.xml"), cadence="PT6H"
        )
    code, report, stderr = collect_json(home, "--all", "--as-of", _stamp(farm))
    assert code == 0 and report is not None and "clockBehind" not in report, stderr
    farm.advance()
    latest = _stamp(farm)
    code, report, stderr = collect_json(home, "--all", "--as-of", latest)
    assert code == 0 and report is not None, stderr
    # A collection three days behind the last one (clock skew, a restored backup, --as-of).
    behind = (epoch_time(farm.epoch) - timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, report, stderr = collect_json(home, "--all", "--as-of", behind)
    assert code == 0 and report is not None and not stderr.strip(), stderr
    assert report["clockBehind"] == latest
    assert report["created"] == 0 and report["downtimeFrom"] is None
    for src in report["sources"]:
        assert src["coverageFrom"] is None or src["coverageFrom"] <= behind, src
    for source_id, attempt, success in home.rows(
        "SELECT source_id, last_attempt_at, last_success_at FROM feed_state"
    ):
        assert attempt.strftime("%Y-%m-%dT%H:%M:%SZ") == latest, (source_id, attempt)
        assert success.strftime("%Y-%m-%dT%H:%M:%SZ") == latest, (source_id, success)
    for src in farm.sources:
        text = (home.vault / "Radar" / "Sources" / f"{src.source_id}.md").read_text()
        assert f"lastAttemptAt: '{latest}'" in text and f"lastSuccessAt: '{latest}'" in text
    text = home.run("collect", "--all", "--as-of", behind)
    assert f"the clock is behind the last recorded attempt ({latest})" in text.stdout
    # An hour after the last real collection: no false downtime, no Source due early.
    soon = (epoch_time(farm.epoch) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, report, stderr = collect_json(home, "--as-of", soon)
    assert code == 0 and report is not None and not stderr.strip(), stderr
    assert report["downtimeFrom"] is None and report["due"] == 0 and report["overdue"] == 0
    assert "clockBehind" not in report
    assert check_invariants(home, farm, settled=True, expect_all_items=True) == []


def _survivors(home: RadarHome, *args: str) -> tuple[int, list[str]]:
    """Run `radar *args` in a session of its own; its exit code and every live process of that
    session once it has exited (parse workers, a resource tracker). The tracker reads EOF when
    `radar` exits and ends a moment later: it is given up to 10 s. An ended orphan stays a
    zombie where PID 1 reaps none (this sandbox's init): dead, so not counted."""
    proc = home.popen(*args)
    proc.communicate(timeout=300)
    deadline = time.monotonic() + 10
    while True:
        ps = subprocess.run(["ps", "-eo", "sid=,pid=,stat=,args="], capture_output=True, text=True)
        left = [
            line.strip()
            for line in ps.stdout.splitlines()
            if line.split(None, 1)[0] == str(proc.pid) and not line.split()[2].startswith("Z")
        ]
        if not left or time.monotonic() > deadline:
            return proc.returncode, left
        time.sleep(0.2)


@pytest.mark.slow
def test_no_process_outlives_radar(tmp_path: Path, feed_server: FeedServer) -> None:
    # Six Sources: enough bodies for the parse workers (and their resource tracker) to start.
    farm = Farm(feed_server, count=6)
    home = RadarHome(tmp_path / "h")
    farm.write_sources(home.vault)
    code, left = _survivors(home, "collect", "--all", "--as-of", _stamp(farm))
    assert code == 0 and left == [], left
    # A run that fails as a whole (its store cut short under it) leaves nothing either.
    farm.advance()
    os.truncate(home.db, int(home.db.stat().st_size * 0.9))
    code, left = _survivors(home, "collect", "--all", "--as-of", _stamp(farm))
    assert code == 1 and left == [], left


@pytest.mark.slow
def test_a_step_checks_its_next_slice_after_one_fails_as_a_whole(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A step checks its slices in turn (core/collect/slices.check_step). A slice that fails as
    a whole (its new Signals cannot be written: the Signals folder read-only) records the
    failure on its own Sources; the step's next slice is still checked and committed, and the
    step then fails with the first slice's failure."""
    from radar_pipeline.core.collect.collector import Collector
    from radar_pipeline.core.collect.outline import outline_collection
    from radar_pipeline.core.collect.slices import check_step
    from radar_pipeline.core.config import Settings
    from radar_pipeline.core.plan.collection import CollectionSpec
    from radar_pipeline.core.store.collections import report_for
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline_tests.conftest import collect_stages, new_collection_id
    from radar_pipeline_tests.feedserver import conditional
    from radar_pipeline_tests.vaultkit import rss

    def publish(sid: str, count: int) -> str:
        items = [
            {"title": f"{sid} {i}", "guid": f"{sid}-{i}", "link": f"https://e.x/{sid}/{i}"}
            for i in range(count)
        ]
        stamp = f"Mon, 0{count} Nov 2026 08:00:00 GMT"
        return feed_server.add(f"/{sid}.xml", handler=conditional(rss(items), f'"{count}"', stamp))

    ids = [f"s-{n}" for n in range(4)]
    for sid in ids:
        write_source(radar_env["vault"], sid, publish(sid, 2), cadence="manual")
    settings = Settings.from_env()
    t0 = epoch_time(0)
    with Collector(settings, parse_workers=1) as collector:
        first = collect_stages(collector, CollectionSpec(new_collection_id(), "all", t0))
    assert first.totals.created == 8

    run = new_collection_id()
    spec = CollectionSpec(run, "all", t0 + timedelta(hours=1), dagster_run_id=run)
    store = Store.of(settings.paths)
    outline = outline_collection(store, settings, spec, size=2, step_slices=2)
    assert outline.steps == (range(0, 2),) and outline.step_key(0) == "sources_1_4"
    failing, passing = outline.slices
    for sid in failing:  # a new item each: their slice must write a Signal file
        publish(sid, 3)
    ended: list[int] = []
    failed: list[tuple[int, int | None]] = []
    with (
        _read_only(radar_env["vault"] / SIGNALS_DIR),
        Collector(settings) as collector,
        pytest.raises(OSError) as raised,
    ):
        check_step(
            collector,
            outline,
            0,
            done=lambda summary: ended.append(summary.index),
            failed=lambda index, exc: failed.append((index, getattr(exc, "errno", None))),
        )
    assert raised.value.errno == errno.EROFS, raised.value
    # Each slice is said as it ends: the failing one with its error, the next one checked.
    assert (failed, ended) == ([(0, errno.EROFS)], [1])
    recorded = report_for(store, run)
    assert recorded is not None
    assert {s.id: s.outcome for s in recorded.sources} == dict.fromkeys(passing, "not-modified")
    with store.transaction() as con:
        states = dict(con.execute("SELECT source_id, error_state FROM feed_state").fetchall())
        letters = {
            row[0]
            for row in con.execute(
                "SELECT source_id FROM dead_letters WHERE status = 'open' AND stage = ?",
                [RUN_FAILURE_STAGE],
            ).fetchall()
        }
    assert {sid: states[sid] for sid in ids} == {
        **dict.fromkeys(failing, "read-only"),
        **dict.fromkeys(passing, None),
    }
    assert letters == set(failing)
