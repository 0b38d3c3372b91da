"""Names for the untyped mappings at the package's edges, so each signature says which edge it
stands at. Inside, values are frozen dataclasses (core/models.py, core/reports.py); a mapping
of these types is built or read only where data leaves or enters the process."""

from __future__ import annotations

from typing import Any

# A JSON object: what a command prints with --json, what DuckDB holds as JSON text, a Dagster
# run config or cursor.
JsonObject = dict[str, Any]

# A YAML frontmatter mapping, as PyYAML reads it from a vault file or writes it to one.
Frontmatter = dict[str, Any]
