"""The DuckDB Signal index as a derived copy of the vault (the vault is the truth for Signals)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.identity import keys as identity
from radar_pipeline.core.identity.keys import distinguishing_fragment, identity_of, normalize_title
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.store import facts as stored_facts
from radar_pipeline.core.store import signals as stored_signals
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.signals import insert_signal_rows as insert_signal_rows
from radar_pipeline.core.store.signals import insert_signals
from radar_pipeline.core.vault.facts import (
    FactsKey,
    SignalFile,
    facts_key,
    facts_of_written,
    record_facts,
)
from radar_pipeline.core.vault.folder_state import forget_state
from radar_pipeline.core.vault.signals import (
    SIGNAL_ID_RE,
    link_target,
    list_signal_ids,
    parse_signal_frontmatter,
)

log = logging.getLogger(__name__)
# Every PROGRESS_EVERY files read, an INFO record with `radar_progress = ("index", done,
# total)`: the CLI's progress bar on a terminal; silent otherwise.
progress_log = logging.getLogger("radar_pipeline.progress")
PROGRESS_EVERY = 200


@dataclass(frozen=True)
class Rekey:
    """What one re-key did (see `rekey`)."""

    identity_version: int  # the current rules' version
    rekeyed: int  # Signals of another identity version given their current identity
    aliased: int  # of those, how many have an identity that differs (a new alias to match)
    conflicts: tuple[str, ...] = ()  # Signals whose current identity another Signal holds


@dataclass(frozen=True)
class IndexRepair:
    indexed: int  # files that had no index row and got one
    unreadable: tuple[str, ...]  # Signal files that could not be parsed (left untouched)
    rekey: Rekey | None = None


def index_row_from_frontmatter(signal_id: str, fm: dict[str, Any]) -> tuple[Any, ...]:
    """The index row for one Signal file, derived only from what the file says."""
    if fm.get("id") != signal_id:
        raise VaultError(f"Signal {signal_id}.md declares id {fm.get('id')!r}; they must match")
    observed = fm.get("observedAt")
    observed_day = parse_utc(str(observed)).date() if observed else None
    return (
        signal_id,
        identity_of(signal_id),
        _identity_version(fm.get("identityVersion")),
        str(fm["sourceId"]),
        str(fm["sourceItemId"]),
        str(fm["canonicalUrl"]),
        normalize_title(str(fm.get("title") or "")),
        observed_day,
        str(fm["contentHash"]),
        int(str(fm.get("simhash") or "0"), 16),
        parse_utc(str(fm["fetchedAt"])),
        link_target(fm.get("duplicateCandidateOf")),
        (SIGNALS_DIR / f"{signal_id}.md").as_posix(),
        distinguishing_fragment(str(fm.get("itemUrl") or ""), str(fm["sourceItemId"])),
    )


def _identity_version(value: Any) -> int:
    # Signals written before the key existed were made under the first rules (version 1).
    return 1 if value is None or value == "" else int(value)


def reconcile(
    con: Connection, vault: Path, on_disk: set[str] | None = None, now: datetime | None = None
) -> IndexRepair:
    """Index every Signal file that has no row (a crash between file and record leaves one).

    `on_disk`: the Signal ids of the folder's files, from a listing the caller already made
    (None: list the folder here). `now`: the run's clock, the time a re-key records (`rekey`)."""
    on_disk = list_signal_ids(vault) if on_disk is None else on_disk
    if not on_disk:
        return IndexRepair(0, ())
    indexed = stored_signals.indexed_signal_ids(con)
    return _index_files(con, vault, sorted(on_disk - indexed), now)


def reconcile_known(con: Connection, vault: Path, now: datetime | None = None) -> IndexRepair:
    """`reconcile` for a folder that is as its recorded state says: its files are the names
    the stored facts hold, so the unindexed ones come from one query, not a listing."""
    stems = stored_facts.unindexed_stems(con)
    return _index_files(con, vault, sorted(s for s in stems if SIGNAL_ID_RE.fullmatch(s)), now)


def files_of_identities(con: Connection, identities: list[str]) -> dict[str, str]:
    """identity -> Signal id of the folder's files (as the stored facts name them, readable or
    not) whose name carries one of `identities`."""
    stems = stored_facts.stems_of_identities(con, identities, SIGNAL_ID_RE.pattern[1:-1])
    return {identity_of(stem): stem for stem in stems}


def _index_files(
    con: Connection, vault: Path, missing: list[str], now: datetime | None
) -> IndexRepair:
    """Read and index the Signal files `missing` names (unreadable ones are skipped, named)."""
    if not missing:
        return IndexRepair(0, (), rekey(con, now))
    rows, unreadable = [], []
    facts: list[tuple[str, FactsKey, SignalFile]] = []
    for done, signal_id in enumerate(missing, 1):
        if done % PROGRESS_EVERY == 0 or done == len(missing):
            progress_log.info(
                "indexed %d of %d",
                done,
                len(missing),
                extra={"radar_progress": ("index", done, len(missing))},
            )
        path = vault / SIGNALS_DIR / f"{signal_id}.md"
        try:
            try:
                info = path.stat()
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise VaultError(f"cannot read Signal {path.name}: {exc}") from exc
            fm = parse_signal_frontmatter(text, path)
            rows.append(index_row_from_frontmatter(signal_id, fm))
        except (VaultError, KeyError, ValueError) as exc:
            log.warning("index: skipping unreadable Signal %s: %s", signal_id, exc)
            unreadable.append(signal_id)
            continue
        # The evidence audits' facts of this file, from this one read (facts.py).
        key = facts_key(info)
        facts.append((path.name, key, facts_of_written(path.name, fm, text)))
    insert_signals(con, rows)
    record_facts(con, facts)
    return IndexRepair(len(rows), tuple(unreadable), rekey(con, now))


def rebuild(store: Store, vault: Path, now: datetime) -> IndexRepair:
    """Drop the Signal index and derive it again from the vault files, re-keying every Signal
    indexed under another identity version (its aliases are derived data too), at `now` (the
    command's clock)."""

    def derive(con: Connection) -> IndexRepair:
        # The audits' per-file facts too: reconcile records them again from the same reads;
        # they no longer name every file, so the folder's recorded state goes with them.
        stored_signals.clear_derived(con)
        forget_state(con)
        return reconcile(con, vault, now=now)

    return store.atomically(derive)


def rekey(con: Connection, now: datetime | None = None) -> Rekey:
    """Give every Signal indexed under another identity version its current identity.

    The identity is recomputed from what the Signal file recorded (sourceId, canonicalUrl
    re-canonicalised under the current rules, sourceItemId) and stored as an alias that the
    dedupe identity lookup also matches: an item seen again after the rules changed is
    `reused`, never a second Signal. The Signal keeps its id and file. Runs in every dedupe
    stage (cheap when nothing is stale) and in `radar index rebuild`.
    """
    version = identity.IDENTITY_VERSION
    stale = stored_signals.stale_signals(con, version)
    if not stale:
        return Rekey(version, 0, 0)
    taken = stored_signals.taken_identities(con)
    aliases: list[tuple[str, str, str, str]] = []
    conflicts: list[str] = []
    changed = 0
    for signal_id, old_identity, source_id, url, item_id in stale:
        canonical = _recanonicalize(str(url))
        current = identity.identity_hash(str(source_id), canonical, str(item_id))
        owner = taken.get(current)
        if owner is not None and owner != signal_id:
            # Two old Signals fold into one identity under the new rules: the older keeps it.
            conflicts.append(str(signal_id))
            continue
        taken[current] = str(signal_id)
        changed += current != old_identity
        aliases.append((current, str(signal_id), str(source_id), canonical))
    if aliases:
        # An alias equal to the Signal's own identity only marks it as checked at `version`.
        # `now`: the run's clock. None only from the collection's dedupe stage, which does not
        # hand its clock down yet (core/collect/collector.py): the real time.
        recorded = now if now is not None else datetime.now(UTC)
        stored_signals.insert_aliases(con, aliases, version, recorded)
    if conflicts:
        log.warning("re-key: %d Signals share an identity with an older one", len(conflicts))
    return Rekey(version, len(aliases), changed, tuple(conflicts))


def _recanonicalize(url: str) -> str:
    try:
        return identity.canonicalize_url(url)
    except ValueError:
        return url  # recorded before a rule that now refuses it: keep the recorded form
