"""The store's schema, for both backends, as an append-only list of migrations applied in order
at first connection (core/store/connection.py on the DuckDB file, core/store/postgres.py on a
PostgreSQL schema).

A migration is never edited once released: a change of the schema, or of what a stored key
means, is a new entry (and SCHEMA_VERSION moves with it). Its `schema` is SQL both engines read
as written, bar one type: DuckDB's unsigned 64-bit integer (simhash, inode, size), which
PostgreSQL lacks; the text names it `{ubigint}` and `Migration.schema_sql` spells it for the
engine. A `backfill` converts rows a DuckDB file held before the migration. It may use DuckDB's
own functions and runs on DuckDB only: the migrations that have one are older than the
PostgreSQL backend (version 11), whose schema is created from empty tables, so there is nothing
to convert there. From version 11 on, a migration's data steps belong in `schema`, in SQL both
engines read (migration 13's copy of `signals` is one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SCHEMA_VERSION = 15

Engine = Literal["duckdb", "postgresql"]

# The one column type the engines spell differently. NUMERIC(20) holds every unsigned 64-bit
# value; the PostgreSQL connection reads its whole numbers back as int, as DuckDB does.
UBIGINT: dict[Engine, str] = {"duckdb": "UBIGINT", "postgresql": "NUMERIC(20)"}


@dataclass(frozen=True)
class Migration:
    """One schema version: its DDL for both engines, and DuckDB's conversion of older rows."""

    version: int
    schema: str
    backfill: str = ""

    def schema_sql(self, engine: Engine) -> str:
        """The DDL as `engine` reads it (the `{ubigint}` type spelled for it)."""
        return self.schema.format(ubigint=UBIGINT[engine])

    def sql(self, engine: Engine) -> str:
        """Every statement this migration runs on `engine`."""
        if engine == "duckdb" and self.backfill:
            return self.schema_sql(engine) + self.backfill
        return self.schema_sql(engine)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        """
        CREATE TABLE collections (
            collection_id VARCHAR PRIMARY KEY,
            dagster_run_id VARCHAR,
            trigger VARCHAR NOT NULL,
            as_of TIMESTAMPTZ NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ,
            downtime_from TIMESTAMPTZ,
            overdue INTEGER, due INTEGER, passed INTEGER, failed INTEGER, skipped INTEGER,
            created INTEGER, reused INTEGER, updated INTEGER, duplicates INTEGER, rejected INTEGER,
            report_json VARCHAR
        );
        CREATE TABLE fetch_attempts (
            attempt_id VARCHAR PRIMARY KEY,
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            fetched_at TIMESTAMPTZ NOT NULL,
            requested_url VARCHAR NOT NULL,
            final_url VARCHAR,
            outcome VARCHAR NOT NULL,
            http_status INTEGER,
            conditional BOOLEAN NOT NULL,
            etag VARCHAR,
            last_modified VARCHAR,
            validators_changed BOOLEAN,
            body_sha256 VARCHAR,
            bytes BIGINT NOT NULL,
            duration_ms DOUBLE PRECISION NOT NULL,
            redirects INTEGER NOT NULL,
            error_class VARCHAR,
            error_message VARCHAR,
            retry_after_s DOUBLE PRECISION
        );
        CREATE INDEX fetch_attempts_source ON fetch_attempts (source_id, fetched_at);
        CREATE TABLE item_observations (
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            observed_in_run_at TIMESTAMPTZ NOT NULL,
            identity VARCHAR,
            source_item_id VARCHAR,
            canonical_url VARCHAR,
            observed_at TIMESTAMPTZ,
            content_hash VARCHAR,
            outcome VARCHAR NOT NULL,
            signal_id VARCHAR,
            reason VARCHAR
        );
        CREATE INDEX item_observations_identity ON item_observations (identity);
        CREATE TABLE signals (
            signal_id VARCHAR PRIMARY KEY,
            identity VARCHAR NOT NULL UNIQUE,
            identity_version INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            source_item_id VARCHAR NOT NULL,
            canonical_url VARCHAR NOT NULL,
            title_key VARCHAR NOT NULL,
            observed_day DATE,
            content_hash VARCHAR NOT NULL,
            simhash {ubigint} NOT NULL,
            first_seen_at TIMESTAMPTZ NOT NULL,
            duplicate_candidate_of VARCHAR,
            file_path VARCHAR NOT NULL,
            UNIQUE (source_id, canonical_url)
        );
        CREATE INDEX signals_content ON signals (source_id, content_hash);
        CREATE INDEX signals_title_day ON signals (title_key, observed_day);
        CREATE TABLE signal_revisions (
            signal_id VARCHAR NOT NULL,
            collection_id VARCHAR NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL,
            content_hash VARCHAR NOT NULL,
            title VARCHAR,
            observed_at TIMESTAMPTZ
        );
        CREATE TABLE feed_state (
            source_id VARCHAR PRIMARY KEY,
            etag VARCHAR,
            last_modified VARCHAR,
            last_body_sha256 VARCHAR,
            last_unconditional_at TIMESTAMPTZ,
            last_attempt_at TIMESTAMPTZ,
            last_success_at TIMESTAMPTZ,
            last_fetch_at TIMESTAMPTZ,
            last_status INTEGER,
            error_state VARCHAR,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            backoff_until TIMESTAMPTZ
        );
        CREATE TABLE dead_letters (
            dead_letter_id VARCHAR PRIMARY KEY,
            collection_id VARCHAR,
            source_id VARCHAR NOT NULL,
            stage VARCHAR NOT NULL,
            error_class VARCHAR NOT NULL,
            message VARCHAR NOT NULL,
            attempt INTEGER NOT NULL,
            status VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            decided_at TIMESTAMPTZ,
            decision VARCHAR
        );
        CREATE TABLE cleanup_runs (
            cleanup_id VARCHAR PRIMARY KEY,
            closed_at TIMESTAMPTZ NOT NULL,
            week VARCHAR,
            deleted INTEGER NOT NULL,
            bytes BIGINT NOT NULL,
            retained INTEGER NOT NULL
        );
        """,
    ),
    Migration(
        2,
        # Per-attempt metrics known only after the commit (items, backoff state), and the
        # collection a dead letter's replay ran in.
        """
        ALTER TABLE fetch_attempts ADD COLUMN check_outcome VARCHAR;
        ALTER TABLE fetch_attempts ADD COLUMN items_parsed INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_new INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_duplicate INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_rejected INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN consecutive_failures INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN backoff_until TIMESTAMPTZ;
        ALTER TABLE dead_letters ADD COLUMN replay_collection_id VARCHAR;
        """,
    ),
    Migration(
        3,
        # Identity aliases (re-key after an identity rule change) and single-column lookup
        # keys: DuckDB answers an equality on one ART-indexed column with an index scan, but
        # scans the whole table for a composite index or a conjunction, so every dedupe
        # lookup is one equality on one of these. Simhash bands: four 16-bit slices of the
        # simhash; two simhashes within 3 bits share at least one slice (pigeonhole).
        """
        CREATE TABLE identity_aliases (
            identity VARCHAR PRIMARY KEY,
            signal_id VARCHAR NOT NULL,
            identity_version INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            canonical_url VARCHAR NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX identity_aliases_signal ON identity_aliases (signal_id);
        CREATE INDEX identity_aliases_url ON identity_aliases (canonical_url);
        CREATE INDEX signals_canonical_url ON signals (canonical_url);
        CREATE INDEX signals_content_hash ON signals (content_hash);
        CREATE INDEX signals_title_key ON signals (title_key);
        CREATE TABLE simhash_bands (
            band_key INTEGER NOT NULL,
            signal_id VARCHAR NOT NULL,
            simhash {ubigint} NOT NULL,
            first_seen_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX simhash_bands_key ON simhash_bands (band_key);
        CREATE INDEX simhash_bands_signal ON simhash_bands (signal_id);
        """,
        """
        INSERT INTO simhash_bands
            SELECT b * 65536 + ((simhash >> (16 * b)) & 65535)::INTEGER, signal_id, simhash,
                first_seen_at
            FROM signals, range(4) AS t(b);
        """,
    ),
    Migration(
        4,
        # What the evidence audits learned from each Signal file, keyed by its name and stat
        # (core/vault/facts.py): the checks after a collection parse only new or changed
        # files. A cache: losing it (a rebuilt database) only means every file is read once
        # more.
        """
        CREATE TABLE audit_signal_files (
            name VARCHAR PRIMARY KEY,
            ino {ubigint} NOT NULL,
            size {ubigint} NOT NULL,
            mtime_ns BIGINT NOT NULL,
            declared_id VARCHAR,
            error VARCHAR,
            provenance VARCHAR,
            body_length BIGINT NOT NULL
        );
        """,
    ),
    Migration(
        5,
        # The facts' key gains the inode's change time: a file rewritten at the same size with
        # its mtime put back (`touch -r`, `cp -p`, a sync tool) still changes ctime. The table
        # is a cache, so it starts empty: the next checks read every file once.
        """
        DROP TABLE audit_signal_files;
        CREATE TABLE audit_signal_files (
            name VARCHAR PRIMARY KEY,
            ino {ubigint} NOT NULL,
            size {ubigint} NOT NULL,
            mtime_ns BIGINT NOT NULL,
            ctime_ns BIGINT NOT NULL,
            declared_id VARCHAR,
            error VARCHAR,
            provenance VARCHAR,
            body_length BIGINT NOT NULL
        );
        """,
    ),
    Migration(
        6,
        # The audits become set queries over these facts (core/audit/signal_audits.py), so
        # each file's identity (SignalFile.identity) is stored with them. A declared id is a
        # well-formed Signal id, whose identity is what follows its last hyphen; the few rows
        # without one are dropped and read again at the next check, where Python decides what
        # their names claim. Files that could not be read are now kept too (with their error),
        # and read again at each check.
        """
        ALTER TABLE audit_signal_files ADD COLUMN identity VARCHAR;
        """,
        """
        UPDATE audit_signal_files SET identity = regexp_extract(declared_id, '-([^-]*)$', 1)
            WHERE declared_id IS NOT NULL;
        DELETE FROM audit_signal_files WHERE declared_id IS NULL;
        """,
    ),
    Migration(
        7,
        # Every item accounted for (docs/architecture.md, invariant 14). `check_accounting`: one
        # row per Source check with its outcome counts, what it covered, and whether items may
        # have scrolled out (possible_gap, against the previous check's item_ids: the Source
        # item ids its feed held); the `accounting` audit re-adds them. Item
        # observations gain the outcomes `deferred` and `outside-window`.
        # `duplicate_items`: the identities recorded as a duplicate of a Signal, so the
        # decision stands when the duplicate rules change (only substantive text counts from
        # now on): a known item never becomes a new Signal because a rule changed. Seeded
        # from every duplicate observation recorded so far (its latest Signal).
        # `source_items`: each item identity a Source's feed was seen to hold, with its first
        # observation date: the Source's publishing rhythm (silent Sources) without scanning
        # every observation of every check.
        """
        CREATE TABLE check_accounting (
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            as_of TIMESTAMPTZ NOT NULL,
            outcome VARCHAR NOT NULL,
            items_parsed INTEGER NOT NULL,
            created INTEGER NOT NULL,
            reused INTEGER NOT NULL,
            updated INTEGER NOT NULL,
            duplicates INTEGER NOT NULL,
            rejected INTEGER NOT NULL,
            deferred INTEGER NOT NULL,
            outside_window INTEGER NOT NULL,
            late INTEGER NOT NULL,
            possible_gap BOOLEAN NOT NULL,
            coverage_from TIMESTAMPTZ,
            window_from TIMESTAMPTZ,
            newest_observed_at TIMESTAMPTZ,
            item_ids VARCHAR[],
            PRIMARY KEY (collection_id, source_id)
        );
        CREATE INDEX check_accounting_source ON check_accounting (source_id);
        CREATE TABLE duplicate_items (
            identity VARCHAR PRIMARY KEY,
            signal_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            canonical_url VARCHAR,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE source_items (
            identity VARCHAR PRIMARY KEY,
            source_id VARCHAR NOT NULL,
            observed_at TIMESTAMPTZ,
            first_seen_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX source_items_source ON source_items (source_id);
        """,
        """
        INSERT INTO duplicate_items
            SELECT identity, arg_max(signal_id, observed_in_run_at),
                arg_max(source_id, observed_in_run_at), arg_max(canonical_url, observed_in_run_at),
                min(observed_in_run_at)
            FROM item_observations
            WHERE outcome = 'duplicate' AND identity IS NOT NULL AND signal_id IS NOT NULL
                AND signal_id NOT LIKE 'pending:%'
                AND identity NOT IN (SELECT identity FROM signals)
            GROUP BY identity;
        INSERT INTO source_items
            SELECT identity, arg_min(source_id, observed_in_run_at),
                arg_min(observed_at, observed_in_run_at), min(observed_in_run_at)
            FROM item_observations WHERE identity IS NOT NULL
            GROUP BY identity;
        """,
    ),
    Migration(
        8,
        # The publisher's own lower bound on the next check (Cache-Control max-age, RSS <ttl>),
        # set by every answered check; empty when the publisher said nothing.
        """
        ALTER TABLE feed_state ADD COLUMN polite_until TIMESTAMPTZ;
        """,
    ),
    Migration(
        9,
        # Field evidence: for an item of an html, json or jsonfeed Source, which CSS
        # selector or JMESPath expression produced each of its fields, and what of the match
        # was read (text, attr:href, attr:datetime, value). One row per observed item and
        # field, written in the commit transaction with the item's observation, so every
        # title, link and date of such a Signal can be traced to the Source's own markup.
        """
        CREATE TABLE field_evidence (
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            identity VARCHAR NOT NULL,
            field VARCHAR NOT NULL,
            method VARCHAR NOT NULL,
            expression VARCHAR NOT NULL,
            origin VARCHAR NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX field_evidence_identity ON field_evidence (identity);
        """,
    ),
    Migration(
        10,
        # Page extraction: the page of each Signal of a `fullText: page-extraction`
        # Source, from pending to its end state, and robots.txt per origin with its expiry. No
        # page text is stored here: it lives only in Temporary Content.
        """
        CREATE TABLE page_state (
            signal_id VARCHAR PRIMARY KEY,
            source_id VARCHAR NOT NULL,
            page_url VARCHAR NOT NULL,
            title VARCHAR NOT NULL,
            signal_created_at TIMESTAMPTZ NOT NULL,
            observed_at TIMESTAMPTZ,
            status VARCHAR NOT NULL,
            reason VARCHAR,
            attempts INTEGER NOT NULL,
            last_attempt_at TIMESTAMPTZ,
            collection_id VARCHAR,
            final_url VARCHAR,
            http_status INTEGER,
            bytes BIGINT,
            text_bytes BIGINT,
            extractor VARCHAR
        );
        CREATE INDEX page_state_source ON page_state (source_id);
        CREATE TABLE robots_cache (
            origin VARCHAR PRIMARY KEY,
            fetched_at TIMESTAMPTZ NOT NULL,
            expires_at TIMESTAMPTZ NOT NULL,
            http_status INTEGER,
            verdict VARCHAR NOT NULL,
            body VARCHAR NOT NULL
        );
        """,
    ),
    Migration(
        11,
        # The Signals folder as the last full listing saw it, plus the names the pipeline's
        # own commits added since (core/vault/folder_state.py): what lets a collection and the
        # per-collection checks trust the index and the stored facts without listing the
        # folder when its directory mtime has not moved.
        """
        CREATE TABLE vault_folder_state (
            folder VARCHAR PRIMARY KEY,
            mtime_ns BIGINT NOT NULL,
            entries BIGINT NOT NULL,
            fingerprint {ubigint} NOT NULL,
            verified_at_ns BIGINT NOT NULL,
            temp_files BIGINT NOT NULL
        );
        """,
    ),
    Migration(
        12,
        # Items a Source's include/exclude rule dropped, counted per check (invariant 14); each
        # one is an item_observations row with outcome `filtered` and the rule as its reason.
        """
        ALTER TABLE check_accounting ADD COLUMN filtered INTEGER DEFAULT 0;
        """,
    ),
    Migration(
        13,
        # What a Signal says is what the bytes said (docs/architecture.md, "Faithful to the
        # bytes"). Two items of one Source whose links differ only by fragment are two
        # Signals with one canonical URL, so `signals` trades UNIQUE (source_id,
        # canonical_url) for UNIQUE (source_id, canonical_url, link_fragment), where
        # `link_fragment` is the fragment that tells an item apart: its link's, else that of
        # an http(s) id (DuckDB drops no constraint, so the table is copied; nor does it
        # alter an indexed table, so the two indexes at the end are dropped and made again
        # around their new column). The secondary key "same canonical URL in the Source"
        # compares the fragment too. For the rows so far it comes from the id (the index
        # never held the link; `radar index rebuild` reads it from the file's `itemUrl`).
        # Duplicates recorded only because a link-standing id's fragment was dropped are
        # forgotten: those items were never in the vault, and the next check gives them
        # their own Signal. `field_evidence` keeps the raw text behind a value (a feed date
        # that could not be read); `check_accounting` counts the undated items of each check
        # (always eligible: never silent).
        """
        CREATE TABLE signals_v12 (
            signal_id VARCHAR PRIMARY KEY,
            identity VARCHAR NOT NULL UNIQUE,
            identity_version INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            source_item_id VARCHAR NOT NULL,
            canonical_url VARCHAR NOT NULL,
            title_key VARCHAR NOT NULL,
            observed_day DATE,
            content_hash VARCHAR NOT NULL,
            simhash {ubigint} NOT NULL,
            first_seen_at TIMESTAMPTZ NOT NULL,
            duplicate_candidate_of VARCHAR,
            file_path VARCHAR NOT NULL,
            link_fragment VARCHAR NOT NULL DEFAULT '',
            UNIQUE (source_id, canonical_url, link_fragment)
        );
        INSERT INTO signals_v12
            SELECT *, CASE WHEN lower(source_item_id) LIKE 'http://%#%'
                    OR lower(source_item_id) LIKE 'https://%#%'
                THEN substr(source_item_id, strpos(source_item_id, '#') + 1) ELSE '' END
            FROM signals;
        DROP TABLE signals;
        ALTER TABLE signals_v12 RENAME TO signals;
        CREATE INDEX signals_content ON signals (source_id, content_hash);
        CREATE INDEX signals_title_day ON signals (title_key, observed_day);
        CREATE INDEX signals_canonical_url ON signals (canonical_url);
        CREATE INDEX signals_content_hash ON signals (content_hash);
        CREATE INDEX signals_title_key ON signals (title_key);
        DELETE FROM duplicate_items WHERE identity IN (
            SELECT d.identity FROM duplicate_items d
            JOIN signals s ON s.signal_id = d.signal_id AND s.canonical_url = d.canonical_url
            JOIN item_observations o ON o.identity = d.identity AND o.outcome = 'duplicate'
            WHERE (lower(o.source_item_id) LIKE 'http://%#%'
                    OR lower(o.source_item_id) LIKE 'https://%#%')
                AND substr(o.source_item_id, strpos(o.source_item_id, '#') + 1) <> s.link_fragment
        );
        DROP INDEX field_evidence_identity;
        ALTER TABLE field_evidence ADD COLUMN raw_text VARCHAR;
        CREATE INDEX field_evidence_identity ON field_evidence (identity);
        DROP INDEX check_accounting_source;
        ALTER TABLE check_accounting ADD COLUMN undated INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX check_accounting_source ON check_accounting (source_id);
        """,
    ),
    Migration(
        14,
        # Each Signal file's facts say whether it is marked as temporary content, so the
        # retention audit judges the Signals folder from the facts (read again only for new or
        # changed files) instead of opening every file at every check. The rows so far have
        # no answer (NULL): the next check reads each of their files again, as it reads a
        # file that could not be read (core/store/facts.py).
        """
        ALTER TABLE audit_signal_files ADD COLUMN temporary_text BOOLEAN;
        """,
    ),
    Migration(
        15,
        # A collection's report, recorded a slice at a time: each slice's commit after the
        # first adds its report here (and its counts to the collection's row) instead of
        # reading and writing the whole report again, which grew with the square of the
        # slices. The report reads as the row's merged with its parts in order; the
        # collection's last step writes it whole into the row and drops the parts
        # (core/store/collections.py).
        """
        CREATE TABLE collection_slices (
            collection_id VARCHAR NOT NULL,
            part INTEGER NOT NULL,
            report_json VARCHAR NOT NULL,
            PRIMARY KEY (collection_id, part)
        );
        """,
    ),
)
