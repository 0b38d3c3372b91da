"""`make bench` (`python -m benchmarks.run`): every scenario in one invocation, one table.

    python -m benchmarks.run [--n 50,100,200] [--latency-ms 100] [--scenarios 1,2,...,9]
                             [--day-sources 200] [--day-hours 24] [--registry-n 200,500,2000]
                             [--signals 100000] [--huge-signals 1000000] [--temp-files 10000]
                             [--quick] [--repeat 3]
                             [--radar PATH] [--workdir DIR] [--keep] [--results DIR]

Scenarios (numbers or names): 1 cold (Radar vs the naive loop at each N), 2 rerun (an
unchanged re-run at each N vs Dagster's floor), 3 scale (cold and re-run with 1,000 vs 100,000
Signals, and 1,000,000 in full mode; smallest N), 4 rss (largest N), 5 rebuild, 6 close,
7 slope (extra wall per extra Source, cold and re-run, smallest to largest N), 8 workers
(default parse pool vs RADAR_PARSE_WORKERS=1 at the largest N), 9 scheduled (see
benchmarks/scheduled.py), 10 day (a simulated day through the real dagster-daemon; see
benchmarks/day.py; not in the default set: --day-sources 200 --day-hours 24 takes hours with
a run per Source and about a minute of wall per launching minute; --day-sources 30
--day-hours 2 about 20 minutes; run alone, its results go to `day.*`), 11 team (the
PostgreSQL store beside the DuckDB file, cold and re-run at the largest N up to 100;
benchmarks/team.py), 12 manners (one host and 32 hosts side by side with newsboat, and two hosts
under strain; benchmarks/manners.py), 13 large_registry (a team's registry at
--registry-n Sources on a farm of 32 hosts answering in 20 ms, beside the naive loop, newsboat and
Dagster's floor: wall, CPU, the process tree's peak RSS and its plot, Dagster events and
instance growth per run; benchmarks/large_registry.py; quick: N=20,50).
`--radar PATH` (default: this repository's .venv/bin/radar) times another checkout's `radar`;
the naive loop and Dagster's floor always run with this interpreter.
`--quick` (about a minute): N=10,20, 10,000 Signals, 2,000 temporary files, one run each; its
results go to `latest-quick.*` so the committed full run (`latest.*`) is not overwritten.
`--repeat K`: every measurement is K runs and the median wall counts (peak RSS: the highest);
Radar alternates with its baseline (naive, floor, workers=1) and every cold run has a fresh
vault; every run's wall is listed. Scenario 3 measures K cold/re-run pairs per vault size,
each vault generated once and reused (each pair collects Sources of its own ids), sizes
alternating. On a shared machine one sample swings by a third (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import day, large_registry, manners, scenarios, team
from benchmarks.farm import FeedFarm
from benchmarks.measure import RADAR, filesystem_of, machine

NAMES = {
    "1": "cold",
    "2": "rerun",
    "3": "scale",
    "4": "rss",
    "5": "rebuild",
    "6": "close",
    "7": "slope",
    "8": "workers",
    "9": "scheduled",
    "10": "day",
    "11": "team",
    "12": "manners",
    "13": "large_registry",
}
# Not in the default set: a full day of 200 Sources takes hours (see benchmarks/day.py).
DEFAULT_SCENARIOS = [k for k, v in NAMES.items() if v != "day"]
RESULTS = Path(__file__).resolve().parent / "results"


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--n", default=None, help="Source counts, comma list (50,100,200; quick 10,20)")
    p.add_argument("--latency-ms", type=float, default=100.0, help="farm latency per response")
    p.add_argument(
        "--scenarios",
        default=",".join(DEFAULT_SCENARIOS),
        help="numbers or names, comma list (default: all but 10 day)",
    )
    p.add_argument("--day-sources", type=_positive, default=200, help="scenario 10's N (200)")
    p.add_argument(
        "--day-hours", type=_positive, default=24, help="scenario 10's simulated hours (24)"
    )
    p.add_argument(
        "--registry-n",
        default=None,
        help="scenario 13's Source counts, comma list (200,500,2000; quick 20,50)",
    )
    p.add_argument("--signals", type=int, default=None, help="existing Signals (100000)")
    p.add_argument("--temp-files", type=int, default=None, help="temporary files (10000)")
    p.add_argument(
        "--huge-signals",
        type=int,
        default=None,
        help="scenario 3's extra vault, generated on disk (1000000; quick: 0, none)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes; about a minute")
    p.add_argument(
        "--repeat",
        type=_positive,
        default=None,
        help="runs per measurement; the median counts (3; quick 1)",
    )
    p.add_argument(
        "--radar",
        type=_executable,
        default=RADAR,
        help="the `radar` command to time (this repository's .venv/bin/radar)",
    )
    p.add_argument("--workdir", type=Path, default=None, help="where temp vaults go")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--results", type=Path, default=RESULTS, help="where results are written")
    args = p.parse_args(argv)
    args.ns = sorted(
        {int(x) for x in (args.n or ("10,20" if args.quick else "50,100,200")).split(",")}
    )
    args.registry_ns = sorted(
        {
            int(x)
            for x in (args.registry_n or ("20,50" if args.quick else "200,500,2000")).split(",")
        }
    )
    args.signals = args.signals or (10_000 if args.quick else 100_000)
    args.temp_files = args.temp_files or (2_000 if args.quick else 10_000)
    if args.huge_signals is None:
        args.huge_signals = 0 if args.quick else 1_000_000
    args.repeat = args.repeat or (1 if args.quick else 3)
    chosen = [NAMES.get(s.strip(), s.strip()) for s in args.scenarios.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in NAMES.values()]
    if unknown:
        p.error(f"unknown scenario(s): {', '.join(unknown)}")
    args.chosen = chosen
    return args


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return number


def _executable(value: str) -> Path:
    path = Path(value).absolute()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise argparse.ArgumentTypeError(f"{value} is not an executable file")
    return path


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="radar-bench-", dir=args.workdir))
    started = datetime.now(UTC)
    load_before = os.getloadavg()
    _say(f"radar bench: work folder {workdir} ({filesystem_of(workdir)})")
    feeds = max([*args.ns, args.day_sources] if "day" in args.chosen else args.ns)
    farm = FeedFarm(feeds, latency_s=args.latency_ms / 1000).start()
    sizes = farm.feed_sizes()
    _say(
        f"farm: {len(sizes)} feeds over {len(farm.servers)} loopback origins, "
        f"{min(sizes) // 1000}-{max(sizes) // 1000} KB (mean {sum(sizes) // len(sizes) // 1000} "
        f"KB), latency {args.latency_ms:g} ms"
    )
    _say(f"radar: {args.radar}")
    ctx = scenarios.Context(
        farm,
        workdir,
        args.signals,
        args.temp_files,
        args.repeat,
        radar=args.radar,
        huge=args.huge_signals,
    )
    small, large = min(args.ns), max(args.ns)
    plan: dict[str, Callable[[], scenarios.Outcome]] = {
        "cold": lambda: scenarios.cold(ctx, args.ns),
        "rerun": lambda: scenarios.rerun(ctx, args.ns),
        "scale": lambda: scenarios.scale(ctx, small),
        "rss": lambda: scenarios.rss(ctx, large),
        "rebuild": lambda: scenarios.rebuild(ctx),
        "close": lambda: scenarios.close(ctx),
        "slope": lambda: scenarios.slope(ctx, args.ns),
        "workers": lambda: scenarios.workers(ctx, large),
        "scheduled": lambda: scenarios.scheduled(ctx, large),
        "day": lambda: day.day(ctx, args.day_sources, args.day_hours),
        "team": lambda: team.team(ctx, max((n for n in args.ns if n <= 100), default=small)),
        "manners": lambda: manners.manners(ctx, args.ns, args.results),
        "large_registry": lambda: large_registry.large_registry(
            ctx, args.registry_ns, args.results
        ),
    }
    outcomes: list[scenarios.Outcome] = []
    try:
        for name in NAMES.values():
            if name in args.chosen:
                t0 = time.perf_counter()
                _say(f"... {name}")
                outcomes.append(plan[name]())
                _say(f"    {name} done in {time.perf_counter() - t0:.1f} s")
    finally:
        farm.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    result: dict[str, Any] = {
        "startedAt": started.isoformat(timespec="seconds"),
        "finishedAt": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "options": {
            "n": args.ns,
            "radar": str(args.radar),
            "latencyMs": args.latency_ms,
            "scenarios": args.chosen,
            "signals": args.signals,
            "hugeSignals": args.huge_signals,
            "tempFiles": args.temp_files,
            "repeat": args.repeat,
            **({"registryN": args.registry_ns} if "large_registry" in args.chosen else {}),
            **(
                {"daySources": args.day_sources, "dayHours": args.day_hours}
                if "day" in args.chosen
                else {}
            ),
        },
        "machine": {
            **machine(),
            "workdirFilesystem": filesystem_of(workdir.parent),
            # Other processes on the machine skew wall times; the load says how much.
            "loadAverage1mBefore": round(load_before[0], 2),
            "loadAverage1mAfter": round(os.getloadavg()[0], 2),
        },
        "farm": {"feeds": len(sizes), "minBytes": min(sizes), "maxBytes": max(sizes)},
        "runs": [r for o in outcomes for r in o.rows],
        "checks": [c for o in outcomes for c in o.checks],
        "notes": [n for o in outcomes for n in o.notes],
    }
    markdown = render_markdown(result)
    _say("\n" + markdown)
    args.results.mkdir(parents=True, exist_ok=True)
    # Scenario 10 alone keeps its own files, as the committed full run's are not overwritten.
    alone = (
        {"day": "day", "manners": "manners", "large_registry": "large-registry"}.get(args.chosen[0])
        if len(args.chosen) == 1
        else None
    )
    stem = alone or ("latest-quick" if args.quick else "latest")
    (args.results / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n", "utf-8")
    (args.results / f"{stem}.md").write_text(markdown, "utf-8")
    _say(f"written: {args.results / stem}.json and .md")
    # Info figures (their metric ends in ", info") are reported, never judged.
    targets = [c for c in result["checks"] if not c["metric"].endswith(", info")]
    return 0 if all(c["met"] for c in targets) else 3


def render_markdown(result: dict[str, Any]) -> str:
    """The runs table, the target checks and the notes, as Markdown."""
    m = result["machine"]
    lines = [
        f"Run {result['startedAt']} ({result['mode']}), latency "
        f"{result['options']['latencyMs']:g} ms, farm feeds "
        f"{result['farm']['minBytes'] // 1000}-{result['farm']['maxBytes'] // 1000} KB, "
        f"radar `{result['options']['radar']}`.",
        f"Machine: {m['cpu']}, {m['cpus']} CPUs, {m['memory_gb']} GB RAM, {m['platform']}, "
        f"Python {m['python']}, work folder on {m['workdirFilesystem']}; 1-min load average "
        f"{m['loadAverage1mBefore']} before, {m['loadAverage1mAfter']} after.",
        "",
        "| scenario | run | wall s | CPU s | peak RSS MB | items | detail |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in result["runs"]:
        detail = {k: v for k, v in r.items() if k not in _ROW_KEYS and v not in ({}, None)}
        lines.append(
            f"| {r['scenario']} | {r['run']} | {_num(r.get('wall_s'))} | {_num(r.get('cpu_s'))} "
            f"| {_num(r.get('peak_rss_mb'), 0)} | {r.get('items', '')} | {_detail(detail)} |"
        )
    lines += ["", "| scenario | metric | value | target | met |", "|---|---|---:|---|---|"]
    for c in result["checks"]:
        met = {True: "yes", False: "**NO**", None: ""}[c["met"]]
        lines.append(f"| {c['scenario']} | {c['metric']} | {c['value']} | {c['target']} | {met} |")
    if result["notes"]:
        lines += ["", *(f"- {n}" for n in result["notes"])]
    return "\n".join(lines) + "\n"


_ROW_KEYS = {"scenario", "run", "wall_s", "cpu_s", "peak_rss_mb", "items"}


def _num(value: Any, digits: int = 2) -> str:
    return "" if value is None else f"{float(value):.{digits}f}"


def _detail(detail: dict[str, Any]) -> str:
    parts = []
    for key, value in detail.items():
        if isinstance(value, dict):
            value = " ".join(f"{k}:{v}" for k, v in value.items() if k != "bytes")
        parts.append(f"{key} {value}")
    return "; ".join(parts)


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
