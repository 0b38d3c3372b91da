"""Every error the Radar raises, by stage.

    RadarError                  base; `stage` names where it happened, the message says the fix
    ├── ConfigError             bad environment or settings (stage "config")
    ├── RegistryError           a Source file cannot become a Source (stage "registry")
    ├── FetchError              the fetch stage refused or failed (stage "fetch");
    │                           `error_class` is one of FETCH_ERROR_CLASSES
    │                           `host` is the request's host when a request was made
    ├── ParseError              the bytes are not a usable feed, page or answer (stage "parse");
    │                           `error_class` is one of PARSE_ERROR_CLASSES
    ├── VaultError              a vault path or file is unsafe or unwritable (stage "vault")
    │   └── VaultDiskFault      the OS refused a vault write: `errno` (ENOSPC, EDQUOT, EROFS,
    │                           EACCES, EPERM) and `path`, the file it concerned
    ├── CleanupRefused          the weekly close refuses to touch a path (stage "cleanup")
    ├── StoreError              the store failed (stage "store"); `path`/`where` name it
    │   ├── StoreLocked         another process holds it; `holder_pid`, `holder_process` when
    │   │                       DuckDB names them
    │   ├── StoreUnreadable     cut short, not a database, a newer format, a failed checksum
    │   └── StoreDiskFault      the OS refused the store's write: `errno` (disk full, read-only,
    │                           permission denied)
    └── CollectionError         a collection could not run or report (stage "collect")

Library errors are translated into these classes where they are caught, with
`raise ... from exc`, and nowhere else reads a library's message text:
httpx in core/acquire/fetch.py (`fetch_error_of`), DuckDB in core/store/connection.py
(`duckdb_error_of`), psycopg in core/store/postgres.py, vault writes' OSError in core/files.py
(`naming`), Dagster's run failures in defs/collection/failures.py.

What a person reads about any failure comes from `explain(exc)`: it walks the chain of causes to
the root and gives one line naming it and what to do (a full disk and its path, a store that
cannot be read, the process holding the store, DNS, connect, TLS), never a framework wrapper.
It reads the project's classes above and the standard library's structured ones (OSError's
`errno` and `filename`, socket.gaierror, ssl.SSLError), never a library's module or words.
The CLI prints it, the Dagster ops raise it as their failure (defs/collection/failures.py), and
the collection records it on each Source a failed run concerned.
"""

from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

FETCH_ERROR_CLASSES = (
    "timeout",
    "network",
    "http-4xx",
    "http-5xx",
    "rate-limited",
    "challenge",
    "gone",
    "too-large",
    "not-a-feed",
    "not-a-page",
    "invalid-xml",
    "not-html",
    "not-json",
    "policy",
)

# Why a fetched body yields no items. `not-a-feed`/`invalid-xml`: an RSS, Atom or JSON Feed
# Source's body; `not-html`/`not-json`: an html/json Source's body is not that format at all;
# `extraction`: the page or answer is intact but the Source's selectors or paths match nothing
# (its markup changed), never "0 items, passed".
PARSE_ERROR_CLASSES = ("not-a-feed", "invalid-xml", "not-html", "not-json", "extraction")

# Failure classes whose backoff is the publisher's own request (Retry-After, a challenge):
# honoured even by explicit runs, like minIntervalSeconds.
PUBLISHER_WAITS = frozenset({"rate-limited", "challenge", "page-blocked"})
# The Source's error state after its page pass met a 403, a 429 or a challenge page: its feed
# check passed, its backoff holds every check (and so every page fetch) back until it ends.
PAGE_BLOCKED = "page-blocked"


class RadarError(Exception):
    """Base of every Radar error."""

    stage = "radar"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.stage}: {self.message}"


class ConfigError(RadarError):
    stage = "config"


class RegistryError(RadarError):
    stage = "registry"


class FetchError(RadarError):
    """A fetch failed; `error_class` is one of FETCH_ERROR_CLASSES."""

    stage = "fetch"

    def __init__(
        self,
        error_class: str,
        message: str,
        *,
        retry_after_s: float | None = None,
        host: str | None = None,
    ) -> None:
        if error_class not in FETCH_ERROR_CLASSES:
            raise ValueError(f"unknown fetch error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class
        self.retry_after_s = retry_after_s
        self.host = host  # the request's host, when the failure met a request

    def __str__(self) -> str:
        return f"fetch: {self.error_class}: {self.message}"


class ParseError(RadarError):
    """The body yields no items; `error_class` is one of PARSE_ERROR_CLASSES."""

    stage = "parse"

    def __init__(self, error_class: str, message: str) -> None:
        if error_class not in PARSE_ERROR_CLASSES:
            raise ValueError(f"unknown parse error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class

    def __str__(self) -> str:
        return f"parse: {self.error_class}: {self.message}"


class VaultError(RadarError):
    stage = "vault"


class VaultDiskFault(VaultError, OSError):
    """The OS refused a write (ENOSPC, EDQUOT, EROFS, EACCES, EPERM) of `path`. Still an
    OSError with `errno`, `strerror` and `filename`, so a caller that handles any OSError of a
    write handles this one as before."""

    def __init__(self, code: int, strerror: str, path: str) -> None:
        OSError.__init__(self, code, strerror, path)
        self.message = f"{strerror}: {path}"
        self.path = path

    def __str__(self) -> str:
        return f"vault: {self.message}"


class CleanupRefused(RadarError):
    stage = "cleanup"


class StoreError(RadarError):
    """The store failed; `path` is the DuckDB file when one is concerned."""

    stage = "store"

    def __init__(self, message: str, *, path: Path | None = None, where: str = "") -> None:
        super().__init__(message)
        self.path = path
        # The store's place for a person: the file, or a PostgreSQL URL without its password.
        self.where = where or (str(path) if path is not None else "the DuckDB file at RADAR_DB")


class StoreLocked(StoreError):
    """Another process holds the store; `holder_pid`/`holder_process` when the database names
    them (DuckDB does, in its message: read once, at core/store/connection.py)."""

    def __init__(
        self,
        message: str,
        *,
        path: Path | None = None,
        where: str = "",
        holder_pid: int | None = None,
        holder_process: str | None = None,
    ) -> None:
        super().__init__(message, path=path, where=where)
        self.holder_pid = holder_pid
        self.holder_process = holder_process


class StoreUnreadable(StoreError):
    """The store cannot be read: cut short, not a database, a newer format, a failed checksum."""


class StoreDiskFault(StoreError):
    """The OS refused the store's write; `errno` is one of ENOSPC, EDQUOT, EROFS, EACCES, EPERM."""

    def __init__(
        self, code: int, message: str, *, path: Path | None = None, where: str = ""
    ) -> None:
        super().__init__(message, path=path, where=where)
        self.errno = code


class CollectionError(RadarError):
    """A collection run could not start, failed as a whole, or left no report."""

    stage = "collect"


# ---- the one line a person reads -----------------------------------------------------------

# Machine faults by errno: the class, what happened (with the path) and what to do.
_OS_FAULTS: dict[int, tuple[str, str, str]] = {
    errno.ENOSPC: ("disk-full", "no space left on device", "free space there and run again"),
    errno.EDQUOT: ("disk-full", "disk quota exceeded", "free space there and run again"),
    errno.EROFS: (
        "read-only",
        "read-only file system",
        "make it writable, or point RADAR_VAULT, RADAR_DB or DAGSTER_HOME elsewhere",
    ),
    errno.EACCES: (
        "permission-denied",
        "permission denied",
        "give the user running radar read and write access there",
    ),
    errno.EPERM: (
        "permission-denied",
        "operation not permitted",
        "give the user running radar read and write access there",
    ),
}
DISK_FAULTS = frozenset(_OS_FAULTS)  # the errnos a disk fault class carries


@dataclass(frozen=True)
class Explanation:
    """A failure as a person reads it: one line naming the root cause and what to do."""

    error_class: str  # disk-full, read-only, permission-denied, store-unreadable, store-locked,
    # dns, connect, tls, timeout; else a RadarError's error class or stage; else "internal"
    line: str  # one line, never ending at a colon, never a framework wrapper's words
    root_cause: str  # the innermost exception as `Type: message`, for logs and metadata


def explain(exc: BaseException) -> Explanation:
    """The root cause of `exc` in one line: walks `__cause__`/`__context__` to the innermost
    exception and names the first machine fault found from there outwards (a full or read-only
    disk with its path, a store that cannot be read or is held, DNS, connect, TLS); failing
    that, the outermost Radar error's own line; failing that, the root exception itself."""
    chain = cause_chain(exc)
    root = chain[-1]
    root_cause = _one_line(f"{type(root).__name__}: {root}")
    for link in reversed(chain):
        found = _machine_fault(link, chain)
        if found is not None:
            return Explanation(found[0], _one_line(found[1]), root_cause)
    radar = next((e for e in chain if isinstance(e, RadarError)), None)
    if radar is not None:
        kind = getattr(radar, "error_class", None) or radar.stage
        return Explanation(str(kind), _one_line(str(radar)), root_cause)
    return Explanation("internal", root_cause, root_cause)


def cause_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what caused it, outermost first: each `__cause__`, else each `__context__`
    not suppressed by `raise ... from None`, else an exception held as the first argument
    (httpcore wraps the socket's error that way, `from None`); a cycle is cut."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in chain):
        chain.append(link)
        held = link.args[0] if link.args and isinstance(link.args[0], BaseException) else None
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__) or held
    return chain


def _machine_fault(link: BaseException, chain: list[BaseException]) -> tuple[str, str] | None:
    """(error class, line) when `link` is a fault of the machine or the network, else None."""
    if isinstance(link, StoreDiskFault) and link.errno in _OS_FAULTS:
        kind, what, todo = _OS_FAULTS[link.errno]
        return kind, f"{what}: {link.where}; {todo}"
    if isinstance(link, StoreLocked):
        who = "another process"
        if link.holder_pid is not None:
            who = f"PID {link.holder_pid} ({link.holder_process or 'a process'})"
        return "store-locked", f"store {link.where} is held by {who}; retry when it has finished"
    if isinstance(link, StoreUnreadable):
        return "store-unreadable", f"store unreadable: {link.where}; run `radar index rebuild`"
    if isinstance(link, TimeoutError | FetchError) and _timed_out(chain):
        # The socket's own timeout inside: the fetch's deadline, not a refusal.
        return "timeout", f"timed out reaching {_host(chain)}; retry later"
    if isinstance(link, socket.gaierror):
        return "dns", f"DNS cannot resolve {_host(chain)}: {link.strerror}; check the URL"
    if isinstance(link, ssl.SSLError):
        reason = getattr(link, "verify_message", None) or link.reason or str(link)
        return "tls", f"TLS failed with {_host(chain)}: {reason}; check the URL's certificate"
    if _over_http(chain) and (
        isinstance(link, ConnectionError | TimeoutError)
        or (isinstance(link, OSError) and link.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH))
    ):
        # Only a request's: a broken pipe to a parse worker is no host's fault.
        return "connect", f"cannot connect to {_host(chain)}: {link.strerror}; is it up?"
    if isinstance(link, OSError) and link.errno in _OS_FAULTS:
        kind, what, todo = _OS_FAULTS[link.errno]
        return kind, f"{what}: {_os_path(chain) or 'path not reported'}; {todo}"
    return None


def _timed_out(chain: list[BaseException]) -> bool:
    return any(isinstance(e, FetchError) and e.error_class == "timeout" and e.host for e in chain)


def _over_http(chain: list[BaseException]) -> bool:
    """Whether the chain met a request: the fetch boundary's FetchError names its host."""
    return any(isinstance(e, FetchError) and e.host for e in chain)


def _os_path(chain: list[BaseException]) -> str | None:
    """The first file name an OSError of the chain reports, root first."""
    for link in reversed(chain):
        if isinstance(link, OSError) and link.filename is not None:
            return str(link.filename)
    return None


def _host(chain: list[BaseException]) -> str:
    """The host the fetch boundary's FetchError of the chain names, else "the host"."""
    hosts = [e.host for e in chain if isinstance(e, FetchError) and e.host]
    return hosts[0] if hosts else "the host"


def _one_line(text: str) -> str:
    """Whitespace folded to single spaces; a trailing colon (a wrapper's) cut."""
    return " ".join(text.split()).rstrip(":").rstrip() or "unknown error"
