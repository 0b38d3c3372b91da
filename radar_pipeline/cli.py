"""`radar`: the command line, a thin layer over the same Dagster definitions and instance."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from radar_pipeline import __version__
from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.config import RadarPaths, Settings, export_dagster_home
from radar_pipeline.core.errors import RadarError
from radar_pipeline.core.files import replace

if TYPE_CHECKING:
    import dagster as dg

    from radar_pipeline.core.jsontypes import JsonObject
    from radar_pipeline.core.plan.collection import Mode
    from radar_pipeline.core.reports import CollectionReport

EXIT_OK, EXIT_ERROR, EXIT_SOURCE_FAILED = 0, 1, 2


class UsageError(Exception):
    """Bad input on the command line: one clear line on stderr, exit 1."""


class _Parser(argparse.ArgumentParser):
    """argparse with the contract's usage errors: one line on stderr and exit 1 (2 means "a
    Source failed"), never the usage block or a traceback."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_ERROR, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except (UsageError, RadarError) as exc:
        print(f"radar: {exc}", file=sys.stderr)
        return EXIT_ERROR


_FORMAT = argparse.RawDescriptionHelpFormatter
JSON_HELP = "print one JSON object (the contract's shape) instead of text"
AS_OF_HELP = "ISO-8601 time replacing the clock for every decision (simulation, tests)"


def _command(sub: Any, name: str, summary: str, *examples: str) -> argparse.ArgumentParser:
    """A sub-command whose --help ends with its examples."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=summary, description=summary, epilog=epilog, formatter_class=_FORMAT
    )
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="radar",
        description=__doc__,
        formatter_class=_FORMAT,
        epilog="examples:\n  radar collect --all\n  radar sources import feeds.opml\n"
        "  radar report --json\n\nRADAR_VAULT, RADAR_DB, DAGSTER_HOME and "
        "RADAR_USER_AGENT_CONTACT are read from the environment (README.md).",
    )
    parser.add_argument(
        "--version", action="version", version=f"radar {__version__}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sources = _command(
        sub, "sources", "the Source Registry", "radar sources validate", "radar sources export"
    )
    sources_sub = sources.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = _command(
        sources_sub,
        "validate",
        "validate every Source file (exit 1 on any issue)",
        "radar sources validate --json",
    )
    validate.add_argument("--json", action="store_true", help=JSON_HELP)
    validate.set_defaults(handler=cmd_sources_validate)
    imp = _command(
        sources_sub,
        "import",
        "one pending Source note per feed of an OPML file (never fetched until approved)",
        "radar sources import ~/Downloads/feeds.opml",
        "radar sources import feeds.opml --json",
    )
    imp.add_argument("file", metavar="FILE", help="an OPML file (a feed reader's export)")
    imp.add_argument("--json", action="store_true", help=JSON_HELP)
    imp.set_defaults(handler=cmd_sources_import)
    exp = _command(
        sources_sub,
        "export",
        "OPML 2.0 of every valid Source",
        "radar sources export > radar.opml",
        "radar sources export --output radar.opml",
    )
    exp.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    exp.set_defaults(handler=cmd_sources_export)
    add = _command(
        sources_sub,
        "add",
        "one pending Source note for the feed a site page or feed URL offers (never overwrites)",
        "radar sources add https://blog.example.com/",
        "radar sources add https://example.com/feed.xml --id example-blog --json",
    )
    add.add_argument("url", metavar="URL", help="a feed URL, or a site page that advertises one")
    add.add_argument("--id", metavar="ID", help="the new Source's id (default: from its title)")
    add.add_argument("--json", action="store_true", help=JSON_HELP)
    add.set_defaults(handler=cmd_sources_add)
    trial = _command(
        sources_sub,
        "try",
        "dry run: one fetch and every decision a check would take; writes nothing (no Dagster run)",
        "radar sources try react-blog",
        "radar sources try Radar/Sources/new-blog.md --json",
    )
    trial.add_argument("source", metavar="ID|FILE", help="a registered id, or a Source file")
    trial.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
    trial.add_argument("--json", action="store_true", help=JSON_HELP)
    trial.set_defaults(handler=cmd_sources_try)

    collect = _command(
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

    cleanup = _command(
        sub,
        "cleanup",
        "close the weekly cycle now: empty Temporary Content",
        "radar cleanup",
        "radar cleanup --as-of 2026-12-07T00:00:00Z --json",
    )
    cleanup.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
    cleanup.add_argument("--json", action="store_true", help=JSON_HELP)
    cleanup.set_defaults(handler=cmd_cleanup)

    report = _command(sub, "report", "the evidence snapshot", "radar report", "radar report --json")
    report.add_argument("--json", action="store_true", help=JSON_HELP)
    report.set_defaults(handler=cmd_report)

    idx = _command(sub, "index", "the DuckDB Signal index", "radar index rebuild")
    idx_sub = idx.add_subparsers(dest="action", required=True, metavar="ACTION")
    rebuild = _command(
        idx_sub,
        "rebuild",
        "rebuild the Signal index from the vault's Signal files",
        "radar index rebuild",
        "radar index rebuild --json",
    )
    rebuild.add_argument("--json", action="store_true", help=JSON_HELP)
    rebuild.set_defaults(handler=cmd_index_rebuild)
    _add_dlq_parser(sub)
    _add_history_parser(sub)
    return parser


# ---- helpers -------------------------------------------------------------------------------


def _as_of(value: str | None) -> datetime:
    try:
        return as_of_or_now(value)
    except ValueError as exc:
        raise UsageError(f"--as-of {value!r} is not an ISO-8601 time: {exc}") from exc


def _emit(args: argparse.Namespace, payload: JsonObject, text: str) -> None:
    if args.json:
        print(json.dumps(payload, indent=2, sort_keys=False))
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
def _progress(stage: str, label: str) -> Iterator[None]:
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


def _dagster_home() -> Path:
    """DAGSTER_HOME, made absolute in the environment (written only when it changes)."""
    return export_dagster_home(Settings.from_env())


def dagster_definitions() -> dg.Definitions:
    """The project's Dagster definitions (imported on first use: most commands need none)."""
    from radar_pipeline.definitions import defs

    return defs


def dagster_instance() -> Any:
    """The Dagster instance in DAGSTER_HOME (default: the repository's data/dagster_home),
    created or repaired under its bootstrap lock (defs/instance.py)."""
    from radar_pipeline.defs.instance import open_instance

    return open_instance(_dagster_home())


# ---- commands ------------------------------------------------------------------------------


def cmd_sources_validate(args: argparse.Namespace) -> int:
    from radar_pipeline.core.registry.sources import load_registry

    snapshot = load_registry(RadarPaths.from_env().vault)
    payload = snapshot.to_json()
    lines = [
        f"{s['id']:<28} {'active' if s['active'] else 'inactive':<9} {s['path']}"
        for s in payload["sources"]
    ]
    lines += [f"ISSUE {i['code']}: {i['path']}: {i['message']}" for i in payload["issues"]]
    lines.append(f"{len(payload['sources'])} valid Sources, {len(payload['issues'])} issues")
    _emit(args, payload, "\n".join(lines))
    return EXIT_ERROR if payload["issues"] else EXIT_OK


def cmd_sources_import(args: argparse.Namespace) -> int:
    """OPML in: new pending Source notes (vault set-up, no pipeline work: nothing is fetched)."""
    from radar_pipeline.core.acquire.fetch import FetchSettings
    from radar_pipeline.core.registry.opml import import_opml
    from radar_pipeline.core.registry.sources import load_registry
    from radar_pipeline.core.vault.bases import ensure_bases

    source = Path(args.file)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise UsageError(f"sources import: cannot read {args.file}: {exc.strerror}") from exc
    vault = RadarPaths.from_env().vault
    ensure_bases(vault)
    allowed = FetchSettings.from_env().allowed_private_hosts  # the fetch stage's own allow-list
    snapshot = load_registry(vault)
    result = import_opml(vault, data, snapshot, datetime.now(UTC), source.name, allowed)
    lines = [f"imported {r['id']:<28} {r['path']}  {r['url']}" for r in result.imported]
    lines += [f"skipped  {r['url']}: {r['reason']}" for r in result.skipped]
    lines.append(
        f"{len(result.imported)} Sources imported as legalAssessment: pending (not collected "
        f"until a person approves each one), {len(result.skipped)} skipped"
    )
    _emit(args, result.to_json(), "\n".join(lines))
    return EXIT_OK


def cmd_sources_export(args: argparse.Namespace) -> int:
    from radar_pipeline.core.registry.opml import export_opml
    from radar_pipeline.core.registry.sources import load_registry

    opml = export_opml(load_registry(RadarPaths.from_env().vault), datetime.now(UTC))
    if not args.output:
        sys.stdout.write(opml.decode("utf-8"))
        return EXIT_OK
    target = Path(args.output)
    try:
        replace(target, opml)
    except OSError as exc:
        raise UsageError(f"sources export: cannot write {args.output}: {exc.strerror}") from exc
    return EXIT_OK


def cmd_sources_add(args: argparse.Namespace) -> int:
    """Discovery, then one new pending Source note (vault set-up: nothing is collected)."""
    from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings
    from radar_pipeline.core.registry.new_source import add_source

    vault = RadarPaths.from_env().vault
    with Fetcher(FetchSettings.from_env(), vault) as fetcher:
        result = add_source(vault, args.url, args.id, fetcher, datetime.now(UTC))
    lines = [
        f"found    {c.kind:<9} {c.items:>4} items  {c.url}  {c.title}" for c in result.candidates
    ]
    if result.added:
        lines.append(
            f"added {result.added['id']} ({result.added['kind']}) as {result.added['path']}, "
            "legalAssessment: pending (not collected until a person approves it)"
        )
    if args.json or lines:
        _emit(args, result.to_json(), "\n".join(lines))
    if result.problem:
        print(f"radar: sources add: {result.problem}", file=sys.stderr)
    return EXIT_OK if result.added else EXIT_ERROR


def cmd_sources_try(args: argparse.Namespace) -> int:
    """A dry run of one Source: no pipeline work, so no Dagster run (it writes nothing)."""
    from radar_pipeline.core.acquire.fetch import FetchSettings
    from radar_pipeline.core.collect.dry_run import source_to_try, try_source

    paths = RadarPaths.from_env()
    record = source_to_try(paths.vault, args.source)
    tried = try_source(paths, record, _as_of(args.as_of), FetchSettings.from_env())
    payload = tried.to_json()
    lines = [
        f"{i['decision']:<13} {(i['title'] or '-')[:60]:<60} {i['canonicalUrl'] or '-'}"
        + (f"\n{'':<14}{i['reason']}" if i["reason"] else "")
        for i in payload["items"]
    ]
    lines.append(
        f"{tried.source_id}: {tried.outcome}, http {tried.http_status or '-'}, items "
        f"{tried.items_parsed}"
        + (f": {tried.error}" if tried.error else "")
        + " (dry run: nothing was written)"
    )
    _emit(args, payload, "\n".join(lines))
    if tried.error:
        print(f"radar: sources try: {tried.source_id}: {tried.error}", file=sys.stderr)
    return EXIT_OK if tried.outcome == "passed" else EXIT_ERROR


def cmd_collect(args: argparse.Namespace) -> int:
    as_of = _as_of(args.as_of)
    if args.source and args.all:
        raise UsageError("collect: use either --source or --all, not both")
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.defs.collection.launch import launch_collection

    mode: Mode = "explicit" if args.source else ("all" if args.all else "due")
    paths = RadarPaths.from_env()
    # Open the store first: a broken or unusable DuckDB file is one clear line, not a failed
    # Dagster run with a stack trace.
    Store(paths.db).schema_version()
    from radar_pipeline.core.vault.bases import ensure_bases

    # Vault set-up, before the run: the shipped views, created once (docs/obsidian.md).
    views = ensure_bases(paths.vault)
    defs, instance = dagster_definitions(), dagster_instance()
    with _progress("fetch", "checking Sources"):
        report = launch_collection(
            defs, instance, paths, mode, tuple(args.source), as_of, trigger="cli"
        )
    text = _collect_text(report)
    if views:
        text += "\nnew Obsidian views: " + ", ".join(v.as_posix() for v in views)
    _emit(args, report.to_json(), text)
    return EXIT_SOURCE_FAILED if report.failed else EXIT_OK


def _collect_text(report: CollectionReport) -> str:
    """The plain report: the totals, then a line per Source with every outcome of its items
    (they add up to what its feed held) and what needs a look (a possible gap, late items)."""
    downtime = f", down since {report.downtime_from}" if report.downtime_from else ""
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


def cmd_cleanup(args: argparse.Namespace) -> int:
    """One weekly close through the Dagster definitions: the partition of the week of --as-of."""
    from radar_pipeline.defs.cleanup.launch import launch_cleanup

    as_of = _as_of(args.as_of)
    close = launch_cleanup(dagster_definitions(), dagster_instance(), as_of)
    payload = {k: close[k] for k in ("deleted", "bytes", "retained")}
    if args.json:
        payload |= {k: close[k] for k in ("week", "closedAt", "refused", "dagsterRunId")}
    _emit(
        args,
        payload,
        f"weekly close of {close['week']}: deleted {close['deleted']} files "
        f"({close['bytes']} bytes), retained {close['retained']}",
    )
    for refused in close["refused"]:
        print(f"radar: cleanup kept {refused}", file=sys.stderr)
    return EXIT_ERROR if close["retained"] else EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from radar_pipeline.core.audit.evidence import evidence_snapshot, evidence_text

    payload = evidence_snapshot(RadarPaths.from_env(), datetime.now(UTC))
    _emit(args, payload, evidence_text(payload))
    return EXIT_OK


def cmd_index_rebuild(args: argparse.Namespace) -> int:
    from radar_pipeline.core.store.connection import Store, move_aside_if_not_duckdb
    from radar_pipeline.core.vault import index

    paths = RadarPaths.from_env()
    now = datetime.now(UTC)
    store = Store(paths.db)
    # A file that is not a DuckDB database is kept under another name, never deleted.
    moved = move_aside_if_not_duckdb(paths.db, now)
    with _progress("index", "indexing Signal files"):
        repair = index.rebuild(store, paths.vault)
    rekey = repair.rekey
    payload = {
        "indexed": repair.indexed,
        "unreadable": list(repair.unreadable),
        "movedAside": str(moved) if moved else None,
        "identityVersion": rekey.identity_version if rekey else None,
        "rekeyed": rekey.rekeyed if rekey else 0,
        "aliased": rekey.aliased if rekey else 0,
        "rekeyConflicts": list(rekey.conflicts) if rekey else [],
        "at": format_utc(now),
    }
    text = (
        f"indexed {repair.indexed} Signals; unreadable {len(repair.unreadable)}; "
        f"re-keyed {payload['rekeyed']} to identity version {payload['identityVersion']}"
    )
    text += "".join(f"\n  unreadable: {s}.md" for s in repair.unreadable)
    if moved:
        text = f"{paths.db} was not a DuckDB file; moved aside to {moved}\n{text}"
    _emit(args, payload, text)
    return EXIT_ERROR if repair.unreadable else EXIT_OK


# ---- dead letters --------------------------------------------------------------------------


def _add_dlq_parser(sub: Any) -> None:
    dlq = _command(
        sub,
        "dlq",
        "dead letters: failed checks awaiting a decision",
        "radar dlq list",
        "radar dlq replay 3",
        "radar dlq dismiss 3",
    )
    dlq_sub = dlq.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = _command(
        dlq_sub, "list", "every dead letter with its status", "radar dlq list --json"
    )
    listing.add_argument("--json", action="store_true", help=JSON_HELP)
    listing.set_defaults(handler=cmd_dlq_list)
    for name, handler, text in (
        ("replay", cmd_dlq_replay, "check that Source now and record `replayed`"),
        ("dismiss", cmd_dlq_dismiss, "record `dismissed` (the dead letter is kept)"),
    ):
        action = _command(dlq_sub, name, text, f"radar dlq {name} 3")
        action.add_argument("id", metavar="ID", help="the dead letter's id (radar dlq list)")
        action.add_argument("--as-of", metavar="TS", help=AS_OF_HELP)
        action.add_argument("--json", action="store_true", help=JSON_HELP)
        action.set_defaults(handler=handler)


def _dlq_line(letter: JsonObject) -> str:
    decided = f"  {letter['decision']} {letter['decidedAt']}" if letter["decidedAt"] else ""
    return (
        f"{letter['id']}  {letter['createdAt']}  {letter['status']:<9} {letter['sourceId']:<28} "
        f"{letter['stage']}/{letter['errorClass']}: {letter['message']}{decided}"
    )


def cmd_dlq_list(args: argparse.Namespace) -> int:
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import list_dead_letters

    letters = [d.to_json() for d in list_dead_letters(Store(RadarPaths.from_env().db))]
    opened = sum(1 for d in letters if d["status"] == "open")
    text = "\n".join([*map(_dlq_line, letters), f"{len(letters)} dead letters, {opened} open"])
    _emit(args, {"deadLetters": letters}, text)
    return EXIT_OK


def cmd_dlq_replay(args: argparse.Namespace) -> int:
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import replay
    from radar_pipeline.defs.collection.launch import launch_collection

    paths, now = RadarPaths.from_env(), _as_of(args.as_of)

    def run_check(source_id: str) -> CollectionReport:
        defs, instance = dagster_definitions(), dagster_instance()
        return launch_collection(
            defs, instance, paths, "explicit", (source_id,), now, trigger="dlq-replay"
        )

    done = replay(Store(paths.db), args.id, now, run_check)
    letter = done.dead_letter.to_json()
    new = done.new_dead_letter.to_json() if done.new_dead_letter else None
    payload = {"deadLetter": letter, "source": done.source_report, "newDeadLetter": new}
    _emit(args, payload, _dlq_line(letter))
    if done.source.outcome == "failed":
        print(
            f"radar: dlq: {letter['sourceId']} failed again ({done.source.error})"
            + (f"; new dead letter {new['id']}" if new else ""),
            file=sys.stderr,
        )
        return EXIT_ERROR
    return EXIT_OK


def cmd_dlq_dismiss(args: argparse.Namespace) -> int:
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.core.store.dead_letters import dismiss

    letter = dismiss(Store(RadarPaths.from_env().db), args.id, _as_of(args.as_of)).to_json()
    _emit(args, {"deadLetter": letter}, _dlq_line(letter))
    return EXIT_OK


# ---- run history ---------------------------------------------------------------------------


def _add_history_parser(sub: Any) -> None:
    history = _command(sub, "history", "the Dagster run history", "radar history prune")
    history_sub = history.add_subparsers(dest="action", required=True, metavar="ACTION")
    prune = _command(
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


def cmd_history_prune(args: argparse.Namespace) -> int:
    from radar_pipeline.core.run_history import keep_days_value, retention_days
    from radar_pipeline.core.store.connection import Store
    from radar_pipeline.defs.history.prune import prune_run_history

    as_of = _as_of(args.as_of)
    keep = (
        retention_days()
        if args.keep_days is None
        else keep_days_value(args.keep_days, "--keep-days")
    )
    store = Store(RadarPaths.from_env().db)
    result = prune_run_history(dagster_instance(), store, keep, as_of).to_json()
    _emit(
        args,
        result,
        f"run history before {result['cutoff']} ({keep} days before {result['asOf']}): deleted "
        f"{result['deletedRuns']} runs ({result['bytesFreed']} bytes), kept {result['keptRuns']} "
        f"({result['protectedRuns']} older ones still needed)",
    )
    return EXIT_OK


def run() -> None:
    """The `radar` command."""
    sys.exit(main())


if __name__ == "__main__":
    run()
