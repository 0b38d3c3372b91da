"""The Source Registry as what it is: an external asset, written by people, observed here.

`Radar/Sources/*.md` are written by people; no run of this project produces them, so the
registry is not materialized. It is an external asset (`dg.AssetSpec`) that the registry
sensor observes (a runless observation) on each tick in which what the registry decides
changed: which files are valid Sources, which are active, every issue. The observation's data
version is the digest of that decision, not of the files' bytes, so the health keys the
pipeline writes into a Source file make no new version. `signals` depends on it: its
partitions are the registry's valid Sources. (Not `@observable_source_asset`: beta in
Dagster 1.13, it warns at every load, and its observation needs a run.)
"""

import hashlib
import json

import dagster as dg

from radar_pipeline.core.registry.sources import RegistrySnapshot

source_registry = dg.AssetSpec(
    "source_registry",
    group_name="registry",
    description=(
        "The validated Source Registry (`Radar/Sources/*.md`): which Source files are active "
        "Sources, and every issue (an invalid file or a duplicate id never becomes an active "
        "Source). Written by people, observed by `source_registry_sensor` whenever what it "
        "decides changes (`radar sources validate` shows the same); the `sources` partitions "
        "of `signals` follow it."
    ),
)
SOURCE_REGISTRY_KEY = source_registry.key


def registry_version(snapshot: RegistrySnapshot) -> str:
    """The digest of what the registry decides (`radar sources validate --json`)."""
    text = json.dumps(snapshot.validation().json_object(), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def registry_metadata(snapshot: RegistrySnapshot) -> dict[str, dg.MetadataValue | int]:
    """What an observation of the registry shows: counts and the table of issues."""
    rows = (
        "\n".join(f"| `{i.path}` | {i.code} | {i.message} |" for i in snapshot.issues)
        or "| – | – | no issues |"
    )
    return {
        "sources": len(snapshot.sources),
        "active": sum(1 for r in snapshot.sources if r.source.is_eligible),
        "issues": len(snapshot.issues),
        "issue_table": dg.MetadataValue.md(f"| file | code | message |\n|---|---|---|\n{rows}"),
    }
