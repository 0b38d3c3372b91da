"""Temp files a killed writer leaves behind are removed; a live writer's are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from radar_pipeline.core.vault.signals import STALE_TEMP_AGE_S, remove_stale_temp_files


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temp_files_of_dead_writers_go_live_ones_stay(tmp_path: Path) -> None:
    vault = tmp_path
    signals = vault / "Radar" / "Signals"
    temporary = vault / "Radar" / "Temporary Content"
    sources = vault / "Radar" / "Sources"
    for folder in (signals, temporary, sources):
        folder.mkdir(parents=True)
    dead, live = _dead_pid(), os.getpid()
    doomed = [
        signals / f".tmp-signal-{dead}-abc.md",
        temporary / f".tmp-{dead}-abc.md",
        sources / f".s.md.{dead}-abc.tmp",
    ]
    kept = [
        signals / f".tmp-signal-{live}-abc.md",
        sources / f".s.md.{live}-abc.tmp",
        signals / ".tmp-signal-legacy.md",  # no pid: only age can condemn it
        signals / "20250101T000000Z-0123456789abcdef.md",  # a Signal, never touched
        sources / "s.md",
    ]
    old_legacy = temporary / ".tmp-legacyold.md"
    for path in (*doomed, *kept, old_legacy):
        path.write_text("x")
    stale = time.time() - STALE_TEMP_AGE_S - 10
    os.utime(old_legacy, (stale, stale))
    assert remove_stale_temp_files(vault) == len(doomed) + 1
    assert all(p.exists() for p in kept)
    assert not any(p.exists() for p in (*doomed, old_legacy))
