"""`radar dlq list | replay ID | dismiss ID`: the dead letters of failed checks."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from radar_pipeline.cli.shell import (
    AS_OF_HELP,
    EXIT_ERROR,
    EXIT_OK,
    JSON_HELP,
    as_of_arg,
    command,
    dagster_definitions,
    dagster_instance,
    emit,
)
from radar_pipeline.core.config import Settings

if TYPE_CHECKING:
    from radar_pipeline.core.contract.collection import CollectionReport
    from radar_pipeline.core.contract.operations import DeadLetter


def add_parsers(sub: Any) -> None:
    """`radar dlq list | replay ID | dismiss ID`."""
    dlq = command(
        sub,
        "dlq",
        "dead letters: failed checks awaiting a decision",
        "radar dlq list",
        "radar dlq replay 3",
        "radar dlq dismiss 3",
    )
    dlq_sub = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = command(dlq_sub, "list", "every dead letter with its status", "radar dlq list --json")
    listing.add_argument("--json", action="store_true", help=JSON_HELP)
    listing.set_defaults(handler=cmd_dlq_list)
    for name, handler, text in (
        ("replay", cmd_dlq_replay, "check that Source now and record `replayed`"),
        ("dismiss", cmd_dlq_dismiss, "record `dismissed` (the dead letter is kept)"),
    ):
        action = command(dlq_sub, name, text, f"radar dlq {name} 3")
        action.add_argument("id", metavar="ID", help="the dead letter's id (radar dlq list)")
        action.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
        action.add_argument("--json", action="store_true", help=JSON_HELP)
        action.set_defaults(handler=handler)


def _dlq_line(letter: DeadLetter) -> str:
    from radar_pipeline.core.clock import format_utc

    decided = f"  {letter.decision} {format_utc(letter.decided_at)}" if letter.decided_at else ""
    return (
        f"{letter.id}  {format_utc(letter.created_at)}  {letter.status:<9} "
        f"{letter.source_id:<28} {letter.stage}/{letter.error_class}: {letter.message}{decided}"
    )


def cmd_dlq_list(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.contract.operations import DeadLetterList
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import list_dead_letters

    letters = list_dead_letters(Store.of(settings.paths))
    opened = sum(1 for d in letters if d.status == "open")
    text = "\n".join([*map(_dlq_line, letters), f"{len(letters)} dead letters, {opened} open"])
    emit(args, DeadLetterList(dead_letters=tuple(letters)), text)
    return EXIT_OK


def cmd_dlq_replay(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import replay
    from radar_pipeline.defs.collection.launch import launch_collection

    paths, now = settings.paths, as_of_arg(args)

    def run_check(source_id: str) -> CollectionReport:
        defs, instance = dagster_definitions(), dagster_instance(settings)
        return launch_collection(
            defs, instance, settings, "explicit", (source_id,), now, trigger="dlq-replay"
        )

    done = replay(Store.of(paths), args.id, now, run_check)
    new = done.new_dead_letter
    emit(args, done.output(), _dlq_line(done.dead_letter))
    if done.source.outcome == "failed":
        print(
            f"radar: dlq: {done.dead_letter.source_id} failed again ({done.source.error})"
            + (f"; new dead letter {new.id}" if new else ""),
            file=sys.stderr,
        )
        return EXIT_ERROR
    return EXIT_OK


def cmd_dlq_dismiss(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.contract.operations import DismissOutput
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import dismiss

    letter = dismiss(Store.of(settings.paths), args.id, as_of_arg(args))
    emit(args, DismissOutput(dead_letter=letter), _dlq_line(letter))
    return EXIT_OK
