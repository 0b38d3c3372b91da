"""`radar`: the command line, a thin layer over the same Dagster definitions and instance.

One module per command group (`sources`, `collection`, `dlq`, `history`, `store`, `vault`), each
adding its sub-commands to the parser built here; what they share is in `shell`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from radar_pipeline import __version__
from radar_pipeline.cli import collection, dlq, history, sources, store, vault
from radar_pipeline.cli.shell import (
    EXIT_ERROR,
    FORMAT,
    UsageError,
    command_clock,
    dagster_definitions,
    dagster_instance,
)
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import explain

DESCRIPTION = (
    "`radar`: the command line, a thin layer over the same Dagster definitions and instance."
)
__all__ = ["UsageError", "dagster_definitions", "dagster_instance", "main", "run"]


class _Parser(argparse.ArgumentParser):
    """argparse with the contract's usage errors: one line on stderr and exit 1 (2 means "a
    Source failed"), never the usage block or a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        # The one read of the environment: every command gets these settings (a bad value is
        # one line naming the variable, like any other error below).
        settings = Settings.from_env()
        # ... and the one reading of the clock: every "now" of the command and of the runs it
        # launches is this one (or its --as-of).
        args.clock = command_clock(settings)
        code: int = args.handler(args, settings)
        return code
    except UsageError as exc:
        print(f"radar: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        # The root cause and what to do, in one line (a full disk, a store that cannot be
        # read, the process holding it). A failure explain() cannot name is a bug: its trace.
        why = explain(exc)
        if why.error_class == "internal":
            raise
        print(f"radar: {why.line}", file=sys.stderr)
        return EXIT_ERROR


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="radar",
        description=DESCRIPTION,
        formatter_class=FORMAT,
        epilog="examples:\n  radar collect --all\n  radar sources import feeds.opml\n"
        "  radar report --json\n\nRADAR_VAULT, RADAR_DB, DAGSTER_HOME and "
        "RADAR_USER_AGENT_CONTACT are read from the environment (README.md).",
    )
    parser.add_argument(
        "--version", action="version", version=f"radar {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for group in (sources, collection, dlq, history, store, vault):
        group.add_parsers(sub)
    return parser


def run() -> None:
    """The `radar` command."""
    sys.exit(main())
