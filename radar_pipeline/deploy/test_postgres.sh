#!/usr/bin/env bash
# `make test-postgres`: a private PostgreSQL server on 127.0.0.1 (Debian's packages), the team
# profile's Dagster instance on it, and the scale-out tests (daemon-launched runs) against it.
# The server, its data directory and its socket are removed on every exit path.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=.venv/bin
started=$(date +%s)

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(pg_bin)" ] || [ ! -x "$(pg_bin)/initdb" ]; then
  echo "test-postgres: installing PostgreSQL from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
PGBIN=$(pg_bin)

# PostgreSQL refuses to run as root: run the server as the `postgres` system user then.
AS=()
if [ "$(id -u)" = 0 ]; then
  id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  AS=(runuser -u postgres --)
fi

work=$(mktemp -d /tmp/radar-pg.XXXXXX)
cleanup() {
  if [ -f "$work/data/postmaster.pid" ]; then
    "${AS[@]}" "$PGBIN/pg_ctl" -D "$work/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ "${#AS[@]}" -eq 0 ] || chown postgres "$work"

port=$("$BIN/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
password=$("$BIN/python" -c 'import secrets; print(secrets.token_hex(16))')
printf '%s\n' "$password" >"$work/pw"
[ "${#AS[@]}" -eq 0 ] || chown postgres "$work/pw"

"${AS[@]}" "$PGBIN/initdb" -D "$work/data" -U radar --pwfile="$work/pw" -E UTF8 \
  --auth-local=trust --auth-host=scram-sha-256 >"$work/initdb.log"
rm -f "$work/pw"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$work/data" -l "$work/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $work -c max_connections=200" start >/dev/null
"${AS[@]}" "$PGBIN/createdb" -h "$work" -p "$port" -U radar radar_dagster
"${AS[@]}" "$PGBIN/createdb" -h "$work" -p "$port" -U radar radar_store
echo "test-postgres: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"

export DAGSTER_PG_HOST=127.0.0.1 DAGSTER_PG_PORT="$port" DAGSTER_PG_USER=radar
export DAGSTER_PG_PASSWORD="$password" DAGSTER_PG_DB=radar_dagster RADAR_TEST_POSTGRES=1
status=0
"$BIN/pytest" -q -p no:cacheprovider --durations=0 radar_pipeline_tests/scaleout || status=$?

# The provenance store on the same server (RADAR_STORE_URL): every store test and every
# behaviour test that reads or changes the store (the `radar_env` fixture switched to
# PostgreSQL; they read it through conftest.env_store), and the two-worker tests. The slow
# ones (32: whole Dagster runs and 15 byte-for-byte note renderings) are left to the DuckDB run:
# the store operations they call are the ones the others call, and they cost about 4 minutes
# here. The DuckDB-only cases (the file itself, its migrations) skip themselves here.
# On pytest-xdist workers (as `make test`), each with a database of its own on this server
# (conftest.store_url_under_test); the scale-out tests above share one Dagster instance, so they
# and the two-worker tests below run in one process.
export RADAR_TEST_STORE_URL="postgresql://radar:$password@127.0.0.1:$port/radar_store"
"$BIN/pytest" -q -p no:cacheprovider --durations=10 -n "${TEST_WORKERS:-auto}" --dist worksteal \
  -m "not slow" radar_pipeline_tests/test_store_backends.py radar_pipeline_tests/test_bulk_writes.py \
  radar_pipeline_tests/test_scale_paths.py radar_pipeline_tests/test_dedupe_batch.py \
  radar_pipeline_tests/test_collect.py radar_pipeline_tests/test_dedupe_pipeline.py \
  radar_pipeline_tests/test_accounting.py radar_pipeline_tests/test_deadletters.py \
  radar_pipeline_tests/test_evidence.py radar_pipeline_tests/test_vault_incremental.py \
  radar_pipeline_tests/test_store_migrate.py radar_pipeline_tests/test_sources_try.py \
  radar_pipeline_tests/test_checks.py \
  radar_pipeline_tests/test_acquisition.py \
  radar_pipeline_tests/test_page_extraction.py \
  radar_pipeline_tests/test_html_json_sources.py \
  radar_pipeline_tests/test_cleanup_pipeline.py \
  radar_pipeline_tests/test_perf_paths.py \
  radar_pipeline_tests/test_coverage.py \
  radar_pipeline_tests/test_filters.py \
  radar_pipeline_tests/test_feed_manners.py \
  radar_pipeline_tests/test_hostile_signals.py \
  radar_pipeline_tests/test_recovery.py \
  radar_pipeline_tests/test_sensors.py \
  radar_pipeline_tests/test_schedule_blocks.py \
  radar_pipeline_tests/test_bytes_faithful.py \
  radar_pipeline_tests/test_report_golden.py \
  radar_pipeline_tests/test_history.py \
  radar_pipeline_tests/test_cli.py \
  radar_pipeline_tests/test_obsidian.py \
  radar_pipeline_tests/test_opml.py \
  radar_pipeline_tests/test_sources_add.py \
  radar_pipeline_tests/test_dagster.py \
  radar_pipeline_tests/test_files.py \
  || status=$?
"$BIN/pytest" -q -p no:cacheprovider --durations=0 radar_pipeline_tests/scaleout/test_shared_store.py \
  || status=$?
# The fault suite's two workers on this store, one SIGKILLed per trial (2 trials; `make faults`: 12).
"$BIN/pytest" -q -p no:cacheprovider --durations=0 radar_pipeline_tests/faults/test_team_workers.py || status=$?
echo "test-postgres: $(( $(date +%s) - started )) s (server setup, tests, teardown)"
exit "$status"
