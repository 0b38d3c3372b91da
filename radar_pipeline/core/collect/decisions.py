"""The dedupe decisions of a collection's checks: the read-only half of the dedupe stage.

`Collector.dedupe` first repairs the index from the vault (a write), then calls
`decide_checks`; `radar sources try` calls the same function on a read-only connection (or an
empty in-memory schema when there is no DuckDB file yet), so a dry run decides exactly as a
check would (docs/operations.md, "Trying a Source").
"""

from __future__ import annotations

from pathlib import Path

from radar_pipeline.core.collect.results import CheckResult, DedupedCheck
from radar_pipeline.core.identity.dedupe import DedupeBatch, decide_many
from radar_pipeline.core.identity.keys import identity_of
from radar_pipeline.core.plan.schedule import ITEM_CAP
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.vault.folder_state import folder_of, list_names
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE


def decide_checks(
    con: Connection, results: tuple[CheckResult, ...], on_disk: dict[str, str]
) -> tuple[DedupedCheck, ...]:
    """Every candidate of every check classified against the index (read only) and the
    Signal files `on_disk` (identity -> Signal id), at most ITEM_CAP unknown ones per check."""
    batch = DedupeBatch()  # new items of earlier Sources in this collection count too
    checks = [(res.plan.source_id, res.parsed.candidates if res.parsed else ()) for res in results]
    covered = [res.plan.coverage_from for res in results]
    decisions = decide_many(con, checks, batch, ITEM_CAP, covered, on_disk)
    return tuple(DedupedCheck(res, d) for res, d in zip(results, decisions, strict=True))


def signal_ids_on_disk(vault: Path) -> set[str]:
    """The Signal ids the Signals folder holds, from one listing of names (no file is read)."""
    listing = list_names(folder_of(vault))
    ids = {n[:-3] for n in listing.names} if listing else set()
    return {i for i in ids if SIGNAL_ID_RE.fullmatch(i)}


def by_identity(signal_ids: set[str]) -> dict[str, str]:
    """identity -> Signal id: a Signal file's name carries its identity."""
    return {identity_of(sid): sid for sid in signal_ids}
