"""`radar vault check`: every note of the vault against its model (read only: nothing is
written, no Dagster run; a person fixes the notes it lists)."""

from __future__ import annotations

import argparse
from typing import Any

from radar_pipeline.cli.shell import EXIT_ERROR, EXIT_OK, JSON_HELP, command, emit
from radar_pipeline.core.config import Settings


def add_parsers(sub: Any) -> None:
    """`radar vault check`."""
    vault = command(sub, "vault", "the notes of the vault", "radar vault check")
    vault_sub = vault.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = command(
        vault_sub,
        "check",
        "validate every Source and Signal note against its schema (exit 1 on any invalid note)",
        "radar vault check",
        "radar vault check --json",
    )
    check.add_argument("--json", action="store_true", help=JSON_HELP)
    check.set_defaults(handler=cmd_vault_check)


def cmd_vault_check(args: argparse.Namespace, settings: Settings) -> int:
    """Each key of each note a person edited into a shape its model refuses, with the reason."""
    from radar_pipeline.core.vault.check import check_vault

    result = check_vault(settings.vault)
    lines = [f"INVALID {n.path}: `{n.key}` {n.reason}" for n in result.invalid]
    notes = len({n.path for n in result.invalid})
    lines.append(
        f"{result.sources} Source notes, {result.signals} Signal notes, {notes} invalid"
        " (docs/schema/source-note.schema.json, signal-note.schema.json)"
    )
    emit(args, result, "\n".join(lines))
    return EXIT_ERROR if result.invalid else EXIT_OK
