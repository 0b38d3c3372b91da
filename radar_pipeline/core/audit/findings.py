"""What every audit returns: its findings, its figures and a Markdown table naming each finding.

An audit passes when it has no finding. Its severity is that of its worst finding: ERROR for
a broken promise, WARN for a soft one that the next run or a person resolves. The Dagster asset
checks and `radar report` show the same `AuditResult`, so the UI and the command line agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from radar_pipeline.core.jsontypes import JsonObject

Severity = Literal["ERROR", "WARN"]

MAX_TABLE_ROWS = 200


@dataclass(frozen=True)
class Finding:
    """One row of an audit table: the severity it carries and its cells."""

    severity: Severity
    cells: tuple[str, ...]


@dataclass(frozen=True)
class AuditResult:
    """One audit's verdict: findings (empty means passed), figures and a readable table."""

    name: str
    claim: str
    columns: tuple[str, ...]
    findings: tuple[Finding, ...]
    figures: Mapping[str, int] = field(default_factory=dict)
    # How the Signals folder was read for this verdict (vault.facts.FolderScan.metadata):
    # shown in the check's metadata, so a narrowed read is never silent.
    scan: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def severity(self) -> Severity:
        """ERROR if any finding breaks a promise, else WARN (also when passed)."""
        return "ERROR" if any(f.severity == "ERROR" for f in self.findings) else "WARN"

    def markdown(self) -> str:
        """A heading line with the verdict and figures, then one table row per finding."""
        verdict = "passed" if self.passed else f"FAILED ({self.severity})"
        figures = " · ".join(f"{k} {v}" for k, v in self.figures.items())
        head = f"**{self.name}**: {self.claim}: {verdict}" + (f" · {figures}" if figures else "")
        columns = ("severity", *self.columns)
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for finding in self.findings[:MAX_TABLE_ROWS]:
            cells = (finding.severity, *finding.cells)
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        if not self.findings:
            lines.append("| – | " + " | ".join(["–"] * (len(columns) - 2) + ["no findings"]) + " |")
        elif len(self.findings) > MAX_TABLE_ROWS:
            lines.append(f"\n… and {len(self.findings) - MAX_TABLE_ROWS} more findings")
        return head + "\n\n" + "\n".join(lines)

    def to_json(self) -> JsonObject:
        return {
            "passed": self.passed,
            "severity": None if self.passed else self.severity,
            "findings": len(self.findings),
            **dict(self.figures),
        }


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ") or "–"
