"""The Source Registry as an asset: the validated snapshot of `Radar/Sources/*.md`."""

import dagster as dg

from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.defs.resources import RadarResource


@dg.asset(group_name="registry")
def source_registry(radar: RadarResource) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The validated Source Registry: which Source files are active Sources, and every issue
    (an invalid file or a duplicate id never becomes an active Source)."""
    snapshot = load_registry(radar.paths().vault)
    rows = (
        "\n".join(f"| `{i.path}` | {i.code} | {i.message} |" for i in snapshot.issues)
        or "| – | – | no issues |"
    )
    return dg.MaterializeResult(
        metadata={
            "sources": len(snapshot.sources),
            "active": sum(1 for r in snapshot.sources if r.source.is_eligible),
            "issues": len(snapshot.issues),
            "issue_table": dg.MetadataValue.md(f"| file | code | message |\n|---|---|---|\n{rows}"),
        }
    )
