"""Where an unchanged feed's CPU goes: cProfile of an unchanged `radar collect --all` re-run.

    python -m benchmarks.rerun_profile [N ...]   (default: 100 200)

For each N: a farm of N feeds (32 origins, 100 ms), a cold collection in a fresh workspace,
then the re-run (every feed answers 304) under cProfile in a subprocess, timed by the main
thread's CPU clock (`time.thread_time`: a busy machine's waits for a core do not count). Each
function's own time is summed by who owns the code (Dagster, its SQLite storage, the DuckDB
store, the vault's Source files, HTTP, imports, ...). With two N, the difference per extra
feed is printed: what one more unchanged Source costs, and where. cProfile inflates
Python-heavy parts; read the shares.
"""

from __future__ import annotations

import pstats
import sys
import tempfile
from pathlib import Path

from benchmarks.farm import FeedFarm
from benchmarks.measure import RADAR, run_child
from benchmarks.scenarios import Workspace, write_sources

# Owner of a function, by the first of these fragments its file path holds.
GROUPS = [
    ("dagster/_core/storage", "Dagster storage (events, runs: SQLite)"),
    ("sqlalchemy", "SQLAlchemy (Dagster's SQLite)"),
    ("sqlite3", "SQLAlchemy (Dagster's SQLite)"),
    ("dagster", "Dagster (other)"),
    ("radar_pipeline/core/store", "our store (DuckDB statements)"),
    ("duckdb", "our store (DuckDB statements)"),
    ("radar_pipeline/core/vault", "our vault (Source-file health, index)"),
    ("yaml", "YAML (Source files)"),
    ("radar_pipeline/core/audit", "our checks (audits)"),
    ("radar_pipeline/core/registry", "our registry read"),
    ("radar_pipeline/defs", "our Dagster layer (defs/)"),
    ("radar_pipeline", "our other code"),
    ("httpx", "HTTP (httpx, httpcore)"),
    ("httpcore", "HTTP (httpx, httpcore)"),
    ("<frozen importlib", "imports"),
    ("pydantic", "pydantic"),
    ("threading.py", "thread waits (lock acquire)"),
]


# `radar ARGS` in process under a profiler on the main thread's CPU clock; argv[1]: the output.
PROFILED = """
import cProfile, sys, time
from radar_pipeline.cli import run
out, sys.argv = sys.argv[1], ["radar", *sys.argv[2:]]
profiler = cProfile.Profile(time.thread_time)
profiler.enable()
try:
    run()
finally:
    profiler.disable()
    profiler.dump_stats(out)
"""


def owner(filename: str) -> str:
    for fragment, name in GROUPS:
        if fragment in filename:
            return name
    if filename == "~":
        return "builtins (C calls: sleeps, I/O, locks)"
    return "other (stdlib, libraries)"


def by_owner(stats: pstats.Stats) -> dict[str, float]:
    """Own time (tottime) summed per owner."""
    totals: dict[str, float] = {}
    for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        key = owner(filename)
        totals[key] = totals.get(key, 0.0) + tottime
    return totals


def profile(n: int, root: Path) -> tuple[dict[str, float], float]:
    farm = FeedFarm(n, latency_s=0.1).start()
    try:
        ws = Workspace(root / f"n{n}")
        ws.vault.mkdir(parents=True)
        write_sources(ws.vault, farm.urls(n))
        cold = run_child([str(RADAR), "collect", "--all", "--json"], ws.env())
        if cold.returncode not in (0, 2):
            raise RuntimeError(f"cold collection exited {cold.returncode}: {cold.stderr[-300:]}")
        out = root / f"rerun-{n}.prof"
        argv = [sys.executable, "-c", PROFILED, str(out), "collect", "--all"]
        rerun = run_child(argv, ws.env())
        if rerun.returncode not in (0, 2):
            raise RuntimeError(f"re-run exited {rerun.returncode}: {rerun.stderr[-300:]}")
        stats = pstats.Stats(str(out))
        print(f"N={n}: re-run wall {rerun.wall_s:.2f} s, CPU {rerun.cpu_s:.2f} s (profiled)")
        print(f"N={n}: main thread's profiled CPU {stats.total_tt:.2f} s")  # type: ignore[attr-defined]
        return by_owner(stats), rerun.cpu_s
    finally:
        farm.stop()


def main(argv: list[str]) -> int:
    ns = [int(a) for a in argv] or [100, 200]
    with tempfile.TemporaryDirectory(prefix="radar-profile-") as tmp:
        results = {n: profile(n, Path(tmp)) for n in ns}
    owners = sorted({k for groups, _ in results.values() for k in groups})
    print("| owner | " + " | ".join(f"N={n} s" for n in ns) + (" | per extra feed, ms |"))
    print("|---|" + "---:|" * len(ns) + ("---:|"))
    for key in sorted(owners, key=lambda k: -results[ns[-1]][0].get(k, 0.0)):
        cells = [f"{results[n][0].get(key, 0.0):.2f}" for n in ns]
        extra = ""
        if len(ns) > 1:
            a, b = results[ns[0]][0].get(key, 0.0), results[ns[-1]][0].get(key, 0.0)
            extra = f"{(b - a) / (ns[-1] - ns[0]) * 1000:.2f}"
        print(f"| {key} | " + " | ".join(cells) + f" | {extra} |")
    cpu = [results[n][1] for n in ns]
    if len(ns) > 1:
        per = (cpu[-1] - cpu[0]) / (ns[-1] - ns[0]) * 1000
        print(f"process CPU (profiled) {cpu}: {per:.2f} ms per extra unchanged feed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
