"""Scenario 13 `large_registry`: a team's registry of hundreds to thousands of Sources (issue 50).

On a farm of its own (32 loopback hosts, `LATENCY_S` per answer, feeds of 20 items of ~7 KB:
benchmarks/farm.py), at each N (200, 500 and 2,000 by default, `--registry-n`): Radar's cold
`radar collect --all` and its unchanged re-run (every feed a 304) beside the naive feedparser
loop (cold and again, it has no validators), newsboat (benchmarks/manners.py's run: 8 reload
threads, its cache keeps validators; said so where it is not installed) and Dagster's floor
for N partitions (benchmarks/floor.py), one after another in the same invocation.

For each Radar run: wall, CPU (the command's rusage: it and every descendant it reaped), the
peak RSS of the whole process tree (sampled from /proc every `SAMPLE_S`: the command and its
parse workers summed; wait4's peak is only the largest single process), the Dagster events
written and the instance's growth (DAGSTER_HOME bytes and its run shards' events, read from
outside before and after), and the growth of the whole state (instance, store, vault). The
ratios of issue 50 are judged at N >= 2,000 and reported below: (radar wall - floor wall) /
naive wall, (radar CPU - floor CPU) / naive CPU, peak tree RSS at the largest N / smallest N.
The tree's RSS over the cold run at each N is drawn to `results/large-registry-rss.svg`.

Only `radar` commands and the instance and store files are touched: nothing here imports the
collection's code, so the harness measures whatever the collection becomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.farm import ITEMS_PER_FEED, FeedFarm
from benchmarks.manners import NEWSBOAT, line_svg
from benchmarks.manners import _newsboat as newsboat_cold
from benchmarks.manners import _newsboat_reload as newsboat_reload
from benchmarks.measure import Measured, instance_figures, run_child, tree_bytes
from benchmarks.scenarios import (
    Context,
    Outcome,
    Workspace,
    expect,
    json_or_error,
    median_run,
    naive_collect,
    walls,
    write_sources,
)

LATENCY_S = 0.02
SAMPLE_S = 0.25
JUDGED_FROM = 2_000  # the targets are for a registry of this size
RSS_LIMIT_MB = 400
RSS_GROWTH_LIMIT = 1.3  # peak tree RSS at the largest N / at the smallest
UNCHANGED_WALL_S, UNCHANGED_CPU_S, UNCHANGED_GROWTH_MB = 20, 15, 2


@dataclass(frozen=True)
class RadarRun:
    """One measured `radar collect --all`: the process, its report and what it added to the
    instance (events, bytes) and to the whole state (instance, store, vault: bytes)."""

    m: Measured
    report: dict[str, Any]
    growth: dict[str, int]

    @property
    def wall_s(self) -> float:
        return self.m.wall_s


def large_registry(ctx: Context, ns: list[int], results: Path) -> Outcome:
    """Every N in turn on a farm of its own; the ratios, the RSS checks and the plot."""
    out = Outcome()
    farm = FeedFarm(max(ns), latency_s=LATENCY_S).start()
    sub = Context(farm, ctx.workdir, ctx.signals, ctx.temp_files, ctx.repeat, radar=ctx.radar)
    peaks: dict[int, float] = {}
    series: dict[str, list[tuple[float, float]]] = {}
    try:
        for n in ns:
            cold = _one_size(out, sub, n)
            peaks[n] = max(m.peak_tree_rss_mb or m.peak_rss_mb for m in cold)
            series[f"N={n:,}"] = list(median_run(cold, _wall).tree_rss)
    finally:
        farm.stop()
    small, large = min(ns), max(ns)
    if small != large:
        ratio = peaks[large] / peaks[small]
        metric = f"peak tree RSS N={large:,} / N={small:,}"
        judged = large >= JUDGED_FROM
        out.check("13 large registry", metric if judged else f"{metric}, info", ratio, 1.3, "<=")
    results.mkdir(parents=True, exist_ok=True)
    plot = results / "large-registry-rss.svg"
    plot.write_text(
        line_svg(series, "seconds since the start of radar collect --all (cold)", "tree RSS, MB"),
        "utf-8",
    )
    out.notes.append(f"large registry: RSS of the process tree over each cold run in {plot}")
    return out


def _one_size(out: Outcome, ctx: Context, n: int) -> list[Measured]:
    """The runs at one N; returns Radar's cold runs (for the RSS figures)."""
    name = f"13 large registry N={n:,}"
    naive_cold, naive_again, floors = [], [], []
    colds: list[RadarRun] = []
    reruns: list[RadarRun] = []
    boats: list[tuple[Measured, Path]] = []
    for k in range(ctx.repeat):
        # Radar, the naive loop, newsboat and the floor alternate, so drift weighs alike.
        ws = ctx.workspace(f"registry-{n}-{k + 1}")
        write_sources(ws.vault, ctx.farm.urls(n))
        colds.append(run := _measured_collect(ctx, ws))
        created = run.report.get("created", 0)
        expect(out, name, f"radar created (cold {k + 1})", created, n * ITEMS_PER_FEED)
        reruns.append(run := _measured_collect(ctx, ws))
        parsed = run.report["_farm"].get("200", 0)
        expect(out, name, f"feeds parsed by the unchanged re-run {k + 1}", parsed, 0)
        folder = ctx.workspace(f"registry-naive-{n}-{k + 1}").root / "out"
        urls = ctx.farm.urls(n)
        naive_cold.append(naive_collect(folder, urls, ctx.farm, sample_tree_s=SAMPLE_S)[0])
        naive_again.append(naive_collect(folder, urls, ctx.farm, sample_tree_s=SAMPLE_S)[0])
        if NEWSBOAT:
            boats.append(newsboat_cold(ctx, n, k))
        floors.append(ctx.floor(n))
    cold_run, rerun_run = median_run(colds, _wall), median_run(reruns, _wall)
    cold, rerun = cold_run.m, rerun_run.m
    naive, floor = median_run(naive_cold, _wall), median_run(floors, _wall)
    out.row(name, "radar cold", cold, runs=walls([r.m for r in colds]), **cold_run.growth)
    out.row(
        name, "radar unchanged re-run", rerun, runs=walls([r.m for r in reruns]), **rerun_run.growth
    )
    out.row(name, "naive loop, cold", naive, runs=walls(naive_cold))
    out.row(name, "naive loop, again (no validators)", median_run(naive_again, _wall))
    out.row(name, f"Dagster's floor, {n:,} partitions", floor, runs=walls(floors))
    if NEWSBOAT:
        boat_again = [newsboat_reload(home) for _, home in boats]
        out.row(name, "newsboat cold (8 threads)", median_run([b for b, _ in boats], _wall))
        out.row(name, "newsboat unchanged re-run", median_run(boat_again, _wall))
    else:
        out.notes.append(f"{name}: newsboat not installed (apt-get install newsboat): no figure")
    judged = n >= JUDGED_FROM
    _judge(
        out,
        name,
        judged,
        "(radar wall - floor wall) / naive wall, cold",
        0.5,
        _wall_ratio(cold, floor, naive),
    )
    _judge(
        out,
        name,
        judged,
        "(radar CPU - floor CPU) / naive CPU, cold",
        2,
        _cpu_ratio(cold, floor, naive),
    )
    peak = cold.peak_tree_rss_mb or cold.peak_rss_mb
    _judge(out, name, judged, "peak tree RSS of the cold run, MB", RSS_LIMIT_MB, peak)
    _judge(out, name, judged, "unchanged re-run wall, s", UNCHANGED_WALL_S, rerun.wall_s)
    _judge(out, name, judged, "unchanged re-run CPU, s", UNCHANGED_CPU_S, rerun.cpu_s)
    grown = rerun_run.growth["state_growth_bytes"] / 1e6
    _judge(out, name, judged, "state growth per unchanged re-run, MB", UNCHANGED_GROWTH_MB, grown)
    out.notes.append(
        f"large registry N={n:,}: cold {cold.wall_s:.1f} s wall, {cold.cpu_s:.1f} s CPU, "
        f"{peak:.0f} MB tree; re-run {rerun.wall_s:.1f} s, {rerun.cpu_s:.1f} s CPU, state "
        f"+{grown:.2f} MB; naive {naive.wall_s:.1f} s / {naive.cpu_s:.1f} s CPU; floor "
        f"{floor.wall_s:.1f} s / {floor.cpu_s:.1f} s CPU"
    )
    return [r.m for r in colds]


def _judge(out: Outcome, name: str, judged: bool, metric: str, target: float, value: float) -> None:
    out.check(name, metric if judged else f"{metric}, info", value, target, "<=")


def _measured_collect(ctx: Context, ws: Workspace) -> RadarRun:
    """`radar collect --all --json` with the tree's RSS sampled, and what it added to the
    instance and to the whole state (instance, store, vault), read before and after."""
    before, state_before = instance_figures(ws.dagster_home), tree_bytes(ws.root)
    ctx.farm.take_counts()
    m = run_child([str(ctx.radar), "collect", "--all", "--json"], ws.env(), sample_tree_s=SAMPLE_S)
    report = json_or_error(m, "radar collect")
    report["_farm"] = ctx.farm.take_counts()
    after = instance_figures(ws.dagster_home)
    growth = {
        "dagster_events": after["events"] - before["events"],
        "instance_growth_bytes": after["bytes"] - before["bytes"],
        "state_growth_bytes": tree_bytes(ws.root) - state_before,
    }
    return RadarRun(m, report, growth)


def _wall_ratio(radar: Measured, floor: Measured, naive: Measured) -> float:
    return (radar.wall_s - floor.wall_s) / naive.wall_s


def _cpu_ratio(radar: Measured, floor: Measured, naive: Measured) -> float:
    return (radar.cpu_s - floor.cpu_s) / naive.cpu_s


def _wall(m: Measured | RadarRun) -> float:
    return m.wall_s
