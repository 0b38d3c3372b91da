"""`make run` on a fresh clone leaves `git status` clean: the demo vault is tracked as
data/vault-template/ and copied to the ignored data/vault/ by `make run`, and everything the
collection writes (health keys in Source files, the `.base` views, Signals, locks, DuckDB,
the Dagster home) stays out of tracked files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss

REPO_ROOT = Path(__file__).resolve().parents[1]
# What the clone's `make run` must not see from the test process: the clone's own paths apply.
OWN_PATH_VARIABLES = (
    "RADAR_VAULT",
    "RADAR_DB",
    "RADAR_STORE_URL",
    "DAGSTER_HOME",
    "PYTEST_ADDOPTS",
)


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout}{proc.stderr}"
    return proc.stdout


@pytest.mark.slow
def test_make_run_on_a_fresh_clone_leaves_git_status_clean(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    root = Path(_run("git", "rev-parse", "--show-toplevel", cwd=REPO_ROOT).strip())
    clone = tmp_path / "clone"
    _run("git", "clone", "--quiet", "--no-local", str(root), str(clone), cwd=tmp_path)
    assert not (clone / "data" / "vault").exists()  # a fresh clone has only the template

    # This test's venv stands in for the clone's .venv (make would build one: minutes): its
    # `radar` imports the clone's own package through PYTHONPATH, so REPO_ROOT is the clone.
    # The stamp, newer than the clone's lock file, tells make the venv is up to date.
    stamp = tmp_path / "installed"
    stamp.touch()
    later = time.time() + 3600
    os.utime(stamp, (later, later))
    env = {k: v for k, v in os.environ.items() if k not in OWN_PATH_VARIABLES}
    env |= {"PYTHONPATH": str(clone), "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1"}
    make = ["make", "--no-print-directory", f"BIN={Path(sys.executable).parent}", f"STAMP={stamp}"]

    # The step of `make run` that makes the vault, alone first: offline, the production
    # Sources would reach for the internet, so they are pointed at the loopback server (half
    # answer with a feed and validators, half fail), which writes every health key there is.
    _run(*make, "data/vault/Radar/Sources", cwd=clone, env=env)
    sources = sorted((clone / "data/vault/Radar/Sources").glob("*.md"))
    template = sorted((clone / "data/vault-template/Radar/Sources").glob("*.md"))
    assert [p.name for p in sources] == [p.name for p in template] and sources
    production = [p for p in sources if re.search(r"^url: https://", p.read_text(), re.M)]
    assert production, "the demo vault ships production Sources"
    feed_headers = {"Content-Type": "application/rss+xml; charset=utf-8"}
    for n, path in enumerate(production):
        url = feed_server.url(f"/missing-{n}.xml")
        if n % 2 == 0:
            item = {"title": f"t{n}", "guid": f"g{n}", "link": f"https://example.com/{n}"}
            url = feed_server.add(
                f"/feed-{n}.xml", rss([item]), headers=feed_headers | {"ETag": f'"e{n}"'}
            )
        text = re.sub(r"^url: .*$", f"url: {url}", path.read_text(), count=1, flags=re.M)
        path.write_text(text, encoding="utf-8")

    output = _run(*make, "run", cwd=clone, env=env)
    failing = len(production) // 2
    counts = re.search(r"^Done: (\d+) passed, (\d+) failed, (\d+) skipped", output, re.M)
    assert counts, output
    passed = int(counts[1])
    assert (int(counts[2]), int(counts[3])) == (failing, 0), output
    assert f"Still failing: {failing} Sources" in output, output
    # Again at once: the failed Sources are in their backoff, skipped, and still failing; the
    # closing lines say so and never that every Source passed.
    again = _run(*make, "run", cwd=clone, env=env)
    counts = re.search(r"^Done: (\d+) passed, (\d+) failed, (\d+) skipped", again, re.M)
    assert counts and int(counts[2]) == 0 and int(counts[3]) >= failing, again
    assert int(counts[1]) + int(counts[3]) == passed + failing, again
    assert f"Still failing: {failing} Sources" in again and "Sources passed" not in again

    # The collection did write its runtime state into the clone ...
    vault = clone / "data/vault"
    fm, _ = split_frontmatter(production[0].read_text(encoding="utf-8"))
    assert fm["lastSuccessAt"] and fm["etag"] == '"e0"', fm
    fm, _ = split_frontmatter(production[1].read_text(encoding="utf-8"))
    assert fm["lastAttemptAt"] and fm["errorState"], fm
    assert (vault / "Radar/Signals.base").is_file() and (vault / "Radar/Sources.base").is_file()
    assert list((vault / "Radar/Signals").glob("*.md"))
    assert (clone / "data/radar.duckdb").is_file() and (clone / "data/dagster_home").is_dir()
    # ... and none of it is in a tracked file, nor an untracked one git would list.
    assert _run("git", "status", "--porcelain", cwd=clone) == ""
    assert _run("git", "ls-files", "data/vault", cwd=clone) == ""
