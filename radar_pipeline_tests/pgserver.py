"""A throwaway PostgreSQL server on 127.0.0.1, for the tests and benchmarks of the team profile.

`throwaway_server()` runs Debian's server binaries (the newest `/usr/lib/postgresql/*/bin`) on
a free loopback port, with its data directory and socket in a new temp folder, and removes
both on every way out of the `with` block (its end, an exception, Ctrl-C, SIGTERM while it
holds the main thread). PostgreSQL refuses to run as root: as root the server runs as the
`postgres` system user (created when missing), as `make test-postgres` does. `setpriv
--pdeathsig` makes the server die with the thread that started it, so even a SIGKILLed
harness leaves no server behind (only its temp folder). Without the binaries it raises
`ServerUnavailable(NO_BINARIES)`: callers skip with that reason.

The server runs with PostgreSQL's defaults (fsync on, synchronous commit), so what it costs is
what a real server costs, bar the network: the clients reach it over loopback TCP with a
password (scram-sha-256), as workers reach a team's server.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from radar_pipeline_tests.daemonkit import free_port

BINARIES_GLOB = "/usr/lib/postgresql/*/bin"
NO_BINARIES = "no PostgreSQL server binaries"
SERVER_USER = "postgres"  # the system user the server runs as when we are root
USER = "radar"  # the database superuser initdb creates
READY_TIMEOUT_S = 60.0
_TICKS = os.sysconf("SC_CLK_TCK")


class ServerUnavailable(RuntimeError):
    """No server can be started here (the reason is the message)."""


def server_binaries() -> Path | None:
    """The newest installed server's bin folder, or None."""
    found = [
        p
        for p in Path("/").glob(BINARIES_GLOB.lstrip("/"))
        if p.parent.name.isdigit() and (p / "initdb").is_file() and (p / "postgres").is_file()
    ]
    return max(found, key=lambda p: int(p.parent.name), default=None)


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server: where it listens, its superuser's password, its process."""

    port: int
    password: str
    pid: int  # the postmaster
    data_dir: Path

    def url(self, database: str) -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def new_database(self, name: str) -> str:
        """Create the (empty) database `name`; its URL."""
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def cpu_seconds(self) -> float:
        """CPU (user + sys) the server's processes have used so far: the postmaster with the
        backends it reaped, and its live children (each connection is a backend process)."""
        total = _process_cpu(self.pid)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            fields = _stat_fields(stat)
            if fields and int(fields[1]) == self.pid:
                total += _cpu_of(fields)
        return total


@contextmanager
def throwaway_server(settings: Mapping[str, str] | None = None) -> Iterator[PostgresServer]:
    """Start a server (extra `-c` settings: `settings`), yield it, remove it and its folder."""
    binaries = server_binaries()
    if binaries is None:
        raise ServerUnavailable(NO_BINARIES)
    as_user = _run_as()
    work = Path(tempfile.mkdtemp(prefix="radar-pg."))
    proc: subprocess.Popen[bytes] | None = None
    try:
        with _sigterm_exits():
            if as_user:
                _chown(work)
            password = secrets.token_hex(16)
            data = work / "data"
            _initdb(binaries, as_user, work, data, password)
            port = free_port()
            options = {
                "listen_addresses": "127.0.0.1",
                "port": str(port),
                "unix_socket_directories": str(work),
                "max_connections": "200",
                **(settings or {}),
            }
            argv = [str(binaries / "postgres"), "-D", str(data)]
            for key, value in options.items():
                argv += ["-c", f"{key}={value}"]
            with open(work / "server.log", "wb") as log:
                proc = subprocess.Popen(
                    _as(as_user, dies_with_parent=True) + argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C in the terminal reaches us, not it
                )
            server = PostgresServer(port, password, proc.pid, data)
            _wait_ready(server, proc, work / "server.log")
            yield server
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # immediate shutdown: nothing here is kept
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def _initdb(binaries: Path, as_user: bool, work: Path, data: Path, password: str) -> None:
    pwfile = work / "pw"
    pwfile.write_text(password + "\n", "utf-8")
    if as_user:
        _chown(pwfile)
    try:
        done = subprocess.run(
            [
                *_as(as_user),
                str(binaries / "initdb"),
                *("-D", str(data), "-U", USER, f"--pwfile={pwfile}", "-E", "UTF8"),
                *("--auth-local=trust", "--auth-host=scram-sha-256"),
            ],
            capture_output=True,
            text=True,
        )
    finally:
        pwfile.unlink()
    if done.returncode != 0:
        raise ServerUnavailable(f"initdb failed: {done.stderr.strip()[-400:]}")


def _wait_ready(server: PostgresServer, proc: subprocess.Popen[bytes], log: Path) -> None:
    import psycopg

    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            tail = log.read_text("utf-8", "replace").strip()[-400:]
            raise ServerUnavailable(f"the server exited ({proc.returncode}): {tail}")
        try:
            psycopg.connect(server.url("postgres"), connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline:
                raise ServerUnavailable(
                    f"the server did not answer in {READY_TIMEOUT_S:.0f} s"
                ) from exc
            time.sleep(0.1)


def _run_as() -> bool:
    """Whether the server must run as SERVER_USER (we are root); creates the user if needed."""
    if os.geteuid() != 0:
        return False
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
        )
    return True


def _as(as_user: bool, dies_with_parent: bool = False) -> list[str]:
    """The `setpriv` prefix: switch to SERVER_USER (as root), and with `dies_with_parent` get
    SIGQUIT (immediate shutdown) when the starting thread dies. setpriv sets the signal after
    switching user, which would clear one set before."""
    if shutil.which("setpriv") is None:  # util-linux; Debian always has it
        if as_user:
            raise ServerUnavailable("setpriv (util-linux) is needed to run the server as postgres")
        return []
    prefix = ["setpriv"]
    if as_user:
        prefix += ["--reuid", SERVER_USER, "--regid", SERVER_USER, "--init-groups"]
    if dies_with_parent:
        prefix += ["--pdeathsig", "QUIT"]
    return [*prefix, "--"] if len(prefix) > 1 else []


def _chown(path: Path) -> None:
    entry = pwd.getpwnam(SERVER_USER)
    os.chown(path, entry.pw_uid, entry.pw_gid)


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """While the server runs, SIGTERM (at its default) becomes SystemExit in the main thread,
    so the `finally` above still removes the server and its folder."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stat_fields(stat: Path) -> list[str] | None:
    """/proc/<pid>/stat after the command name: state, ppid, ... (None: the process is gone)."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _cpu_of(fields: list[str]) -> float:
    # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the command name.
    return sum(int(v) for v in fields[11:15]) / _TICKS


def _process_cpu(pid: int) -> float:
    fields = _stat_fields(Path(f"/proc/{pid}/stat"))
    return _cpu_of(fields) if fields else 0.0
