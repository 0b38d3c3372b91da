"""`radar history prune`: Dagster's run history bounded by its retention."""

from __future__ import annotations

import argparse
from typing import Any

from radar_pipeline.cli.shell import (
    AS_OF_HELP,
    EXIT_OK,
    JSON_HELP,
    as_of_arg,
    command,
    dagster_instance,
    emit,
)
from radar_pipeline.core.config import Settings


def add_parsers(sub: Any) -> None:
    """`radar history prune`."""
    history = command(sub, "history", "the Dagster run history", "radar history prune")
    history_sub = history.add_subparsers(dest="action", required=True, metavar="ACTION")
    prune = command(
        history_sub,
        "prune",
        "delete Dagster runs (and their event logs) older than the retention, except those a "
        "partition, a check or an open dead letter still needs",
        "radar history prune",
        "radar history prune --keep-days 7 --json",
    )
    prune.add_argument(
        "--keep-days",
        metavar="N",
        help="keep N days of runs (default RADAR_RUN_RETENTION_DAYS, else 30)",
    )
    prune.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
    prune.add_argument("--json", action="store_true", help=JSON_HELP)
    prune.set_defaults(handler=cmd_history_prune)


def cmd_history_prune(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.config import days_to_keep
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.defs.history.prune import prune_run_history

    as_of = as_of_arg(args)
    keep = (
        settings.run_retention_days
        if args.keep_days is None
        else days_to_keep(args.keep_days, "--keep-days")
    )
    store = Store.of(settings.paths)
    result = prune_run_history(dagster_instance(settings), store, keep, as_of).summary()
    shown = result.json_object()  # the times as the JSON prints them
    emit(
        args,
        result,
        f"run history before {shown['cutoff']} ({keep} days before {shown['asOf']}): deleted "
        f"{result.deleted_runs} runs ({result.bytes_freed} bytes), kept {result.kept_runs} "
        f"({result.protected_runs} older ones still needed)",
    )
    return EXIT_OK
