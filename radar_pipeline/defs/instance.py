"""The Dagster instance in DAGSTER_HOME, created once and repaired if a kill cut its birth.

An empty DAGSTER_HOME gets the repository's dagster.yaml, and its storage is created by the
first `DagsterInstance` opened on it. Both happen under one lock file: processes starting
together would otherwise race (one reads a half-copied dagster.yaml, two create the same
SQLite tables: "table ... already exists").

A process killed while that first instance creates its SQLite index
(`history/runs/index.db`) can leave some tables and no schema stamp; every later start then
fails with "Using dynamic partitions definitions requires the dynamic partitions table ...
run `dagster instance migrate`". So the first thing asked of an opened instance is its
`sources` partitions: the public error `DagsterInvalidInvocationError` says the storage is
half-made, and `instance.upgrade()` (what `dagster instance migrate` runs) completes it, once,
still under the lock. `upgrade()` reads every run's shard and grows slow with history, so it
runs only after that error, never as a precaution.

`python -m radar_pipeline.defs.instance` does the same for DAGSTER_HOME before `make ui`
starts `dagster dev` (whose daemon would otherwise meet the broken storage).
"""

from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path

import dagster as dg
import filelock

from radar_pipeline.core.config import REPO_ROOT
from radar_pipeline.core.files import replace
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import environment_settings

BOOTSTRAP_LOCK = ".radar-bootstrap.lock"
LOG = logging.getLogger(__name__)


def open_instance(home: Path) -> dg.DagsterInstance:
    """The instance in `home` (created with the repository's dagster.yaml when empty), with
    a storage every start can use."""
    home.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(home / BOOTSTRAP_LOCK):
        if not (home / "dagster.yaml").exists():
            replace(home / "dagster.yaml", (REPO_ROOT / "dagster.yaml").read_bytes())
        instance = dg.DagsterInstance.from_config(str(home))
        try:
            instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)
        except dg.DagsterInvalidInvocationError as exc:
            LOG.info("the Dagster storage in %s is half-created (%s); completing it", home, exc)
            # Dagster's SQLite upgrade prints its progress to stdout (the JSON of a `--json`
            # command) and progress bars to stderr (where only errors belong): keep both in
            # the log instead.
            progress = io.StringIO()
            with contextlib.redirect_stdout(progress), contextlib.redirect_stderr(progress):
                instance.upgrade(print_fn=LOG.info)
            LOG.info("%s", progress.getvalue().strip())
            instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)  # raises if still broken
        return instance


def main() -> None:
    """Prepare DAGSTER_HOME (default: the repository's data/dagster_home) for `dagster dev`."""
    open_instance(environment_settings().dagster_home).dispose()


if __name__ == "__main__":
    main()
