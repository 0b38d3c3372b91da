"""Measuring one child process alone: wall clock, CPU (user + sys) and peak RSS.

`os.wait4` returns the resource usage of exactly the child it reaped (and the descendants that
child reaped), so every figure belongs to one measured process, not to the harness or to an
earlier run; the feed farm's threads live in the harness and are never counted.
"""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import tempfile
import threading
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
    # With `run_child(..., sample_tree_s=...)`: (seconds since start, MB) of the whole process
    # tree's RSS, the command and every descendant summed, sampled while it ran.
    tree_rss: tuple[tuple[float, float], ...] = ()

    @property
    def peak_tree_rss_mb(self) -> float | None:
        """The highest sampled RSS of the process tree (None: not sampled)."""
        return max(mb for _, mb in self.tree_rss) if self.tree_rss else None

    def figures(self) -> dict[str, float]:
        figures = {
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
        }
        if self.peak_tree_rss_mb is not None:
            figures["peak_tree_rss_mb"] = round(self.peak_tree_rss_mb, 1)
        return figures


def run_child(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    sample_tree_s: float | None = None,
) -> Measured:
    """Run `argv` to completion, alone, and measure it (wait4 gives this child's rusage).
    `sample_tree_s`: also sample the RSS of its whole process tree at that interval (wait4's
    peak is the largest single process, not the tree's sum)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(argv), env=dict(env or os.environ), cwd=cwd, stdout=out, stderr=err
        )
        sampler = TreeSampler(proc.pid, sample_tree_s) if sample_tree_s else None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        samples = sampler.stop() if sampler else ()
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
            tree_rss=samples,
        )


_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 1024 / 1024


class TreeSampler:
    """Samples, in a thread, the summed RSS of a process and all its descendants (read from
    /proc: every process's parent, then each member's resident pages). Pages shared by
    forked workers count once per process, as `ps` and a container's limit see them."""

    def __init__(self, pid: int, interval_s: float) -> None:
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stopped = threading.Event()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            mb = tree_rss_mb(self.pid)
            if mb > 0:
                self.samples.append((time.perf_counter() - self._started, mb))
            self._stopped.wait(self.interval_s)

    def stop(self) -> tuple[tuple[float, float], ...]:
        self._stopped.set()
        self._thread.join()
        return tuple(self.samples)


def tree_rss_mb(root: int) -> float:
    """The RSS of `root` and every descendant now, in MB (0 when `root` is gone)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total * _PAGE_MB


def instance_figures(dagster_home: Path) -> dict[str, int]:
    """A Dagster instance read from outside: its bytes on disk and the events its run shards
    hold (SQLite storage: `history/runs/<run id>.db`, each with its `event_logs`)."""
    events = 0
    for shard in (dagster_home / "history" / "runs").glob("*.db"):
        if shard.name == "index.db":
            continue
        with sqlite3.connect(f"file:{shard}?mode=ro", uri=True) as con:
            try:
                events += int(con.execute("SELECT count(*) FROM event_logs").fetchone()[0])
            except sqlite3.OperationalError:  # a shard being created: no table yet
                continue
    return {"bytes": tree_bytes(dagster_home), "events": events}


def tree_bytes(path: Path) -> int:
    """Bytes of every file under `path` (0 when it is not there)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


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
