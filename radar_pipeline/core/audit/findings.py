"""What every audit returns: its findings, its figures and a Markdown table naming each finding.

An audit passes when it has no finding. Its severity is that of its worst finding: ERROR for
a broken promise, WARN for a soft one that the next run or a person resolves. The Dagster asset
checks and `radar report` show the same `AuditResult`, so the UI and the command line agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from radar_pipeline.core.contract.evidence import AuditVerdict, Severity

MAX_TABLE_ROWS = 200
HEADLINE_NAMES = 5  # findings named in a headline; the table names them all
# What each audit's findings are, singular and plural, for its headline (the first cell of
# each finding names it).
FINDING_NOUNS = {
    "idempotency": ("identity not held once", "identities not held once"),
    "provenance": ("Signal without its full provenance", "Signals without their full provenance"),
    "registry": ("registry issue", "registry issues"),
    "overdue": ("Source overdue", "Sources overdue"),
    "retention": ("file of full text retained", "files of full text retained"),
    "agreement": ("Signal not in both vault and index", "Signals not in both vault and index"),
    "accounting": ("check whose items do not add up", "checks whose items do not add up"),
    "gaps": ("Source with a possible gap", "Sources with a possible gap"),
    "silence": ("silent Source", "silent Sources"),
    "on_cadence": ("Source late on its cadence", "Sources late on their cadence"),
}


@dataclass(frozen=True)
class Finding:
    """One row of an audit table: the severity it carries and its cells."""

    severity: Severity
    cells: tuple[str, ...]

    @property
    def subject(self) -> str:
        """What the finding is about: its first cell names it (a Source, a Signal, a file)."""
        return next(iter(self.cells), "")


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
    # The severity the audit's check is declared with (core/audit/run.py, DECLARED_SEVERITY):
    # what a passing verdict carries.
    declared: Severity = "WARN"

    @property
    def passed(self) -> bool:
        return not self.findings

    @property
    def severity(self) -> Severity:
        """Passed: the declared severity. Failed: ERROR if any finding breaks a promise, else
        WARN."""
        if self.passed:
            return self.declared
        return "ERROR" if any(f.severity == "ERROR" for f in self.findings) else "WARN"

    @property
    def headline(self) -> str:
        """What the audit found, in one line: the claim when it holds, else how many of what
        and the first of them ("5 Sources overdue: a, b, c, …"). The severity stands apart."""
        if self.passed:
            return self.claim[0].upper() + self.claim[1:]
        count = len(self.findings)
        singular, plural = FINDING_NOUNS.get(self.name, ("finding", "findings"))
        named = [f.subject for f in self.findings[:HEADLINE_NAMES] if f.cells]
        more = ", …" if count > len(named) else ""
        return f"{count} {singular if count == 1 else plural}: {', '.join(named)}{more}"

    def markdown(self) -> str:
        """A heading line with the finding and figures, then one table row per finding."""
        figures = " · ".join(f"{k} {v}" for k, v in self.figures.items())
        head = f"**{self.name}**: {self.headline}" + (f" · {figures}" if figures else "")
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

    def rows(self) -> list[dict[str, str]]:
        """Each finding's cells by column name."""
        return [dict(zip(self.columns, f.cells, strict=True)) for f in self.findings]

    def verdict(self) -> AuditVerdict:
        """The verdict as `radar report` prints it, the audit's figures after it."""
        return AuditVerdict.model_validate(
            {
                "passed": self.passed,
                "severity": None if self.passed else self.severity,
                "findings": len(self.findings),
                **dict(self.figures),
            }
        )


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ") or "–"
