"""What every `radar` command shares: exit codes, usage errors, the JSON switch, the clock of
`--as-of`, the progress bar, and the Dagster definitions and instance it launches on."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.config import Settings, export_dagster_home

if TYPE_CHECKING:
    import dagster as dg

    from radar_pipeline.core.contract.base import ContractModel

EXIT_OK, EXIT_ERROR, EXIT_SOURCE_FAILED = 0, 1, 2
FORMAT = argparse.RawDescriptionHelpFormatter
JSON_HELP = "print one JSON object (the contract's shape) instead of text"
AS_OF_HELP = "ISO-8601 time replacing the clock for every decision (simulation, tests)"


class UsageError(Exception):
    """Bad input on the command line: one clear line on stderr, exit 1."""


def command(sub: Any, name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
    """A sub-command whose --help ends with its examples."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=FORMAT
    )
    return parser


def command_clock(settings: Settings) -> datetime:
    """The clock of one command, read once (cli/__init__.py) and handed to everything the
    command does and every run it launches: RADAR_AS_OF when set, else the wall clock."""
    return settings.as_of or datetime.now(UTC)


def as_of_arg(args: argparse.Namespace) -> datetime:
    """The command's `--as-of`, else its clock (`args.clock`, `command_clock`)."""
    value: str | None = getattr(args, "as_of", None)
    if value is None or not value.strip():
        clock: datetime = args.clock
        return clock
    try:
        return parse_utc(value)
    except ValueError as exc:
        raise UsageError(f"--as-of {value!r} is not an ISO-8601 time: {exc}") from exc


def emit(args: argparse.Namespace, payload: ContractModel, text: str) -> None:
    """The command's output: its contract model as indented JSON with --json, else `text`."""
    if args.json:
        print(json.dumps(payload.json_object(), indent=2, sort_keys=False))
    else:
        print(text)


class _ProgressHandler(logging.Handler):
    """Advances a rich progress bar from the `radar_progress` records of one stage (see
    core/acquire/fetch.py and core/vault/index.py)."""

    def __init__(self, stage: str, progress: Any, task: Any) -> None:
        super().__init__(logging.INFO)
        self.stage, self.progress, self.task = stage, progress, task

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "radar_progress", None)
        if not event or event[0] != self.stage:
            return
        _, done, total = event
        if done is None:
            self.progress.update(self.task, total=total, advance=1)
        else:
            self.progress.update(self.task, total=total, completed=done)


@contextlib.contextmanager
def progress(stage: str, label: str) -> Iterator[None]:
    """A progress bar on stderr while the block runs, only when stderr is a terminal (pipes,
    logs and `--json` consumers see nothing of it); gone when the block ends."""
    if not sys.stderr.isatty():
        yield
        return
    from rich.console import Console
    from rich.progress import MofNCompleteColumn, Progress

    logger = logging.getLogger("radar_pipeline.progress")
    columns = (*Progress.get_default_columns(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        handler = _ProgressHandler(stage, progress, progress.add_task(label, total=None))
        level, propagate = logger.level, logger.propagate
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME, made absolute in the environment (written only when it changes)."""
    return export_dagster_home(settings)


def dagster_definitions() -> dg.Definitions:
    """The project's Dagster definitions (imported on first use: most commands need none)."""
    from radar_pipeline.definitions import defs

    return defs


def dagster_instance(settings: Settings) -> Any:
    """The Dagster instance in the settings' DAGSTER_HOME (default: the repository's
    data/dagster_home), created or repaired under its bootstrap lock (defs/instance.py)."""
    from radar_pipeline.defs.instance import open_instance

    return open_instance(dagster_home(settings))
