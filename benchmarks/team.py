"""Scenario 11, `team`: the provenance store in PostgreSQL (the team profile) beside the DuckDB
file (the embedded one), in one run.

At N Sources (the largest `--n` up to 100) and the farm's latency: a cold collection and the
unchanged re-run after it, each side in fresh vaults of its own; the team side with
`RADAR_STORE_URL` naming a fresh database on a throwaway server on 127.0.0.1
(radar_pipeline_tests/pgserver.py). Dagster's own instance is SQLite in `DAGSTER_HOME` on both
sides, so the difference is the provenance store alone. With `--repeat K` the sides alternate
(which one goes first swaps every round) and the medians count.

Measured per run: the client's wall and CPU (`os.wait4`: the `radar` command and its parse
workers) and the server's CPU over the run (its process tree read from /proc: the postmaster,
the backends it reaped, its live children), work the team profile moves off the worker's host
(on the embedded side it is only the idle server's own background work). The server also
counts what a run asked of it: sessions (connections), transactions (pg_stat_database) and
top-level statements (pg_stat_statements, loaded for this; its own cost is in the team side).

Then, in the harness, what one of each costs on this machine: a connection (loopback TCP, a
scram-sha-256 login, the session's settings), a round trip (`SELECT 1`), an empty store
transaction on each backend (PostgreSQL: connect, BEGIN, the store's turn lock, COMMIT, close;
DuckDB: open the file, BEGIN, COMMIT, close) and what a process's first transaction adds (the
migration check, and the DuckDB built-ins created again as SQL functions). Sessions x a
connection + statements x a round trip is the estimate set beside the measured difference.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.farm import ITEMS_PER_FEED
from benchmarks.measure import Measured
from benchmarks.scenarios import (
    Context,
    Outcome,
    Run,
    Workspace,
    expect,
    median_run,
    write_sources,
)
from radar_pipeline_tests.pgserver import (
    NO_BINARIES,
    PostgresServer,
    ServerUnavailable,
    server_binaries,
    throwaway_server,
)

SIDES = ("embedded", "team")
LABELS = {"embedded": "embedded (DuckDB file)", "team": "team (RADAR_STORE_URL)"}
SETTLE_S = 0.5  # after a run, for the last backends to exit and flush their statistics
UNIT_SAMPLES = 30  # samples of each unit cost (the median counts)


@dataclass(frozen=True)
class ServerCounts:
    """The server's counters at one instant (for the database of one side)."""

    cpu_s: float
    sessions: int
    transactions: int
    statements: int | None  # None: pg_stat_statements is not installed


@dataclass(frozen=True)
class Sample:
    """One measured `radar collect` and what the server did meanwhile."""

    measured: Measured
    report: dict[str, Any]
    server_cpu_s: float
    sessions: int
    transactions: int
    statements: int | None

    def detail(self, side: str) -> dict[str, Any]:
        if side == "embedded":
            return {"server_cpu_s": round(self.server_cpu_s, 2)}
        return {
            "server_cpu_s": round(self.server_cpu_s, 2),
            "sessions": self.sessions,
            "transactions": self.transactions,
            "statements": self.statements,
        }


class Meter:
    """Reads the server's CPU and a database's counters through one session of its own (to
    the `postgres` database, so it counts in no side's figures)."""

    def __init__(self, server: PostgresServer, statements: bool) -> None:
        import psycopg

        self.server = server
        self.statements = statements
        self._con = psycopg.connect(server.url("postgres"), autocommit=True)
        if statements:
            self._con.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")

    def close(self) -> None:
        self._con.close()

    def read(self, database: str | None) -> ServerCounts:
        row = (0, 0)
        if database is not None:
            found = self._con.execute(
                "SELECT sessions, xact_commit + xact_rollback FROM pg_stat_database "
                "WHERE datname = %s",
                [database],
            ).fetchone()
            row = (int(found[0]), int(found[1])) if found else row
        statements = None
        if self.statements and database is not None:
            got = self._con.execute(
                "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = "
                "(SELECT oid FROM pg_database WHERE datname = %s)",
                [database],
            ).fetchone()
            statements = int(got[0]) if got else 0
        return ServerCounts(self.server.cpu_seconds(), row[0], row[1], statements)

    def around(self, run: Callable[[], Run], database: str | None) -> Sample:
        before = self.read(database)
        m, report = run()
        time.sleep(SETTLE_S)
        after = self.read(database)
        statements = (
            None
            if after.statements is None or before.statements is None
            else after.statements - before.statements
        )
        return Sample(
            m,
            report,
            after.cpu_s - before.cpu_s,
            after.sessions - before.sessions,
            after.transactions - before.transactions,
            statements,
        )


def team(ctx: Context, n: int) -> Outcome:
    """11. Cold collection and unchanged re-run of N Sources, embedded vs team profile: the
    wall and CPU ratios team / embedded (info), and where the difference comes from."""
    out = Outcome()
    name = f"11 team profile N={n}"
    binaries = server_binaries()
    if binaries is None:
        out.rows.append({"scenario": name, "run": f"skipped: {NO_BINARIES}"})
        out.notes.append(f"team: skipped: {NO_BINARIES}")
        return out
    statements = (binaries.parent / "lib" / "pg_stat_statements.so").is_file()
    settings = {"shared_preload_libraries": "pg_stat_statements"} if statements else {}
    try:
        with throwaway_server(settings) as server, _meter(server, statements) as meter:
            _measure(ctx, n, name, server, meter, out)
    except ServerUnavailable as exc:
        out.rows.append({"scenario": name, "run": f"skipped: {exc}"})
        out.notes.append(f"team: skipped: {exc}")
    return out


@contextmanager
def _meter(server: PostgresServer, statements: bool) -> Iterator[Meter]:
    meter = Meter(server, statements)
    try:
        yield meter
    finally:
        meter.close()


def _database(ws: Workspace) -> str | None:
    return ws.store_url.rsplit("/", 1)[1] if ws.store_url else None


def _measure(
    ctx: Context, n: int, name: str, server: PostgresServer, meter: Meter, out: Outcome
) -> None:
    cold: dict[str, list[Sample]] = {side: [] for side in SIDES}
    rerun: dict[str, list[Sample]] = {side: [] for side in SIDES}
    spaces: dict[str, list[Workspace]] = {side: [] for side in SIDES}
    for k in range(ctx.repeat):
        order = SIDES if k % 2 == 0 else SIDES[::-1]
        for side in order:
            ws = ctx.workspace(f"team-{side}-{n}-{k + 1}")
            if side == "team":
                ws = replace(ws, store_url=server.new_database(f"radar_{k + 1}"))
            write_sources(ws.vault, ctx.farm.urls(n))
            spaces[side].append(ws)
            cold[side].append(meter.around(lambda ws=ws: ctx.collect(ws), _database(ws)))
        for side in order:
            ws = spaces[side][-1]
            rerun[side].append(meter.around(lambda ws=ws: ctx.collect(ws), _database(ws)))
    medians: dict[tuple[str, str], Sample] = {}
    for what, samples in (("cold", cold), ("re-run", rerun)):
        for side in SIDES:
            shown = median_run(samples[side], lambda s: s.measured.wall_s)
            medians[(what, side)] = shown
            suffix = "" if ctx.repeat == 1 else f", median of {ctx.repeat}"
            out.row(
                name,
                f"{LABELS[side]}, {what}{suffix}",
                shown.measured,
                items=shown.report.get("created", 0),
                farm=shown.report.get("_farm", {}),
                runs_wall_s=" ".join(f"{s.measured.wall_s:.2f}" for s in samples[side]),
                runs_cpu_s=" ".join(f"{s.measured.cpu_s:.2f}" for s in samples[side]),
                **shown.detail(side),
            )
    _sanity(out, name, n, cold, rerun, spaces)
    for what in ("cold", "re-run"):
        _ratios(out, name, what, cold if what == "cold" else rerun)
    units = unit_costs(server, spaces["team"][-1].store_url, spaces["embedded"][-1].db)
    for key, value in units.items():
        out.info(name, f"unit cost: {key}", value)
    for what in ("cold", "re-run"):
        out.notes.append(
            _explained(what, medians[(what, "embedded")], medians[(what, "team")], units)
        )


def _sanity(
    out: Outcome,
    name: str,
    n: int,
    cold: dict[str, list[Sample]],
    rerun: dict[str, list[Sample]],
    spaces: dict[str, list[Workspace]],
) -> None:
    """Every cold run created every item, every re-run parsed nothing, and the team side
    wrote no DuckDB file: else the figures compare different work."""
    for side in SIDES:
        created = min(s.report.get("created", 0) for s in cold[side])
        parsed = max(s.report.get("_farm", {}).get("200", 0) for s in rerun[side])
        expect(out, name, f"created, fewest of the cold runs ({side})", created, n * ITEMS_PER_FEED)
        expect(out, name, f"feeds parsed, most of the re-runs ({side})", parsed, 0)
    duck_files = sum(ws.db.exists() for ws in spaces["team"])
    expect(out, name, "DuckDB files written by the team side", duck_files, 0)


def _ratios(out: Outcome, name: str, what: str, samples: dict[str, list[Sample]]) -> None:
    """Team / embedded of the medians: wall, the client's CPU, and client + server CPU."""

    def median(side: str, figure: Callable[[Sample], float]) -> float:
        return statistics.median(figure(s) for s in samples[side])

    for label, figure in (
        ("wall", lambda s: s.measured.wall_s),
        ("client CPU", lambda s: s.measured.cpu_s),
        ("client + server CPU", lambda s: s.measured.cpu_s + s.server_cpu_s),
    ):
        base = median("embedded", figure)
        value = median("team", figure) / base if base > 0 else float("inf")
        out.info(name, f"{what}: {label}, team / embedded", value)


def unit_costs(server: PostgresServer, team_url: str, duckdb_file: Path) -> dict[str, float]:
    """What one connection, round trip and empty store transaction cost here: medians of the
    wall and of this process's CPU (all its threads: DuckDB's too), in ms; the server's CPU per
    connection from /proc. On a loaded machine read the CPU figures."""
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.postgres import connect

    def timed(action: Callable[[], object], samples: int = UNIT_SAMPLES) -> tuple[float, float]:
        walls, cpus = [], []
        for _ in range(samples):
            cpu, started = time.process_time(), time.perf_counter()
            action()
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        return statistics.median(walls) * 1000, statistics.median(cpus) * 1000

    server_cpu = server.cpu_seconds()
    connection = timed(lambda: connect(team_url).close())
    time.sleep(SETTLE_S)
    server_per_connection = (server.cpu_seconds() - server_cpu) / UNIT_SAMPLES * 1000
    con = connect(team_url)
    try:
        round_trip = timed(lambda: con.raw.execute("SELECT 1").fetchone(), 200)
    finally:
        con.close()
    pg, duck = Store(Path("unused.duckdb"), url=team_url), Store(duckdb_file)
    pg.schema_version()  # both migrated in this process before anything is timed
    duck.schema_version()

    def empty(store: Store) -> Callable[[], None]:
        def run() -> None:
            with store.transaction():
                pass

        return run

    pg_turn, duck_turn = timed(empty(pg)), timed(empty(duck))

    def first_of_a_process() -> None:
        Store.forget_migrations()
        empty(pg)()

    first = timed(first_of_a_process, 10)
    figures: dict[str, float] = {}
    for label, (wall, cpu) in (
        ("PostgreSQL connection", connection),
        ("PostgreSQL round trip (SELECT 1)", round_trip),
        ("empty store transaction, PostgreSQL", pg_turn),
        ("empty store transaction, DuckDB file", duck_turn),
    ):
        figures[f"{label}, ms"] = wall
        figures[f"{label}, client CPU ms"] = cpu
    figures["PostgreSQL server CPU per connection, ms"] = server_per_connection
    figures[
        "a process's first PostgreSQL transaction adds (migration check, SQL functions), ms"
    ] = first[0] - pg_turn[0]
    return figures


def _explained(what: str, embedded: Sample, team: Sample, units: dict[str, float]) -> str:
    """The note: the measured difference beside an estimate from the unit costs. Every session
    but one (the Source locks' own) is one store transaction, which the embedded side makes as
    well, on its file; the statements are the round trips."""
    wall = team.measured.wall_s - embedded.measured.wall_s
    cpu = team.measured.cpu_s - embedded.measured.cpu_s
    pg_turn = units["empty store transaction, PostgreSQL, ms"] / 1000
    duck_turn = units["empty store transaction, DuckDB file, ms"] / 1000
    round_trip = units["PostgreSQL round trip (SELECT 1), ms"] / 1000
    pg_cpu = units["empty store transaction, PostgreSQL, client CPU ms"] / 1000
    duck_cpu = units["empty store transaction, DuckDB file, client CPU ms"] / 1000
    turns = max(team.sessions - 1, 0)
    statements = team.statements or 0
    return (
        f"team {what} (median runs): wall {team.measured.wall_s:.2f} s vs "
        f"{embedded.measured.wall_s:.2f} s embedded ({wall:+.2f} s), client CPU "
        f"{team.measured.cpu_s:.2f} s vs {embedded.measured.cpu_s:.2f} s ({cpu:+.2f} s), "
        f"server CPU {team.server_cpu_s:.2f} s (embedded side: {embedded.server_cpu_s:.2f} s, "
        f"the idle server); {team.sessions} sessions, {team.transactions} server transactions "
        f"(an autocommit statement counts one), {statements} statements. Estimate: "
        f"{turns} store transactions x ({pg_turn * 1000:.1f} - {duck_turn * 1000:.1f}) ms "
        f"(an empty one, PostgreSQL - DuckDB file) = {turns * (pg_turn - duck_turn):+.2f} s "
        f"of wall and {turns * (pg_cpu - duck_cpu):+.2f} s of client CPU "
        f"({pg_cpu * 1000:.1f} - {duck_cpu * 1000:.1f} ms each), {statements} statements x "
        f"{round_trip * 1000:.2f} ms a round trip = {statements * round_trip:.2f} s"
    )
