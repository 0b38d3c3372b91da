"""`radar sources ...`: the Source Registry from the command line (vault set-up: no command
here collects; `try` is the one dry run, with no Dagster run and nothing written)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from radar_pipeline.cli.shell import (
    AS_OF_HELP,
    EXIT_ERROR,
    EXIT_OK,
    JSON_HELP,
    UsageError,
    as_of_arg,
    command,
    emit,
)
from radar_pipeline.core.config import Settings
from radar_pipeline.core.files import replace


def add_parsers(sub: Any) -> None:
    """`radar sources validate | import | export | add | try`."""
    sources = command(
        sub, "sources", "the Source Registry", "radar sources validate", "radar sources export"
    )
    sources_sub = sources.add_subparsers(dest="action", required=True, metavar="ACTION")
    validate = command(
        sources_sub,
        "validate",
        "validate every Source file (exit 1 on any issue)",
        "radar sources validate --json",
    )
    validate.add_argument("--json", action="store_true", help=JSON_HELP)
    validate.set_defaults(handler=cmd_sources_validate)
    imp = command(
        sources_sub,
        "import",
        "one pending Source note per feed of an OPML file (never fetched until approved)",
        "radar sources import ~/Downloads/feeds.opml",
        "radar sources import feeds.opml --json",
    )
    imp.add_argument("file", metavar="FILE", help="an OPML file (a feed reader's export)")
    imp.add_argument("--json", action="store_true", help=JSON_HELP)
    imp.set_defaults(handler=cmd_sources_import)
    exp = command(
        sources_sub,
        "export",
        "OPML 2.0 of every valid Source",
        "radar sources export > radar.opml",
        "radar sources export --output radar.opml",
    )
    exp.add_argument("--output", metavar="FILE", help="write to FILE instead of stdout")
    exp.set_defaults(handler=cmd_sources_export)
    add = command(
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
    trial = command(
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


def cmd_sources_validate(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.registry.sources import load_registry

    validation = load_registry(settings.vault).validation()
    lines = [
        f"{s.id:<28} {'active' if s.active else 'inactive':<9} {s.path}" for s in validation.sources
    ]
    lines += [f"ISSUE {i.code}: {i.path}: {i.message}" for i in validation.issues]
    lines.append(f"{len(validation.sources)} valid Sources, {len(validation.issues)} issues")
    emit(args, validation, "\n".join(lines))
    return EXIT_ERROR if validation.issues else EXIT_OK


def cmd_sources_import(args: argparse.Namespace, settings: Settings) -> int:
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
    vault = settings.vault
    ensure_bases(vault)
    allowed = FetchSettings.of(settings).allowed_private_hosts  # the fetch stage's own allow-list
    snapshot = load_registry(vault)
    result = import_opml(vault, data, snapshot, args.clock, source.name, allowed)
    lines = [f"imported {r.id:<28} {r.path}  {r.url}" for r in result.imported]
    lines += [f"skipped  {r.url}: {r.reason}" for r in result.skipped]
    lines.append(
        f"{len(result.imported)} Sources imported as legalAssessment: pending (not collected "
        f"until a person approves each one), {len(result.skipped)} skipped"
    )
    emit(args, result, "\n".join(lines))
    return EXIT_OK


def cmd_sources_export(args: argparse.Namespace, settings: Settings) -> int:
    from radar_pipeline.core.registry.opml import export_opml
    from radar_pipeline.core.registry.sources import load_registry

    opml = export_opml(load_registry(settings.vault), args.clock)
    if not args.output:
        sys.stdout.write(opml.decode("utf-8"))
        return EXIT_OK
    target = Path(args.output)
    try:
        replace(target, opml)
    except OSError as exc:
        raise UsageError(f"sources export: cannot write {args.output}: {exc.strerror}") from exc
    return EXIT_OK


def cmd_sources_add(args: argparse.Namespace, settings: Settings) -> int:
    """Discovery, then one new pending Source note (vault set-up: nothing is collected)."""
    from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings
    from radar_pipeline.core.registry.new_source import add_source

    vault = settings.vault
    with Fetcher(FetchSettings.of(settings), vault) as fetcher:
        result = add_source(vault, args.url, args.id, fetcher, args.clock)
    lines = [
        f"found    {c.kind:<9} {c.items:>4} items  {c.url}  {c.title}" for c in result.candidates
    ]
    if result.added:
        lines.append(
            f"added {result.added.id} ({result.added.kind}) as {result.added.path}, "
            "legalAssessment: pending (not collected until a person approves it)"
        )
    if args.json or lines:
        emit(args, result, "\n".join(lines))
    if result.problem:
        print(f"radar: sources add: {result.problem}", file=sys.stderr)
    return EXIT_OK if result.added else EXIT_ERROR


def cmd_sources_try(args: argparse.Namespace, settings: Settings) -> int:
    """A dry run of one Source: no pipeline work, so no Dagster run (it writes nothing)."""
    from radar_pipeline.core.collect.dry_run import source_to_try, try_source

    record = source_to_try(settings.vault, args.source)
    tried = try_source(settings, record, as_of_arg(args))
    lines = [
        f"{i.decision:<13} {(i.title or '-')[:60]:<60} {i.canonical_url or '-'}"
        + (f"\n{'':<14}{i.reason}" if i.reason else "")
        for i in tried.items
    ]
    lines.append(
        f"{tried.id}: {tried.outcome}, http {tried.http_status or '-'}, items "
        f"{tried.items_parsed}"
        + (f": {tried.error}" if tried.error else "")
        + " (dry run: nothing was written)"
    )
    emit(args, tried, "\n".join(lines))
    if tried.error:
        print(f"radar: sources try: {tried.id}: {tried.error}", file=sys.stderr)
    return EXIT_OK if tried.outcome == "passed" else EXIT_ERROR
