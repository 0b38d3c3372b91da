"""The fault suite's shared parts: a loopback feed farm, a temp Radar home, the invariants.

The farm serves N Sources whose feeds grow by `epoch` (new items, a new ETag per epoch and a
304 to a matching If-None-Match), so every trial has real writes to do and real validators to
get wrong. `RadarHome` is one vault + DuckDB file (or a PostgreSQL store) + DAGSTER_HOME
driven through the real `.venv/bin/radar`; `RadarHome.as_worker` is another worker on the same
vault and store with a Dagster home of its own (another host of the team profile).
`check_invariants` reads only the vault, the store and the farm: it is the judge of every trial.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from radar_pipeline.core.layout import SIGNALS_DIR, TEMPORARY_DIR
from radar_pipeline.core.store.audits import unbalanced_checks
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.migrations import SCHEMA_VERSION
from radar_pipeline.core.vault.signals import list_signal_ids, read_signal_frontmatter
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler
from radar_pipeline_tests.vaultkit import write_source

RADAR = str(Path(sys.executable).parent / "radar")
FULL = os.environ.get("RADAR_FAULTS_FULL", "") not in ("", "0")
T0 = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)  # the suite's clock starts here (--as-of)
ITEM_AGE = timedelta(hours=2)  # items of epoch e are dated at epoch time - 2 h


def trials(short: int, full: int) -> int:
    """How many trials: `full` under RADAR_FAULTS_FULL=1 (`make faults`), else `short`."""
    return full if FULL else short


def record_figures(name: str, figures: dict[str, Any]) -> None:
    """Append one test's figures as a JSON line to $RADAR_FAULTS_FIGURES (when set)."""
    target = os.environ.get("RADAR_FAULTS_FIGURES")
    if not target:
        return
    line = json.dumps({"test": name, "full": FULL, **figures}, sort_keys=True, default=str)
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


# ---- the farm -------------------------------------------------------------------------------


@dataclass
class FarmSource:
    source_id: str
    full_text: bool
    per_epoch: int
    keep: int  # how many latest items the feed shows

    def items(self, epoch: int) -> list[dict[str, Any]]:
        out = []
        for e in range(epoch, -1, -1):
            for n in range(self.per_epoch - 1, -1, -1):
                out.append(
                    {
                        "guid": f"{self.source_id}-e{e}-n{n}",
                        "epoch": e,
                        "date": epoch_time(e) - ITEM_AGE + timedelta(minutes=n),
                    }
                )
                if len(out) == self.keep:
                    return out
        return out


def epoch_time(epoch: int) -> datetime:
    """The suite clock of epoch `epoch` (6 h apart, so every Source is due again)."""
    return T0 + timedelta(hours=6 * epoch)


class Farm:
    """N loopback feeds whose content grows with `epoch`; conditional on ETag per epoch."""

    def __init__(
        self, server: FeedServer, count: int = 10, per_epoch: int = 6, keep: int = 30
    ) -> None:
        self.server = server
        self.epoch = 0
        self._lock = threading.Lock()
        self.sources = [
            FarmSource(f"farm-{i:02d}", full_text=i % 3 == 0, per_epoch=per_epoch, keep=keep)
            for i in range(count)
        ]
        for src in self.sources:
            server.add(f"/{src.source_id}.xml", handler=self._handler(src))

    def etag(self, src: FarmSource) -> str:
        return f'"{src.source_id}-e{self.epoch}"'

    def write_sources(self, vault: Path) -> None:
        for src in self.sources:
            write_source(
                vault,
                src.source_id,
                self.server.url(f"/{src.source_id}.xml"),
                fullText="feed-content" if src.full_text else "none",
            )

    def advance(self) -> None:
        with self._lock:
            self.epoch += 1

    def current_items(self) -> dict[tuple[str, str], dict[str, Any]]:
        """(source id, guid) -> item, for every item the farm serves now."""
        return {
            (s.source_id, item["guid"]): item for s in self.sources for item in s.items(self.epoch)
        }

    def body(self, src: FarmSource, epoch: int) -> bytes:
        parts = []
        for item in src.items(epoch):
            guid = item["guid"]
            content = ""
            if src.full_text:
                content = (
                    f"<content:encoded><![CDATA[<p>Full text of {guid}. "
                    + "Lorem ipsum dolor sit amet. " * 20
                    + "</p>]]></content:encoded>"
                )
            parts.append(
                f"<item><title>Release {guid}</title>"
                f"<link>https://farm.example/{src.source_id}/{guid}?utm_source=rss</link>"
                f'<guid isPermaLink="false">{guid}</guid>'
                f"<pubDate>{item['date'].strftime('%a, %d %b %Y %H:%M:%S +0000')}</pubDate>"
                f"<description>Summary of {guid}: &lt;b&gt;bold&lt;/b&gt; ---</description>"
                f"{content}</item>"
            )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">'
            f"<channel><title>{src.source_id}</title><link>https://farm.example/</link>"
            "<description>farm</description>" + "".join(parts) + "</channel></rss>"
        ).encode()

    def _handler(self, src: FarmSource) -> Any:
        def handle(req: RequestHandler) -> None:
            with self._lock:
                epoch = self.epoch
            etag = f'"{src.source_id}-e{epoch}"'
            if req.headers.get("If-None-Match") == etag:
                req.send_simple(304, b"", {"ETag": etag})
                return
            req.send_simple(
                200,
                self.body(src, epoch),
                {"Content-Type": "application/rss+xml; charset=utf-8", "ETag": etag},
            )

        return handle


# ---- a Radar home driven through the real CLI ----------------------------------------------


@dataclass
class RadarHome:
    """A vault and its store under `root`: the DuckDB file there, or the PostgreSQL store at
    `store_url`; the Dagster home is `dagster_home` (a `worker`'s: `dagster_home-<worker>`)."""

    root: Path
    store_url: str = ""
    worker: str = ""
    vault: Path = field(init=False)
    db: Path = field(init=False)
    home: Path = field(init=False)

    def __post_init__(self) -> None:
        self.vault = self.root / "vault"
        self.db = self.root / "radar.duckdb"
        self.home = self.root / (f"dagster_home-{self.worker}" if self.worker else "dagster_home")
        (self.vault / "Radar" / "Sources").mkdir(parents=True, exist_ok=True)
        (self.vault / "Site Content").mkdir(parents=True, exist_ok=True)
        self.home.mkdir(parents=True, exist_ok=True)

    def as_worker(self, name: str) -> RadarHome:
        """Another worker on this vault and store, with a Dagster home of its own."""
        return RadarHome(self.root, self.store_url, name)

    def environ(self) -> dict[str, str]:
        env = {
            **os.environ,
            "RADAR_VAULT": str(self.vault),
            "RADAR_DB": str(self.db),
            "DAGSTER_HOME": str(self.home),
            "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1,localhost",
        }
        env.pop("RADAR_STORE_URL", None)
        if self.store_url:
            env["RADAR_STORE_URL"] = self.store_url
        return env

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read-only connection to the store (the judge must not change what it judges)."""
        if self.store_url:
            from radar_pipeline.core.store.postgres import read_only_transaction

            with read_only_transaction(self.store_url) as pg:
                yield pg
            return
        con = duckdb.connect(str(self.db), read_only=True)
        try:
            yield con
        finally:
            con.close()

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self.reading() as con:
            return con.execute(sql).fetchall()

    def has_store(self) -> bool:
        """Whether the store exists with every migration committed (a command killed before
        that leaves no DuckDB file, or a schema part-way: each migration commits alone)."""
        if not (self.store_url or self.db.exists()):
            return False
        query = (
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
        )
        if self.rows(query) != [(1,)]:
            return False
        return self.rows("SELECT max(version) FROM schema_migrations") == [(SCHEMA_VERSION,)]

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [RADAR, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.environ(),
            start_new_session=True,
        )

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [RADAR, *args], capture_output=True, text=True, env=self.environ(), timeout=timeout
        )


def collect_json(home: RadarHome, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    proc = home.run("collect", "--json", *args)
    try:
        report = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        report = None
    return proc.returncode, report, proc.stderr


# ---- the judge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VaultView:
    """What the vault holds: parsed Signals by (source, item id), temp files, unreadable files."""

    by_item: dict[tuple[str, str], list[str]]
    ids: set[str]
    unreadable: list[str]
    temp_files: list[str]


def judge_cli_collection(
    proc: subprocess.Popen[str],
    where: str,
    exits: Counter[int],
    outcomes: Counter[str],
    timeout: float,
) -> list[str]:
    """Wait for one overlapping `radar collect --json` and judge it: exit 0 or 2 with an empty
    stderr, every failure classed, a skip only `locked`, exit 2 only with a failed Source.
    Counts its exit code and per-Source outcomes; returns the violations."""
    out, err = proc.communicate(timeout=timeout)
    exits[proc.returncode] += 1
    if proc.returncode not in (0, 2) or err.strip():
        return [f"{where}: exit {proc.returncode}, stderr {err.strip()[-400:]}"]
    report = json.loads(out)
    violations: list[str] = []
    for src in report["sources"]:
        outcome = src["outcome"]
        outcomes[outcome if outcome != "skipped" else f"skipped:{src['error']}"] += 1
        if outcome == "failed" and not src["errorClass"]:
            violations.append(f"{where}: {src['id']} failed without a class")
        if outcome == "skipped" and src["error"] != "locked":
            violations.append(f"{where}: {src['id']} skipped: {src['error']}")
    if proc.returncode == 2 and not report["failed"]:
        violations.append(f"{where}: exit 2 without a failed Source")
    return violations


def view_vault(vault: Path) -> VaultView:
    folder = vault / SIGNALS_DIR
    ids = list_signal_ids(vault)
    by_item: dict[tuple[str, str], list[str]] = {}
    unreadable = []
    for signal_id in sorted(ids):
        try:
            fm = read_signal_frontmatter(folder / f"{signal_id}.md")
        except Exception as exc:  # the judge reports, it does not crash
            unreadable.append(f"{signal_id}: {exc}")
            continue
        by_item.setdefault((str(fm["sourceId"]), str(fm["sourceItemId"])), []).append(signal_id)
    temps = []
    for sub in (SIGNALS_DIR, TEMPORARY_DIR, Path("Radar") / "Sources"):
        d = vault / sub
        if d.is_dir():
            temps += [f"{sub}/{p.name}" for p in d.iterdir() if p.name.startswith(".")]
    return VaultView(by_item, ids, unreadable, sorted(temps))


def db_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def check_invariants(
    home: RadarHome, farm: Farm, *, settled: bool, expect_all_items: bool
) -> list[str]:
    """Every invariant the fault suite promises; returns violations (empty means all hold).

    settled: no run was killed since the last complete run (temp files must be gone, index ==
    files). expect_all_items: every item the farm serves must be a Signal. The index's
    identity is UNIQUE, so one row per item is the files' one Signal per item and index ==
    files.
    """
    v: list[str] = []
    view = view_vault(home.vault)
    v += [f"unreadable (partial?) Signal {u}" for u in view.unreadable]
    identities = Counter(sid.rsplit("-", 1)[-1] for sid in view.ids)
    v += [f"identity {i} in {n} files" for i, n in identities.items() if n > 1]
    v += [f"item {k} in {len(s)} Signals: {s}" for k, s in view.by_item.items() if len(s) > 1]
    if settled:
        v += [f"temp file left: {t}" for t in view.temp_files]
    # A command killed before its first migration committed (it opens the store first thing)
    # leaves no store, or one without tables: no index yet, which the next run creates.
    if not home.has_store():
        return v + (["store missing or not migrated"] if settled else [])
    with home.reading() as con:
        indexed = {str(r[0]) for r in con.execute("SELECT signal_id FROM signals").fetchall()}
        states = dict(con.execute("SELECT source_id, etag FROM feed_state").fetchall())
        # Invariant 14: each recorded check's outcomes add up to what it parsed.
        v += [f"check not accounted for: {row}" for row in unbalanced_checks(con)]
    v += [f"index row without file: {s}" for s in sorted(indexed - view.ids)]
    if settled:
        v += [f"file without index row: {s}" for s in sorted(view.ids - indexed)]
    items = farm.current_items()
    if expect_all_items:
        v += [f"feed item not a Signal: {k}" for k in sorted(items) if k not in view.by_item]
    # Validators never ahead: a Source whose stored ETag is the farm's current one must hold
    # every current item (as a file AND an index row), and so must its Source file's mirror.
    for src in farm.sources:
        current = farm.etag(src)
        mirror = _source_file_etag(home.vault, src.source_id)
        for where, etag in (("feed_state", states.get(src.source_id)), ("Source file", mirror)):
            if etag != current:
                continue
            for key in (k for k in items if k[0] == src.source_id):
                files = view.by_item.get(key, [])
                if not files:
                    v.append(f"{where} etag {etag} ahead: {key} has no Signal file")
                elif not set(files) & indexed:
                    v.append(f"{where} etag {etag} ahead: {key} has no index row")
    return v


def _source_file_etag(vault: Path, source_id: str) -> str | None:
    path = vault / "Radar" / "Sources" / f"{source_id}.md"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("etag:"):
            value = line[5:].strip()
            if value.startswith("'") and value.endswith("'"):
                value = value[1:-1].replace("''", "'")
            return value or None
    return None


def seeded(seed: str) -> random.Random:
    return random.Random(seed)


# ---- where a killed run was: read back from the Dagster event log and DuckDB ----------------

STEPS = ("fetch", "parse", "dedupe", "signal_materialize")
PHASES = (
    "startup",  # no Dagster run yet: imports, registry, partitions
    "run-start",  # run created, no step started
    "fetch",  # plan + concurrent fetch (+ attempts recorded)
    "parse",
    "dedupe",  # index reconcile + classification
    "materialize:files",  # Signal files being written, no commit yet
    "materialize:health",  # committed; Source health keys being written
    "run-end",  # every step done, run not yet marked success
    "exit",  # run succeeded; report printing, interpreter exit
    "completed",  # the process had already exited when the kill came
)


def run_phase(home: RadarHome, as_of: str) -> str:
    """Which phase the collection `as_of` was in when it died (see PHASES)."""
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(home.home))
    try:
        run = next(
            (
                r
                for r in instance.get_runs(limit=5)
                if r.run_config.get("ops", {})
                .get("signals", {})
                .get("ops", {})
                .get("fetch", {})
                .get("config", {})
                .get("as_of")
                == as_of
            ),
            None,
        )
        if run is None:
            return "startup"
        if run.status == dg.DagsterRunStatus.SUCCESS:
            return "exit"
        started: list[str] = []
        done: set[str] = set()
        for entry in instance.all_logs(run.run_id):
            event = entry.dagster_event
            if event is None or event.step_key is None:
                continue
            step = event.step_key.rsplit(".", 1)[-1]
            if event.event_type == dg.DagsterEventType.STEP_START:
                started.append(step)
            elif event.event_type == dg.DagsterEventType.STEP_SUCCESS:
                done.add(step)
        if not started:
            return "run-start"
        open_steps = [s for s in started if s not in done]
        if not open_steps and len(done) == len(STEPS):
            return "run-end"
        # Between two steps counts as the next one (its inputs are ready, nothing written yet).
        step = open_steps[-1] if open_steps else STEPS[len(done)]
        if step != "signal_materialize":
            return step
        committed = home.rows(
            f"SELECT count(*) FROM collections WHERE collection_id = '{run.run_id}'"
        )
        return "materialize:health" if committed[0][0] else "materialize:files"
    finally:
        instance.dispose()
