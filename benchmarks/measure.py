"""Measuring one child process alone: wall clock, CPU (user + sys) and peak RSS.

`os.wait4` returns the resource usage of exactly the child it reaped (and the descendants that
child reaped), so every figure belongs to one measured process, not to the harness or to an
earlier run; the feed farm's threads live in the harness and are never counted.
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RADAR = REPO / ".venv" / "bin" / "radar"  # `--radar` times another checkout's command


@dataclass(frozen=True)
class Measured:
    """One process run: its figures and its output."""

    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str

    def figures(self) -> dict[str, float]:
        return {
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
        }


def run_child(
    argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path = REPO
) -> Measured:
    """Run `argv` to completion, alone, and measure it (wait4 gives this child's rusage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), env=dict(env or os.environ), cwd=cwd, stdout=out, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        return Measured(
            wall_s=wall,
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_gb": _memory_gb(),
    }
    return info


def filesystem_of(path: Path) -> str:
    """The mount's file system type for `path` (fsync costs depend on it)."""
    best, fstype = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return fstype
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3 or len(parts[1]) <= len(best):
            continue
        if target == parts[1] or target.startswith(parts[1].rstrip("/") + "/"):
            best, fstype = parts[1], parts[2]
    return fstype


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None
