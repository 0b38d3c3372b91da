"""`radar collect`, `cleanup`, `report` and `index rebuild`: the pipeline's work, each through
the Dagster definitions and instance (the report and the index read the vault and DuckDB)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from radar_pipeline.cli.shell import (
    AS_OF_HELP,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_SOURCE_FAILED,
    JSON_HELP,
    UsageError,
    as_of_arg,
    command,
    dagster_definitions,
    dagster_instance,
    emit,
    progress,
)
from radar_pipeline.core.config import Settings

if TYPE_CHECKING:
    from radar_pipeline.core.contract.collection import CollectionReport
    from radar_pipeline.core.plan.collection import Mode


def add_parsers(sub: Any) -> None:
    """`radar collect`, `radar cleanup`, `radar report`, `radar index rebuild`."""
    collect = command(
        sub,
        "collect",
        "one collection: the due Sources (default), all eligible ones, or the named ones",
        "radar collect",
        "radar collect --all --json",
        "radar collect --source openai-news --source react-blog",
    )
    collect.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="ID",
        help="check exactly this Source now (repeatable; gates and minIntervalSeconds apply)",
    )
    collect.add_argument(
        "--all", action="store_true", help="every eligible Source now, manual ones included"
    )
    collect.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
    collect.add_argument("--json", action="store_true", help=JSON_HELP)
    collect.set_defaults(handler=cmd_collect)

    cleanup = command(
        sub,
        "cleanup",
        "close the weekly cycle now: empty Temporary Content",
        "radar cleanup",
        "radar cleanup --as-of 2026-12-07T00:00:00Z --json",
    )
    cleanup.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
    cleanup.add_argument("--json", action="store_true", help=JSON_HELP)
    cleanup.set_defaults(handler=cmd_cleanup)

    report = command(sub, "report", "the evidence snapshot", "radar report", "radar report --json")
    report.add_argument("--json", action="store_true", help=JSON_HELP)
    report.set_defaults(handler=cmd_report)

    idx = command(sub, "index", "the DuckDB Signal index", "radar index rebuild")
    idx_sub = idx.add_subparsers(dest="action", required=True, metavar="ACTION")
    rebuild = command(
        idx_sub,
        "rebuild",
        "rebuild the Signal index from the vault's Signal files",
        "radar index rebuild",
        "radar index rebuild --json",
    )
    rebuild.add_argument("--json", action="store_true", help=JSON_HELP)
    rebuild.set_defaults(handler=cmd_index_rebuild)


def cmd_collect(args: argparse.Namespace, settings: Settings) -> int:
    as_of = as_of_arg(args)
    if args.source and args.all:
        raise UsageError("collect: use either --source or --all, not both")
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.defs.collection.launch import launch_collection

    mode: Mode = "explicit" if args.source else ("all" if args.all else "due")
    paths = settings.paths
    # Open the store first: a broken or unusable DuckDB file is one clear line, not a failed
    # Dagster run with a stack trace.
    Store.of(paths).schema_version()
    from radar_pipeline.core.vault.bases import ensure_bases

    # Vault set-up, before the run: the shipped views, created once (docs/obsidian.md).
    views = ensure_bases(paths.vault)
    defs, instance = dagster_definitions(), dagster_instance(settings)
    with progress("fetch", "checking Sources"):
        report = launch_collection(
            defs, instance, settings, mode, tuple(args.source), as_of, trigger="cli"
        )
    text = _collect_text(report)
    if views:
        text += "\nnew Obsidian views: " + ", ".join(v.as_posix() for v in views)
    emit(args, report, text)
    return EXIT_SOURCE_FAILED if report.failed else EXIT_OK


def _collect_text(report: CollectionReport) -> str:
    """The plain report: the totals, then a line per Source with every outcome of its items
    (they add up to what its feed held) and what needs a look (a possible gap, late items)."""
    downtime = f", down since {report.downtime_from}" if report.downtime_from else ""
    if report.clock_behind:
        downtime += (
            f"; the clock is behind the last recorded attempt ({report.clock_behind}):"
            " no health time moved back"
        )
    t = report.totals
    lines = [
        f"collection as of {report.as_of}{downtime}: due {report.due}, overdue "
        f"{report.overdue}, passed {t.passed}, failed {t.failed}, skipped {t.skipped}",
        f"items: created {t.created} (late {t.late}), reused {t.reused}, updated {t.updated},"
        f" duplicates {t.duplicates}, rejected {t.rejected}, deferred {t.deferred}, outside "
        f"window {t.outside_window}, filtered {t.filtered}",
    ]
    for src in report.sources:
        flags = [f"late {src.late}"] if src.late else []
        if src.possible_gap:
            flags.append("possible gap: no item shared with the previous check")
        if src.error:
            flags.append(src.error)
        extra = f"  ({'; '.join(flags)})" if flags else ""
        lines.append(
            f"  {src.id:<28} {src.outcome:<13} http {src.http_status or '-':<4} "
            f"items {src.items_parsed}: created {src.created} reused {src.reused} "
            f"updated {src.updated} duplicates {src.duplicates} rejected "
            f"{src.rejected} deferred {src.deferred} outside {src.outside_window} "
            f"filtered {src.filtered}{extra}"
        )
    return "\n".join(lines)


def cmd_cleanup(args: argparse.Namespace, settings: Settings) -> int:
    """One weekly close through the Dagster definitions: the partition of the week of --as-of."""
    from radar_pipeline.defs.cleanup.launch import launch_cleanup

    as_of = as_of_arg(args)
    close = launch_cleanup(
        dagster_definitions(), dagster_instance(settings), as_of, now=args.clock, settings=settings
    )
    emit(
        args,
        close,
        f"weekly close of {close.week}: deleted {close.deleted} files "
        f"({close.bytes} bytes), retained {close.retained}",
    )
    for refused in close.refused:
        print(f"radar: cleanup kept {refused}", file=sys.stderr)
    return EXIT_ERROR if close.retained else EXIT_OK


def cmd_report(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.audit.evidence import evidence_snapshot, evidence_text

    payload = evidence_snapshot(settings.paths, args.clock)
    emit(args, payload, evidence_text(payload))
    return EXIT_OK


def cmd_index_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.contract.operations import IndexRebuildOutput
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.heal import NOT_RESTORED, move_aside_if_unreadable
    from radar_pipeline.core.vault import index

    paths = settings.paths
    now = args.clock
    store = Store.of(paths)
    # A file DuckDB cannot open or read to its end is kept under another name, never deleted.
    # (the team profile's PostgreSQL store has no such file)
    moved = None if paths.store_url else move_aside_if_unreadable(paths.db, now)
    with progress("index", "indexing Signal files"):
        repair = index.rebuild(store, paths.vault, now)
    rekey = repair.rekey
    payload = IndexRebuildOutput(
        indexed=repair.indexed,
        unreadable=tuple(repair.unreadable),
        moved_aside=str(moved.path) if moved else None,
        moved_aside_reason=moved.reason if moved else None,
        not_restored=tuple(NOT_RESTORED) if moved else (),
        identity_version=rekey.identity_version if rekey else None,
        rekeyed=rekey.rekeyed if rekey else 0,
        aliased=rekey.aliased if rekey else 0,
        rekey_conflicts=tuple(rekey.conflicts) if rekey else (),
        at=now,
    )
    text = (
        f"indexed {repair.indexed} Signals; unreadable {len(repair.unreadable)}; "
        f"re-keyed {payload.rekeyed} to identity version {payload.identity_version}"
    )
    text += "".join(f"\n  unreadable: {s}.md" for s in repair.unreadable)
    if moved:
        lost = "".join(f"\n  - {what}" for what in NOT_RESTORED)
        text = (
            f"{paths.db} could not be read ({moved.reason}); moved aside to {moved.path}\n"
            f"the new store holds the Signal index from the vault; not restored:{lost}\n{text}"
        )
    emit(args, payload, text)
    return EXIT_ERROR if repair.unreadable else EXIT_OK
