"""What DuckDB's single writer costs: N concurrent `radar collect` processes, disjoint Sources.

    .venv/bin/python -m radar_pipeline_tests.scaleout.bench_writers [--per-process 12] [--items 20]

Every process collects its own Sources (a loopback feed farm, `--items` items each) into ONE
vault and ONE DuckDB file, with one shared embedded Dagster home, exactly as `radar collect
--source ...` does (the worker calls the CLI's main). Each worker reports its wall time and the
Store's lock waits, read from the store's log records (`radar_lock_wait_s`); the table goes to
stdout as Markdown, raw rows as JSON to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

REPO_ROOT = Path(__file__).resolve().parents[2]


class LockWaits(logging.Handler):
    """The writer-lock waits the store logs in this process (`radar_lock_wait_s`)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.waits: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        wait = getattr(record, "radar_lock_wait_s", None)
        if wait is not None:
            self.waits.append(float(wait))


def worker(source_ids: list[str]) -> int:
    """One `radar collect --source ...` in this process; its figures as JSON on stderr."""
    import contextlib
    import io

    from radar_pipeline import cli

    waits = LockWaits()
    logger = logging.getLogger("radar_pipeline.core.store.connection")
    logger.addHandler(waits)
    logger.setLevel(logging.INFO)
    started = time.monotonic()
    args = ["collect", "--json"] + [a for s in source_ids for a in ("--source", s)]
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = cli.main(args)
    report = json.loads(out.getvalue() or "{}")
    row = {
        "rc": code,
        "wall_s": round(time.monotonic() - started, 3),
        "created": report.get("created"),
        "waited": len(waits.waits),
        "wait_s": round(sum(waits.waits), 3),
        "max_wait_s": round(max(waits.waits, default=0.0), 3),
    }
    sys.stderr.write("BENCH " + json.dumps(row) + "\n")
    return 0


def run_round(n: int, per_process: int, items: int, server: FeedServer) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"radar-bench-{n}-"))
    try:
        vault, home = root / "vault", root / "dagster_home"
        home.mkdir(parents=True)
        shutil.copyfile(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
        groups: list[list[str]] = []
        for p in range(n):
            ids = []
            for i in range(per_process):
                sid = f"p{p}-s{i:02d}"
                feed = rss(
                    [
                        {
                            "title": f"{sid} {k}",
                            "guid": f"{sid}-{k}",
                            "link": f"https://e.x/{sid}/{k}",
                        }
                        for k in range(items)
                    ]
                )
                write_source(vault, sid, server.add(f"/{sid}.xml", feed))
                ids.append(sid)
            groups.append(ids)
        env = {
            **os.environ,
            "RADAR_VAULT": str(vault),
            "RADAR_DB": str(root / "radar.duckdb"),
            "DAGSTER_HOME": str(home),
            "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
        }
        # Create the DuckDB schema, the Dagster SQLite files and every partition first, so the
        # round measures collections, not one-time setup races.
        subprocess.run(
            [sys.executable, "-m", "radar_pipeline_tests.scaleout.bench_writers", "--setup"],
            env=env,
            check=True,
        )
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "radar_pipeline_tests.scaleout.bench_writers",
                    "--worker",
                    *ids,
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for ids in groups
        ]
        rows = []
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            lines = [ln for ln in err.splitlines() if ln.startswith("BENCH ")]
            rows.append(
                json.loads(lines[-1][6:]) if lines else {"rc": proc.returncode, "error": err[-400:]}
            )
        total = time.monotonic() - started
        return {"n": n, "sources": n * per_process, "total_wall_s": round(total, 2), "rows": rows}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def setup() -> int:
    """Schema, instance and partitions for the vault in the environment."""
    from radar_pipeline import cli
    from radar_pipeline.core.config import Settings
    from radar_pipeline.core.registry.sources import load_registry
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.defs.partitions import sync_partitions

    paths = Settings.from_env().paths
    Store(paths.db).schema_version()
    instance = cli.dagster_instance(Settings.from_env())
    sync_partitions(instance, [r.source.id for r in load_registry(paths.vault).sources])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs="*")
    parser.add_argument("--setup", action="store_true")
    parser.add_argument("--per-process", type=int, default=12)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--n", type=int, nargs="*", default=[1, 2, 4, 8])
    args = parser.parse_args(argv)
    if args.setup:
        return setup()
    if args.worker is not None:
        return worker(args.worker)
    server = FeedServer().start()
    out = [
        "| processes | Sources | total wall s | per-process wall s (max) | "
        "opens that waited | lock wait s (sum / max one) | failed processes |",
        "|---|---|---|---|---|---|---|",
    ]
    try:
        for n in args.n:
            res = run_round(n, args.per_process, args.items, server)
            sys.stderr.write(json.dumps(res) + "\n")
            rows = res["rows"]
            ok = [r for r in rows if "wall_s" in r]
            out.append(
                f"| {n} | {res['sources']} | {res['total_wall_s']} | "
                f"{max((r['wall_s'] for r in ok), default=0)} | "
                f"{sum(r['waited'] for r in ok)} | "
                f"{round(sum(r['wait_s'] for r in ok), 2)} / "
                f"{max((r['max_wait_s'] for r in ok), default=0)} | "
                f"{sum(1 for r in rows if r.get('rc') not in (0,))} |"
            )
    finally:
        server.stop()
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
