"""`core.errors.explain`: every failure as one line naming its root cause and what to do, from
real exceptions (a real device that is full, real DuckDB files cut short or held by another
process, real sockets) translated where they are caught into the project's classes (the
store's, the fetch's, the vault writes'); and the Dagster ops raising that line as their
failure."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest

from radar_pipeline.core.acquire.fetch import fetch_error_of
from radar_pipeline.core.errors import (
    FetchError,
    StoreError,
    StoreLocked,
    StoreUnreadable,
    VaultDiskFault,
    VaultError,
    cause_chain,
    explain,
)
from radar_pipeline.core.files import naming
from radar_pipeline.core.store.connection import Store, StoreSettings
from radar_pipeline.core.store.read_only import read_only
from radar_pipeline.defs.collection.failures import failures_as_line, run_failure_line
from radar_pipeline_tests.feedserver import FeedServer


def _raised(action: object) -> BaseException:
    try:
        action()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("nothing raised")


def _one_line(line: str) -> None:
    assert "\n" not in line and not line.endswith(":") and line == line.strip()


def _duckdb_file(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS i FROM range(200000)")
    con.close()
    return path


def test_a_full_device_is_named_with_the_path_when_the_os_gives_one() -> None:
    # /dev/full answers every write with ENOSPC, as a full disk does; a write on a descriptor
    # names no file (the durable write adds it: the fault suite fills a real tmpfs).
    exc = _raised(lambda: Path("/dev/full").write_bytes(b"x" * 10))
    assert explain(exc).line == (
        "no space left on device: path not reported; free space there and run again"
    )
    named = OSError(exc.errno, exc.strerror, "/dev/full")  # type: ignore[attr-defined]
    named.__cause__ = exc
    assert explain(named).line == (
        "no space left on device: /dev/full; free space there and run again"
    )


def test_read_only_and_permission_denied_name_the_path(tmp_path: Path) -> None:
    exc = OSError(30, "Read-only file system", str(tmp_path / ".radar" / "locks" / "a.lock"))
    wrapped = _raised(lambda: _raise_from(VaultError("cannot lock the Source"), exc))
    why = explain(wrapped)
    assert why.error_class == "read-only"
    assert why.line.startswith(f"read-only file system: {tmp_path}/.radar/locks/a.lock; ")


def _raise_from(outer: BaseException, inner: BaseException) -> None:
    raise outer from inner


def _read_t(db: Path) -> None:
    with read_only(db) as con:
        con.execute("SELECT sum(i) FROM t").fetchall()


def test_a_truncated_store_is_unreadable_and_names_rebuild(tmp_path: Path) -> None:
    db = _duckdb_file(tmp_path / "radar.duckdb")
    os.truncate(db, db.stat().st_size // 2)
    exc = _raised(lambda: _read_t(db))
    assert isinstance(exc, StoreUnreadable) and exc.path == db
    why = explain(exc)
    assert why.error_class == "store-unreadable"
    assert why.line == f"store unreadable: {db}; run `radar index rebuild`"
    assert why.root_cause.startswith("IOException: IO Error: Could not read enough bytes")


def test_a_garbage_store_and_a_bad_header_name_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"x" * 5000)
    exc = _raised(lambda: Store(garbage).schema_version())
    assert isinstance(exc, StoreUnreadable)
    assert explain(exc).line == f"store unreadable: {garbage}; run `radar index rebuild`"
    # A header whose checksum fails: DuckDB's message names no file; the StoreError does.
    header = _duckdb_file(tmp_path / "header.duckdb")
    with open(header, "r+b") as handle:
        handle.seek(12)
        handle.write((9999).to_bytes(8, "little"))
    exc = _raised(lambda: Store(header, StoreSettings(lock_timeout_s=0)).schema_version())
    assert isinstance(exc, StoreUnreadable) and exc.path == header
    assert explain(exc).line == f"store unreadable: {header}; run `radar index rebuild`"


def test_a_held_store_is_store_locked_naming_the_holder_pid(tmp_path: Path) -> None:
    db = _duckdb_file(tmp_path / "radar.duckdb")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,sys;c=duckdb.connect({str(db)!r});"
            "print('held',flush=True);sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        exc = _raised(lambda: Store(db, StoreSettings(lock_timeout_s=0)).schema_version())
        read = _raised(lambda: _read_t(db))  # a reader waits its bound, then names it too
    finally:
        holder.communicate("")
    for raised in (exc, read):
        assert isinstance(raised, StoreLocked), raised
        assert raised.holder_pid == holder.pid and raised.holder_process
        why = explain(raised)
        assert why.error_class == "store-locked"
        assert f"store {db} is held by PID {holder.pid} (" in why.line
        assert why.line.endswith("; retry when it has finished")


def _fetched(url: str, timeout: float = 5) -> FetchError:
    """The fetch boundary's translation of httpx's error for `url`."""
    exc = _raised(lambda: httpx.get(url, timeout=timeout))
    assert isinstance(exc, httpx.HTTPError), exc
    return fetch_error_of(exc, timeout)


def test_dns_connect_and_tls_name_the_host(feed_server: FeedServer) -> None:
    dns_error = _fetched("http://nonexistent.invalid/")
    assert dns_error.error_class == "network" and dns_error.host == "nonexistent.invalid"
    dns = explain(dns_error)
    assert dns.error_class == "dns" and "nonexistent.invalid" in dns.line
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = explain(_fetched(f"http://127.0.0.1:{port}/"))
    assert refused.error_class == "connect"
    assert refused.line == "cannot connect to 127.0.0.1: Connection refused; is it up?"
    tls = explain(_fetched(feed_server.base_url.replace("http:", "https:", 1)))
    assert tls.error_class == "tls" and tls.line.startswith("TLS failed with 127.0.0.1: ")
    for why in (dns, refused, tls):
        _one_line(why.line)


def test_a_timeout_names_the_host() -> None:
    with socket.socket() as sock:  # listens, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        error = _fetched(f"http://127.0.0.1:{port}/", timeout=0.2)
    assert error.error_class == "timeout" and error.host == "127.0.0.1"
    why = explain(error)
    assert (why.error_class, why.line) == ("timeout", "timed out reaching 127.0.0.1; retry later")


def test_raw_library_errors_are_not_read_by_explain(tmp_path: Path) -> None:
    # The line comes from the project's classes: an untranslated DuckDB error is a bug's line,
    # its words are read only at the store's boundary.
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"x" * 5000)
    assert explain(_raised(lambda: duckdb.connect(str(garbage)))).error_class == "internal"


def test_a_radar_error_keeps_its_own_line_and_a_bug_is_internal() -> None:
    assert explain(StoreError("it broke")).line == "store: it broke"
    bug = explain(_raised(lambda: {}["missing"]))
    assert bug.error_class == "internal" and bug.line == "KeyError: 'missing'"


def test_the_chain_is_walked_to_the_root_and_a_cycle_is_cut() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert cause_chain(a) == [a, b]


@dg.op
def _op_writing_to_a_full_device() -> None:
    # The durable write's own boundary (`naming`) adds the path a descriptor's write lacks.
    with failures_as_line(), naming(Path("/dev/full")), open("/dev/full", "wb") as handle:
        handle.write(b"x")
        handle.flush()


@dg.job
def _full_device_job() -> None:
    _op_writing_to_a_full_device()


def test_a_full_device_write_leaves_as_a_vault_disk_fault() -> None:
    def write() -> None:
        with naming(Path("/dev/full")), open("/dev/full", "wb") as handle:
            handle.write(b"x")
            handle.flush()

    exc = _raised(write)
    assert isinstance(exc, VaultDiskFault) and isinstance(exc, OSError)
    assert (exc.errno, exc.path, exc.filename) == (28, "/dev/full", "/dev/full")
    assert str(exc) == "vault: No space left on device: /dev/full"


def test_an_op_fails_with_the_root_cause_line(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = _full_device_job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    line = "no space left on device: /dev/full; free space there and run again"
    assert run_failure_line(result) == line
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data
    assert failure.user_failure_data is not None
    assert failure.user_failure_data.description == line
    assert failure.user_failure_data.metadata["error_class"].value == "disk-full"


@pytest.mark.parametrize("text", ["a\n  b:", "  x  :  "])
def test_lines_are_folded_and_never_end_at_a_colon(text: str) -> None:
    _one_line(explain(RuntimeError(text)).line)
