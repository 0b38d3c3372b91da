"""Names for the untyped mappings at the package's edges, so each signature says which edge it
stands at. Inside, values are frozen dataclasses (core/models.py); what leaves the process as
JSON is a contract model (core/contract/). A mapping of these types is built or read only
where data leaves or enters the process and no model describes it (a run config, a cursor)."""

from __future__ import annotations

from typing import Any

# A JSON object: what a command prints with --json, what DuckDB holds as JSON text, a Dagster
# run config or cursor.
JsonObject = dict[str, Any]

# A YAML frontmatter mapping, as PyYAML reads it from a vault file or writes it to one.
Frontmatter = dict[str, Any]
