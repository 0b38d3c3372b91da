"""The `evidence_snapshot` asset: what the Radar can show about itself, as `radar report`."""

import dagster as dg

from radar_pipeline.defs.cleanup.assets import weekly_cleanup
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.registry.assets import source_registry
from radar_pipeline.defs.resources import ClockResource, RadarResource


@dg.asset(deps=[source_registry, SIGNALS_KEY, weekly_cleanup], group_name="evidence")
def evidence_snapshot(radar: RadarResource, clock: ClockResource) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The evidence snapshot: inventory (files) and production scope (what is collected) kept
    apart, the last collection's recovery and what stayed overdue after it, retained temporary
    text and the last weekly close, and every audit's verdict. The same object as
    `radar report --json`, so the UI plots its figures over time. Materialized after each
    run that evaluated checks (`evidence_after_checks`)."""
    # Imported here: the snapshot reads the collection reports, whose module pulls in the
    # fetcher (httpx); loading the definitions should not.
    from radar_pipeline.core.audit.evidence import evidence_snapshot as build_snapshot
    from radar_pipeline.core.audit.evidence import evidence_text

    report = build_snapshot(radar.paths(), clock.now())
    return dg.MaterializeResult(
        metadata={
            "production_sources": report.production_sources,
            "fixture_sources": report.fixture_sources,
            "signals": report.signals,
            "overdue": report.overdue,
            "retained_temporary": report.retained_temporary,
            "open_dead_letters": report.open_dead_letters,
            "registry_issues": report.registry_issues,
            "failed_checks": sum(1 for c in report.checks.values() if not c.passed),
            "summary": dg.MetadataValue.md("```\n" + evidence_text(report) + "\n```"),
            "report": dg.MetadataValue.json(report.json_object()),
        }
    )
