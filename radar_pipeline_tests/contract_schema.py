"""The JSON Schema of every `radar ... --json` output, generated from the contract models
(radar_pipeline/core/contract/) and committed under docs/schema/, one file per output; and
of the two notes of a vault, the Signal's frontmatter (`SignalNote`) and the Source's
(`registry.sources.Source`), as what a valid note holds.

    python -m radar_pipeline_tests.contract_schema           # write docs/schema/*.json
    python -m radar_pipeline_tests.contract_schema --check   # exit 1 naming each stale file

test_contract_schema.py fails while a committed file differs from what the models generate,
and validates real command outputs against the same models.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import BaseModel

from radar_pipeline.core.contract.base import ContractModel
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.evidence import EvidenceSnapshot
from radar_pipeline.core.contract.notes import SignalNote
from radar_pipeline.core.contract.operations import (
    CleanupOutput,
    DeadLetterList,
    DismissOutput,
    IndexRebuildOutput,
    PruneSummary,
    ReplayOutput,
    Transfer,
)
from radar_pipeline.core.contract.sources import (
    AddOutput,
    ImportOutput,
    TryOutput,
    ValidateOutput,
)
from radar_pipeline.core.contract.vault import VaultValidation
from radar_pipeline.core.registry.sources import Source

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "docs" / "schema"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Each command's output (the file stem names the command), and the model that prints it.
OUTPUTS: dict[str, type[ContractModel]] = {
    "collect": CollectionReport,
    "report": EvidenceSnapshot,
    "sources-validate": ValidateOutput,
    "sources-import": ImportOutput,
    "sources-add": AddOutput,
    "sources-try": TryOutput,
    "history-prune": PruneSummary,
    "cleanup": CleanupOutput,
    "dlq-list": DeadLetterList,
    "dlq-replay": ReplayOutput,
    "dlq-dismiss": DismissOutput,
    "index-rebuild": IndexRebuildOutput,
    "store-migrate": Transfer,
    "vault-check": VaultValidation,
}

# The frontmatter of each kind of note in a vault (the file stem names it), as read: what a
# note must hold to be valid (`radar vault check`).
NOTES: dict[str, type[BaseModel]] = {
    "signal-note": SignalNote,
    "source-note": Source,
}


def schema_text(command: str) -> str:
    """The schema of `radar <command> --json`'s output, or of a note's frontmatter (NOTES), as
    the committed file holds it."""
    if command in NOTES:
        schema = NOTES[command].model_json_schema(mode="validation")
    else:
        schema = OUTPUTS[command].model_json_schema(mode="serialization")
    document = {"$schema": DIALECT, "$id": f"{command}.schema.json", **schema}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def schema_path(command: str) -> Path:
    return SCHEMA_DIR / f"{command}.schema.json"


def stale_files() -> list[str]:
    """Every committed schema that differs from the models, is missing, or has no command."""
    stale = [
        schema_path(c).name
        for c in (*OUTPUTS, *NOTES)
        if not schema_path(c).is_file() or schema_path(c).read_text("utf-8") != schema_text(c)
    ]
    known = {schema_path(c).name for c in (*OUTPUTS, *NOTES)}
    stale += sorted(p.name for p in SCHEMA_DIR.glob("*.json") if p.name not in known)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for name in stale:
            print(f"stale: docs/schema/{name}", file=sys.stderr)
        return 1 if stale else 0
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for command in (*OUTPUTS, *NOTES):
        schema_path(command).write_text(schema_text(command), "utf-8")
    print(f"wrote {len(OUTPUTS) + len(NOTES)} schemas to {SCHEMA_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
