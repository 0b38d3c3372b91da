"""`make soak` (`python -m benchmarks.soak [--days 7]`): a simulated week of the real
`dagster-daemon` against loopback feeds, then the verdict and the figures. With `--registry`
(`python -m benchmarks.soak --registry [--n 2000] [--hours 48]`): a team's registry instead,
hourly (see `registry_soak` below; its figures go to registry-soak.md and .json).

The daemon reads the definitions from a long-lived code server, as docs/deployment.md runs a
team's (`benchmarks.scheduled.start_deployment`: the instance made first, `dagster api grpc`,
`deploy/workspace.grpc.yaml` with a free port, then `dagster-daemon run`), not from
workspace.yaml, whose `python_module` entry makes the daemon start a fresh code server every
60 s. The clock of the schedule, the sensors and their runs is `RADAR_AS_OF`, read once when a
process starts: the code server evaluates the schedules and sensors and launches the runs
(they inherit its environment). So the week is a series of steps 12 simulated hours apart,
each one a start of the code server and the daemon with the step's clock, run until its runs
are done and the instance has been quiet for a while, then stopped with Ctrl-C (the code
server then with SIGTERM). Within a step the code server is never restarted.

Twice a step is broken by a kill while a collection run is going, each of a different kind:
- first, the daemon alone dies (SIGKILL to `dagster-daemon` only): the code server and the
  run it launched keep going, and a new daemon is started against the same code server;
- then the machine crashes (SIGKILL to the whole group: daemon, code server, run worker), and
  both are started again on the same clock, the instance opened first as before any start:
  run monitoring (its timeout shortened here) fails the dead run, and the retry or the next
  slot collects its Sources.

The feeds (radar_pipeline_tests/feedserver.py, on 127.0.0.1) publish two items per Source per
step, dated on the simulated clock. `down` answers 503 for a day, `limited` answers 429 with
`Retry-After: 5 h` for a day, `gone` answers 410 from three quarters of the week on. The
weekly close is run at its scheduled instant (Sunday 00:00 of the simulated week) with `radar
cleanup --as-of` (the daemon's weekly schedule ticks on the real clock, so a simulated week
cannot reach it). For the same reason the daily prune (`run_history_schedule`, 00:30 UTC) is
ticked by the harness: before the first step after each simulated 00:30, the real schedule is
evaluated with that instant as its scheduled time (`dg.build_schedule_context`) and its run
request executed in this process on the soak's instance, so runs older than
`RADAR_RUN_RETENTION_DAYS=2` are pruned as the week goes.

At the end it asserts:
- every item published inside the recovery window is exactly one Signal (and no Signal is of
  an item never published), and every check's items add up (itemsParsed = its observations);
- the failed partitions of `signals` are exactly the Sources failing at the end (`gone`);
- the weekly close ran on schedule and retained 0 files;
- a last `radar history prune --keep-days 1` deletes runs, and the checks above are made
  after it (so pruning changed nothing a partition shows);
and writes runs, CPU, bytes per run and the sizes of DAGSTER_HOME and the DuckDB file to
benchmarks/results/soak.md and soak.json. CPU is that of the daemon, the code server and every
run worker: `os.wait4` of the daemon and the code server once they ended (the code server reaps
its run workers), of the daemon alone when it alone is killed, and, at the crash, read from
/proc just before the SIGKILL (live members plus what they reaped; a lower bound).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import dagster as dg

from benchmarks.farm import ITEMS_PER_FEED, FeedFarm
from benchmarks.measure import REPO, instance_figures, machine, tree_bytes
from benchmarks.scenarios import source_id, write_sources
from benchmarks.scheduled import Daemon, restart_daemon, start_deployment, stop_daemon
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.vault.signals import SIGNALS_DIR, list_signal_ids, read_signal_frontmatter
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.history.jobs import PRUNE_JOB_NAME
from radar_pipeline.defs.history.schedules import run_history_schedule
from radar_pipeline.defs.instance import open_instance
from radar_pipeline.defs.partitions import sources_partitions, sync_partitions
from radar_pipeline.defs.resources import ClockResource
from radar_pipeline_tests.daemonkit import group_alive, read_db, write_instance_yaml
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler
from radar_pipeline_tests.vaultkit import write_source

BIN = Path(sys.executable).parent
CLOSE = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)  # a Sunday: the weekly close of the week
STEP = timedelta(hours=12)
STEADY = ("steady-a", "steady-b", "steady-c", "fulltext-a", "fulltext-b")
SOURCES = (*STEADY, "down", "limited", "gone")
QUIET_S = 35  # the instance is idle this long: the sensors (30-60 s) have had their say
STEP_DEADLINE_S = 1500  # a loaded shared machine queues runs for minutes
RETENTION_DAYS = 2
# Monitoring fails a run whose process died after this long (the repository's is an hour).
MONITORING = {"run_monitoring": {"max_runtime_seconds": 90, "poll_interval_seconds": 10}}
ENDED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@dataclass
class Feeds:
    """Every Source's feed on the simulated clock: item k is published at start + k * STEP/2
    minus 30 minutes; the feed shows the latest 40 published items."""

    start: datetime
    steps: int
    clock: datetime = field(init=False)
    served: dict[str, int] = field(default_factory=dict)  # status -> count
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.clock = self.start

    def step_of(self, when: datetime) -> int:
        return int((when - self.start) / STEP)

    def trouble(self, sid: str, when: datetime) -> int | None:
        """The error status `sid` answers at `when`, or None when it serves its feed."""
        step = self.step_of(when)
        quarter = self.steps // 4
        if sid == "down" and quarter <= step < quarter + 2:
            return 503
        if sid == "limited" and 2 * quarter - 1 <= step < 2 * quarter + 1:
            return 429
        if sid == "gone" and step >= 3 * quarter:
            return 410
        return None

    def published(self, sid: str, until: datetime) -> list[tuple[str, datetime]]:
        """(guid, date) of every item `sid` published up to `until`: a Source that is gone
        publishes nothing more."""
        items = []
        k = 0
        while (date := self.start + k * STEP / 2 - timedelta(minutes=30)) <= until:
            # The feed goes away before anyone could read its last half-step: those items were
            # never published to anyone.
            if sid == "gone" and self.trouble(sid, date + STEP) == 410:
                break
            items.append((f"{sid}-{k}", date))
            k += 1
        return items

    def handler(self, sid: str) -> Any:
        def handle(req: RequestHandler) -> None:
            with self.lock:
                now = self.clock
            status = self.trouble(sid, now)
            with self.lock:
                self.served[str(status or 200)] = self.served.get(str(status or 200), 0) + 1
            if status is not None:
                headers = {"Content-Type": "text/plain"}
                if status == 429:
                    headers["Retry-After"] = "18000"  # 5 h
                req.send_simple(status, b"not now", headers)
                return
            items = self.published(sid, now)[-40:]
            etag = f'"{sid}-{len(items)}-{items[-1][0] if items else ""}"'
            if req.headers.get("If-None-Match") == etag:
                req.send_simple(304, b"", {"ETag": etag})
                return
            req.send_simple(200, self.body(sid, items), {"ETag": etag, **RSS})

        return handle

    def body(self, sid: str, items: list[tuple[str, datetime]]) -> bytes:
        full = sid.startswith("fulltext")
        parts = []
        for guid, date in reversed(items):
            content = (
                f"<content:encoded><![CDATA[<p>Full text of {guid}. {'Lorem ipsum. ' * 30}</p>]]>"
                "</content:encoded>"
                if full
                else ""
            )
            parts.append(
                f"<item><title>Release {guid}</title><link>https://soak.example/{sid}/{guid}</link>"
                f'<guid isPermaLink="false">{guid}</guid>'
                f"<pubDate>{date.strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate>"
                f"<description>Summary of {guid}</description>{content}</item>"
            )
        return (
            '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel>'
            f"<title>{sid}</title><link>https://soak.example/</link><description>soak"
            "</description>" + "".join(parts) + "</channel></rss>"
        ).encode()


RSS = {"Content-Type": "application/rss+xml; charset=utf-8"}


@dataclass
class Soak:
    root: Path
    feeds: Feeds | None  # None: the feeds keep no clock of their own (the registry soak's farm)
    server: FeedServer | None
    retention_days: int = RETENTION_DAYS
    runs: dict[str, str] = field(default_factory=dict)  # run id -> job name, ever seen
    shard_bytes: dict[str, int] = field(default_factory=dict)  # ended run -> its shard's size
    cpu_s: float = 0.0
    starts: int = 0  # of dagster-daemon run
    server_starts: int = 0  # of the code server
    kills: int = 0
    prunes: int = 0  # daily prune runs the harness ticked
    log: list[str] = field(default_factory=list)

    @property
    def vault(self) -> Path:
        return self.root / "vault"

    @property
    def db(self) -> Path:
        return self.root / "radar.duckdb"

    @property
    def home(self) -> Path:
        return self.root / "dagster_home"

    def environ(self, as_of: datetime) -> dict[str, str]:
        return {
            **os.environ,
            "RADAR_VAULT": str(self.vault),
            "RADAR_DB": str(self.db),
            "DAGSTER_HOME": str(self.home),
            "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1,localhost",
            "RADAR_AS_OF": format_utc(as_of),
            "RADAR_RUN_RETENTION_DAYS": str(self.retention_days),
        }

    def set_up(self) -> None:
        assert self.feeds is not None and self.server is not None
        (self.vault / "Radar" / "Sources").mkdir(parents=True)
        (self.vault / "Site Content").mkdir(parents=True)
        for sid in SOURCES:
            full = "feed-content" if sid.startswith("fulltext") else "none"
            write_source(self.vault, sid, self.server.url(f"/{sid}.xml"), fullText=full)
            self.server.add(f"/{sid}.xml", handler=self.feeds.handler(sid))
        self.set_up_instance(SOURCES)

    def set_up_instance(
        self, sources: Sequence[str], monitoring: dict[str, Any] | None = MONITORING
    ) -> None:
        """The instance's dagster.yaml (run monitoring shortened, for the kills; None: the
        repository's) and the Sources' partitions."""
        write_instance_yaml(self.home, monitoring)
        with open_instance(self.home) as instance:
            sync_partitions(instance, sorted(sources))

    def step(self, as_of: datetime, kill: str | None) -> None:
        """One start of the code server and the daemon on the clock `as_of`, until its runs
        are done; when `kill` ("daemon" or "crash") is given, broken by that kill mid-run
        first and started again."""
        if self.feeds is not None:
            with self.feeds.lock:
                self.feeds.clock = as_of
        started = time.time()
        env = self.environ(as_of)
        with (self.root / "daemon.log").open("ab") as log:
            daemon = self._start(env, log)
            try:
                if kill is not None:
                    self._wait(started, daemon, kill_at_first_run=True)
                    daemon = self._kill(daemon, kill, env, log)
                # After a kill, the step's runs include the interrupted one: it ends by itself
                # (the daemon alone died) or when monitoring fails it (the crash), and its
                # retry (or the next slot) collects its Sources.
                self._wait(started, daemon, kill_at_first_run=False)
            finally:  # also when the wait fails or is interrupted: nothing outlives the soak
                self._stop(daemon)

    def _start(self, env: dict[str, str], log: IO[bytes]) -> Daemon:
        self.starts += 1
        self.server_starts += 1
        return start_deployment(env, log)

    def _wait(self, started: float, daemon: Daemon, kill_at_first_run: bool) -> None:
        """Until a collection run of this start exists and every run ended QUIET_S ago (or,
        when killing, until a collection run of this start is going)."""
        deadline = time.monotonic() + STEP_DEADLINE_S
        quiet_since: float | None = None
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            while time.monotonic() < deadline:
                if (exited := daemon.exited()) is not None:
                    raise RuntimeError(exited)
                records = instance.get_run_records(
                    filters=dg.RunsFilter(created_after=datetime.fromtimestamp(started, UTC))
                )
                collected = [r for r in records if r.dagster_run.job_name == "Collect_signals"]
                if kill_at_first_run and any(
                    r.dagster_run.status == dg.DagsterRunStatus.STARTED for r in collected
                ):
                    time.sleep(2)  # inside its steps
                    return
                busy = self._observe(instance)
                if collected and not busy:
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since >= QUIET_S:
                        return
                else:
                    quiet_since = None
                time.sleep(2)
        raise RuntimeError(f"the step did not settle within {STEP_DEADLINE_S} s")

    def _observe(self, instance: dg.DagsterInstance) -> bool:
        """Record every run seen (and the shard size of each ended one); True while any run
        has not ended."""
        busy = False
        for record in instance.get_run_records():
            run = record.dagster_run
            self.runs[run.run_id] = run.job_name
            if run.status not in ENDED:
                busy = True
            elif run.run_id not in self.shard_bytes:
                shard = self.home / "history" / "runs" / f"{run.run_id}.db"
                if shard.exists():
                    self.shard_bytes[run.run_id] = shard.stat().st_size
        return busy

    def _kill(self, daemon: Daemon, kill: str, env: dict[str, str], log: IO[bytes]) -> Daemon:
        """SIGKILL the daemon alone ("daemon") or the whole group ("crash"); the processes
        started again in its place."""
        self.kills += 1
        if kill == "daemon":
            with contextlib.suppress(ProcessLookupError):
                os.kill(daemon.proc.pid, signal.SIGKILL)
            _, _, usage = os.wait4(daemon.proc.pid, 0)
            daemon.proc.returncode = -signal.SIGKILL
            self.cpu_s += usage.ru_utime + usage.ru_stime
            self.starts += 1
            return restart_daemon(daemon, env, log)
        self.cpu_s += group_cpu_s(daemon.pgid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pgid, signal.SIGKILL)
        for proc in (daemon.proc, daemon.server):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        while group_alive(daemon.pgid):
            time.sleep(0.2)
        return self._start(env, log)

    def _stop(self, daemon: Daemon) -> None:
        usage = stop_daemon(daemon)
        self.cpu_s += usage.ru_utime + usage.ru_stime
        while group_alive(daemon.pgid):
            time.sleep(0.2)

    def prune_tick(self, tick: datetime) -> int:
        """The daily prune's tick at `tick`, as the daemon's scheduler would evaluate it:
        the real schedule with that scheduled time, its run executed here with the soak's
        environment (vault, store, retention, clock). Returns the runs it requested."""
        from radar_pipeline.definitions import defs

        before = dict(os.environ)
        os.environ.update(self.environ(tick))
        try:
            with dg.DagsterInstance.from_config(str(self.home)) as instance:
                context = dg.build_schedule_context(
                    instance=instance,
                    scheduled_execution_time=tick,
                    repository_def=defs.get_repository_def(),
                    resources={"clock": ClockResource()},
                )
                requests = run_history_schedule.evaluate_tick(context).run_requests or []
                for request in requests:
                    run_tags = {**request.tags, "dagster/run_key": request.run_key or ""}
                    defs.resolve_job_def(PRUNE_JOB_NAME).execute_in_process(
                        run_config=request.run_config, instance=instance, tags=run_tags
                    )
        finally:
            os.environ.clear()
            os.environ.update(before)
        return len(requests)

    def radar(self, *args: str, as_of: datetime) -> dict[str, Any]:
        proc = subprocess.run(
            [str(BIN / "radar"), *args, "--json"],
            env=self.environ(as_of),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode not in (0, 2):
            raise RuntimeError(f"radar {' '.join(args)}: {proc.stderr.strip()[-500:]}")
        result: dict[str, Any] = json.loads(proc.stdout)
        return result


def group_cpu_s(pgid: int) -> float:
    """CPU seconds (user + system) of the daemon's process group so far: every live member's
    own time plus that of the children it reaped (the code server reaps its run workers). A
    member that ended unreaped by the group is missed, so this is a lower bound."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in group_alive(pgid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / tick


def verdict(soak: Soak, end: datetime, close: dict[str, Any]) -> list[str]:
    """Every promise of the soak that does not hold (empty: all hold)."""
    problems: list[str] = []
    assert soak.feeds is not None
    folder = soak.vault / SIGNALS_DIR
    by_item: dict[tuple[str, str], list[str]] = {}
    for signal_id in list_signal_ids(soak.vault):
        fm = read_signal_frontmatter(folder / f"{signal_id}.md")
        by_item.setdefault((str(fm["sourceId"]), str(fm["sourceItemId"])), []).append(signal_id)
    window = end - timedelta(days=7, hours=1)
    published = {
        (sid, guid)
        for sid in SOURCES
        for guid, date in soak.feeds.published(sid, end)
        if date >= window
    }
    problems += [f"published item {k} is no Signal" for k in sorted(published - set(by_item))]
    problems += [f"item {k} in {len(v)} Signals" for k, v in by_item.items() if len(v) > 1]
    every = {(sid, guid) for sid in SOURCES for guid, _ in soak.feeds.published(sid, end)}
    problems += [f"Signal of an item never published: {k}" for k in sorted(set(by_item) - every)]
    problems += unbalanced_checks(soak.db)
    with dg.DagsterInstance.from_config(str(soak.home)) as instance:
        status = instance.get_status_by_partition(SIGNALS_KEY, list(SOURCES), sources_partitions)
    failed = sorted(k for k, v in (status or {}).items() if v and v.value == "FAILED")
    failing = sorted(s for s in SOURCES if soak.feeds.trouble(s, end) is not None)
    if failed != failing:
        problems.append(f"failed partitions {failed}, Sources failing at the end {failing}")
    if close.get("retained") != 0 or not close.get("deleted"):
        problems.append(f"weekly close: {close}")
    return problems


def unbalanced_checks(db: Path) -> list[str]:
    """Each check whose parsed items are not each in one recorded outcome (the store read from
    outside)."""
    unbalanced = read_db(
        db,
        "SELECT a.collection_id, a.source_id, a.items_parsed, count(o.outcome) "
        "FROM check_accounting a LEFT JOIN item_observations o "
        "ON o.collection_id = a.collection_id AND o.source_id = a.source_id "
        "GROUP BY ALL HAVING a.items_parsed <> count(o.outcome)",
    )
    return [f"check {r[0]} of {r[1]}: {r[2]} items, {r[3]} outcomes" for r in unbalanced]


# ---- the registry soak: a team's registry, hourly -------------------------------------------

REGISTRY_CHANGED = 0.05  # the share of the Sources that publish one item before each hour
REGISTRY_RETENTION_DAYS = 1  # so the daily prune deletes runs inside two simulated days
REGISTRY_LATENCY_S = 0.02  # the large_registry scenario's farm
GROWTH_LIMIT = 1.25  # a figure of the last quarter of the hours against the second quarter's
STORE_BLOCK = 262_144  # DuckDB's block: the file's smallest step


def registry_soak(n: int, hours: int, results: Path) -> int:
    """`--registry`: N Sources on the large_registry farm (32 hosts, 20 ms, feeds of 20 items
    of ~7 KB; cadence PT1H) collected every simulated hour by the real daemon, a step per hour
    as the week above runs them (no kills), 5 % of the feeds publishing one new item before
    each hour, the daily prune ticked at 00:30 with a retention of one day and once more at
    the end. Only `radar` commands, the daemon and the instance and store files are touched.

    Asserted: every item the farm served is exactly one Signal file and the checks created
    that many; every check's parsed items are each in one outcome; no partition is failed;
    the time of the hour's collection runs does not grow and the store grows no faster (the
    last quarter's median against the second quarter's, <= 1.25x); after more than a day, the
    events the instance holds after the last prune are at most 1.25x the most it held during
    the first day. Per hour: the collection runs and their seconds, the instance's bytes and
    events, the store's and the vault's bytes."""
    farm = FeedFarm(n, latency_s=REGISTRY_LATENCY_S).start()
    rng = random.Random(50)
    start = (farm.now + timedelta(hours=1)).replace(minute=5, second=0, microsecond=0)
    prune = start.replace(hour=0, minute=30)
    prune += timedelta(days=1) if prune <= start else timedelta(0)
    hourly: list[dict[str, Any]] = []
    began = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="radar-registry-soak-") as tmp:
            soak = Soak(Path(tmp), None, None, retention_days=REGISTRY_RETENTION_DAYS)
            write_sources(soak.vault, farm.urls(), cadences=("PT1H",))
            (soak.vault / "Site Content").mkdir(parents=True)
            ids = [source_id(i) for i in range(n)]
            # The repository's run monitoring: no kill here, and a collection of 2,000
            # Sources runs longer than the week's shortened limit (90 s) allows.
            soak.set_up_instance(ids, monitoring=None)
            for hour in range(hours):
                as_of = start + timedelta(hours=hour)
                if hour:
                    for index in rng.sample(range(n), max(1, round(n * REGISTRY_CHANGED))):
                        farm.publish(index, as_of - timedelta(minutes=10))
                while prune <= as_of:
                    soak.prunes += soak.prune_tick(prune)
                    prune += timedelta(days=1)
                known = set(soak.runs)
                soak.step(as_of, kill=None)
                hourly.append(_hour_figures(soak, hour, set(soak.runs) - known))
                print(
                    f"hour {hour + 1}/{hours} {format_utc(as_of)}: "
                    f"{hourly[-1]['collectionRuns']} collection run(s), "
                    f"{hourly[-1]['collectionRun_s']} s; instance "
                    f"{hourly[-1]['instanceEvents']} events ({time.monotonic() - began:.0f} s)",
                    flush=True,
                )
            end = start + timedelta(hours=hours - 1)
            pruned = soak.radar("history", "prune", "--as-of", format_utc(end), as_of=end)
            after = instance_figures(soak.home)
            problems = _registry_verdict(soak, farm, ids, hourly, after)
            figures = {
                "sources": n,
                "simulatedHours": hours,
                "changedPerHour": max(1, round(n * REGISTRY_CHANGED)),
                "retentionDays": REGISTRY_RETENTION_DAYS,
                "wall_s": round(time.monotonic() - began, 1),
                "daemonCpu_s": round(soak.cpu_s, 1),
                "dailyPrunes": soak.prunes,
                "lastPrune": pruned,
                "instanceAfterLastPrune": after,
                "itemsPublished": n * ITEMS_PER_FEED + farm.published(),
                "signals": len(list_signal_ids(soak.vault)),
                "farm": farm.take_counts(),
                "hourly": hourly,
                "violations": problems,
                "machine": machine(),
            }
    finally:
        farm.stop()
    _write_registry(results, figures)
    print(json.dumps({k: v for k, v in figures.items() if k != "hourly"}, indent=2))
    return 1 if problems else 0


def _hour_figures(soak: Soak, hour: int, new_runs: set[str]) -> dict[str, Any]:
    """What one hour's step ran and what the instance, the store and the vault hold after."""
    seconds: list[float] = []
    with dg.DagsterInstance.from_config(str(soak.home)) as instance:
        for record in instance.get_run_records(filters=dg.RunsFilter(run_ids=list(new_runs))):
            if record.dagster_run.job_name == "Collect_signals" and record.end_time:
                seconds.append(
                    record.end_time - (record.start_time or record.create_timestamp.timestamp())
                )
    held = instance_figures(soak.home)
    return {
        "hour": hour,
        "runs": len(new_runs),
        "collectionRuns": len(seconds),
        "collectionRun_s": round(sum(seconds), 1),
        "instanceBytes": held["bytes"],
        "instanceEvents": held["events"],
        "storeBytes": soak.db.stat().st_size,
        "vaultBytes": tree_bytes(soak.vault),
    }


def _registry_verdict(
    soak: Soak, farm: FeedFarm, ids: list[str], hourly: list[dict[str, Any]], after: dict[str, int]
) -> list[str]:
    problems: list[str] = []
    served = len(ids) * ITEMS_PER_FEED + farm.published()
    signals = len(list_signal_ids(soak.vault))
    if signals != served:
        problems.append(f"{signals} Signal files for {served} items served")
    [(created,)] = read_db(soak.db, "SELECT coalesce(sum(created), 0) FROM check_accounting")
    if created != served:
        problems.append(f"the checks created {created} Signals for {served} items served")
    problems += unbalanced_checks(soak.db)
    with dg.DagsterInstance.from_config(str(soak.home)) as instance:
        status = instance.get_status_by_partition(SIGNALS_KEY, ids, sources_partitions)
    failed = sorted(k for k, v in (status or {}).items() if v and v.value == "FAILED")
    if failed:
        problems.append(f"failed partitions: {failed[:10]} ({len(failed)})")
    quarter = (len(hourly) - 1) // 4  # hour 0 is the cold collection: not compared
    if quarter:
        second, last = hourly[1 + quarter : 1 + 2 * quarter], hourly[-quarter:]
        for key in ("collectionRun_s",):
            early, late = _median([h[key] for h in second]), _median([h[key] for h in last])
            if late > GROWTH_LIMIT * early:
                problems.append(f"{key} grew: median {late} in the last quarter, {early} before")
        # The DuckDB file grows in blocks of 256 KB (and shrinks at a checkpoint): a quarter's
        # growth is compared whole, with one block of slack.
        early_growth = hourly[2 * quarter]["storeBytes"] - hourly[quarter]["storeBytes"]
        late_growth = hourly[-1]["storeBytes"] - hourly[-1 - quarter]["storeBytes"]
        if late_growth > GROWTH_LIMIT * max(early_growth, 0) + STORE_BLOCK:
            problems.append(f"the store grows faster: {late_growth} B late, {early_growth} early")
    if len(hourly) > 24:
        first_day = max(h["instanceEvents"] for h in hourly[:24])
        if after["events"] > GROWTH_LIMIT * first_day:
            problems.append(
                f"the instance holds {after['events']} events after the last prune, "
                f"{first_day} at most in the first day"
            )
    return problems


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else 0.0


def _write_registry(folder: Path, figures: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "registry-soak.json").write_text(json.dumps(figures, indent=2) + "\n", "utf-8")
    head = "\n".join(
        f"| {k} | {json.dumps(v) if isinstance(v, dict | list) else v} |"
        for k, v in figures.items()
        if k not in ("machine", "hourly")
    )
    keys = list(figures["hourly"][0]) if figures["hourly"] else []
    rows = "\n".join("| " + " | ".join(str(h[k]) for k in keys) + " |" for h in figures["hourly"])
    (folder / "registry-soak.md").write_text(
        "# Soak: a team's registry, hourly, through the real dagster-daemon\n\n"
        f"`python -m benchmarks.soak --registry --n {figures['sources']} --hours "
        f"{figures['simulatedHours']}` (benchmarks/soak.py, `registry_soak`, says what is "
        "asserted).\n\n"
        f"| figure | value |\n|---|---|\n{head}\n\n"
        f"| {' | '.join(keys)} |\n|{'---|' * len(keys)}\n{rows}\n\n"
        f"Machine: `{json.dumps(figures['machine'])}`\n",
        "utf-8",
    )


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7, help="simulated days (2 or more)")
    parser.add_argument("--results", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument(
        "--registry", action="store_true", help="the hourly soak of a team's registry instead"
    )
    parser.add_argument("--n", type=int, default=2000, help="--registry: Sources (2000)")
    parser.add_argument("--hours", type=int, default=48, help="--registry: simulated hours (48)")
    args = parser.parse_args(argv)
    if args.registry:
        return registry_soak(args.n, args.hours, Path(args.results))
    steps = 2 * args.days
    start = CLOSE - timedelta(days=args.days - 1)
    kills = {steps // 3: "daemon", (2 * steps) // 3: "crash"}
    started = time.monotonic()
    server = FeedServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="radar-soak-") as tmp:
            soak = Soak(Path(tmp), Feeds(start, steps), server)
            soak.set_up()
            close: dict[str, Any] = {}
            prune = start.replace(hour=0, minute=30)  # the next tick of the daily prune
            for n in range(steps):
                as_of = start + n * STEP + timedelta(minutes=5)
                if not close and as_of > CLOSE:
                    close = soak.radar("cleanup", "--as-of", format_utc(CLOSE), as_of=CLOSE)
                while prune <= as_of:
                    soak.prunes += soak.prune_tick(prune)
                    prune += timedelta(days=1)
                soak.step(as_of, kill=kills.get(n))
                print(
                    f"step {n + 1}/{steps} {format_utc(as_of)}: {len(soak.runs)} runs so far "
                    f"({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
            end = start + (steps - 1) * STEP + timedelta(minutes=5)
            # A last prune keeping one day: the verdict below then reads an instance that
            # lost most of its runs, and must still show every partition as it was.
            pruned = soak.radar(
                "history", "prune", "--keep-days", "1", "--as-of", format_utc(end), as_of=end
            )
            problems = verdict(soak, end, close)
            if not pruned["deletedRuns"]:
                problems.append(f"the last prune deleted nothing: {pruned}")
            figures = _figures(soak, args.days, time.monotonic() - started, close, problems)
            figures["lastPrune"] = pruned
    finally:
        server.stop()
    _write(Path(args.results), figures)
    print(json.dumps(figures, indent=2))
    return 1 if problems else 0


def _figures(
    soak: Soak, days: int, wall: float, close: dict[str, Any], problems: list[str]
) -> dict[str, Any]:
    assert soak.feeds is not None
    jobs: dict[str, int] = {}
    for job in soak.runs.values():
        jobs[job] = jobs.get(job, 0) + 1
    with dg.DagsterInstance.from_config(str(soak.home)) as instance:
        left = len(instance.get_run_records())
    per_run = sorted(soak.shard_bytes.values())
    return {
        "simulatedDays": days,
        "sources": len(SOURCES),
        "daemonStarts": soak.starts,
        "codeServerStarts": soak.server_starts,
        "daemonKills": soak.kills,
        "dailyPrunes": soak.prunes,
        "wall_s": round(wall, 1),
        "daemonCpu_s": round(soak.cpu_s, 1),
        "runsLaunched": len(soak.runs),
        "runsByJob": dict(sorted(jobs.items())),
        "runsLeftAfterPruning": left,
        "bytesPerRunMedian": per_run[len(per_run) // 2] if per_run else 0,
        "bytesPerRunMean": round(sum(per_run) / len(per_run)) if per_run else 0,
        "bytesPerRunByJob": _mean_bytes_by_job(soak),
        "dagsterHomeBytes": size_of(soak.home),
        "duckdbBytes": soak.db.stat().st_size,
        "signals": len(list_signal_ids(soak.vault)),
        "feedAnswers": dict(sorted(soak.feeds.served.items())),
        "weeklyClose": {k: close.get(k) for k in ("deleted", "bytes", "retained", "week")},
        "violations": problems,
        "machine": machine(),
    }


def _mean_bytes_by_job(soak: Soak) -> dict[str, int]:
    sizes: dict[str, list[int]] = {}
    for run_id, size in soak.shard_bytes.items():
        sizes.setdefault(soak.runs[run_id], []).append(size)
    return {job: round(sum(v) / len(v)) for job, v in sorted(sizes.items())}


def _write(folder: Path, figures: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "soak.json").write_text(json.dumps(figures, indent=2) + "\n", "utf-8")
    rows = "\n".join(
        f"| {k} | {json.dumps(v) if isinstance(v, dict | list) else v} |"
        for k, v in figures.items()
        if k != "machine"
    )
    (folder / "soak.md").write_text(
        "# Soak: a simulated week through the real dagster-daemon\n\n"
        f"`python -m benchmarks.soak --days {figures['simulatedDays']}` "
        "(see the module docstring for what happens and what is asserted). The daemon reads "
        "the definitions from a long-lived code server (`dagster api grpc`, "
        "`deploy/workspace.grpc.yaml`), started with it at each step. daemonCpu_s is the CPU "
        "of the daemon, the code server and every run worker: `os.wait4` of the daemon and "
        "the code server once ended (the code server reaps its run workers); at the crash, "
        "read from /proc just before the SIGKILL (a lower bound).\n\n"
        f"| figure | value |\n|---|---|\n{rows}\n\n"
        f"Machine: `{json.dumps(figures['machine'])}`\n",
        "utf-8",
    )


if __name__ == "__main__":
    sys.exit(main())
