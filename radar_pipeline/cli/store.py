"""`radar store migrate --to URL`: the embedded DuckDB store moved into PostgreSQL."""

from __future__ import annotations

import argparse
from typing import Any

from radar_pipeline.cli.shell import EXIT_OK, JSON_HELP, command, emit
from radar_pipeline.core.config import Settings


def add_parsers(sub: Any) -> None:
    """`radar store migrate`."""
    store = command(sub, "store", "the provenance store", "radar store migrate --to URL")
    store_sub = store.add_subparsers(dest="action", required=True, metavar="ACTION")
    migrate = command(
        store_sub,
        "migrate",
        "copy the DuckDB store at RADAR_DB into an empty PostgreSQL store (the team profile)",
        "radar store migrate --to postgresql://radar@db.example:5432/radar",
    )
    migrate.add_argument("--to", required=True, metavar="URL", help="a postgresql:// store")
    migrate.add_argument("--json", action="store_true", help=JSON_HELP)
    migrate.set_defaults(handler=cmd_store_migrate)


def cmd_store_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.transfer import move

    settings = settings.with_store_url(args.to)
    done = move(Store(settings.db), Store(settings.db, url=settings.store_url))
    lines = [f"{name}: {rows}" for name, rows in done.tables.items()]
    emit(args, done, f"moved {done.rows} rows into {done.to}\n" + "\n".join(lines))
    return EXIT_OK
