"""What an idle `dagster-daemon` costs, per process and per daemon thread.

    python -m benchmarks.idle LABEL [--workspace module|server] [--yaml PATH] [--stopped]
                              [--n 200] [--warmup 75] [--sample 120] [--py-spy PATH]

N `manual` Sources (never due, nothing to collect) in a fresh vault and DAGSTER_HOME with the
given dagster.yaml (default: the repository's; `--workspace server` takes that one only, as
`start_daemon` copies it). `--workspace server` starts the daemon as the
benchmarks do (`benchmarks.scheduled.start_daemon`: a long-lived code server, a `grpc_server`
workspace); `module` runs `dagster-daemon run -w workspace.yaml` (a `python_module` entry:
the daemon starts a fresh code server every 60 s). `--stopped` stops every sensor and
schedule first (`dagster sensor|schedule stop NAME`, each). After the warm-up the group's CPU is
read from /proc twice, `--sample` seconds apart: each process's own time, what it reaped, and
each thread's time. The daemon runs each of its daemons in a thread named
`dagster-daemon-<TYPE>`; Python does not give its threads' names to the kernel, so the names
come from `py-spy dump` when py-spy is installed (not a dependency: `pip install py-spy`),
else threads are listed by id. Prints JSON: CPU seconds per real hour. Run two labels side by
side (or alternating) to compare on a shared machine; the 1-min load is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import REPO
from benchmarks.scenarios import write_sources
from benchmarks.scheduled import DAGSTER, DAGSTER_DAEMON, start_daemon, stop_and_reap, stop_daemon

TICK = os.sysconf("SC_CLK_TCK")
THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(\w+\): "([^"]*)"', re.MULTILINE)


def _stat(path: Path) -> list[str]:
    return path.read_text().rsplit(")", 1)[1].split()


def group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int(_stat(entry / "stat")[2]) == pgid:
                    members.append(int(entry.name))
    return members


def snapshot(pgid: int) -> dict[int, dict[str, Any]]:
    """Per live member of the group: its command, own and reaped CPU, and each thread's CPU."""
    snap: dict[int, dict[str, Any]] = {}
    for pid in group_members(pgid):
        with contextlib.suppress(OSError, IndexError):
            fields = _stat(Path(f"/proc/{pid}/stat"))
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            threads: dict[int, float] = {}
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, IndexError):
                    t = _stat(task / "stat")
                    threads[int(task.name)] = (int(t[11]) + int(t[12])) / TICK
            snap[pid] = {
                "cmd": " ".join(Path(a.decode()).name for a in argv[:3] if a),
                "own": (int(fields[11]) + int(fields[12])) / TICK,
                "reaped": (int(fields[13]) + int(fields[14])) / TICK,
                "threads": threads,
            }
    return snap


def thread_names(py_spy: str | None, pids: list[int]) -> dict[int, str]:
    names: dict[int, str] = {}
    if not py_spy:
        return names
    for pid in pids:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            argv = [py_spy, "dump", "--pid", str(pid)]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
            names.update({int(m.group(1), 0): m.group(2) for m in THREAD.finditer(out)})
    return names


def per_hour(
    before: dict[int, dict[str, Any]],
    after: dict[int, dict[str, Any]],
    seconds: float,
    names: dict[int, str],
) -> dict[str, Any]:
    scale = 3600 / seconds
    processes: list[dict[str, Any]] = []
    threads: dict[str, float] = {}
    total = 0.0
    for pid, now in after.items():
        was = before.get(pid, {"own": 0.0, "reaped": 0.0, "threads": {}})
        own, reaped = now["own"] - was["own"], now["reaped"] - was["reaped"]
        total += own + reaped
        processes.append(
            {"pid": pid, "cmd": now["cmd"], "own": own * scale, "reaped": reaped * scale}
        )
        for tid, cpu in now["threads"].items():
            spent = (cpu - was["threads"].get(tid, 0.0)) * scale
            if spent > 0:
                key = f"{now['cmd']} :: {names.get(tid, f'thread {tid}')}"
                threads[key] = threads.get(key, 0.0) + spent
    return {
        "group_cpu_s_per_h": round(total * scale, 1),
        "processes": [
            {k: round(v, 1) if isinstance(v, float) else v for k, v in p.items()} for p in processes
        ],
        "threads_s_per_h": dict(
            sorted(((k, round(v, 1)) for k, v in threads.items()), key=lambda kv: -kv[1])
        ),
        "gone_pids": [pid for pid in before if pid not in after],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("label")
    ap.add_argument("--workspace", choices=("module", "server"), default="server")
    ap.add_argument("--yaml", default=str(REPO / "dagster.yaml"))
    ap.add_argument("--stopped", action="store_true")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=float, default=75)
    ap.add_argument("--sample", type=float, default=120)
    ap.add_argument("--py-spy", default=shutil.which("py-spy"))
    args = ap.parse_args()
    if args.workspace == "server" and Path(args.yaml).resolve() != REPO / "dagster.yaml":
        raise SystemExit("--workspace server runs the repository's dagster.yaml (start_daemon)")
    root = Path(tempfile.mkdtemp(prefix=f"idle-{args.label}-"))
    home = root / "dagster_home"
    home.mkdir()
    write_sources(
        root / "vault", [f"http://127.0.0.1:9/{i}" for i in range(args.n)], "", ["manual"]
    )
    env = dict(
        os.environ,
        RADAR_VAULT=str(root / "vault"),
        RADAR_DB=str(root / "radar.duckdb"),
        DAGSTER_HOME=str(home),
        RADAR_ALLOWED_PRIVATE_HOSTS="127.0.0.1",
    )
    shutil.copyfile(args.yaml, home / "dagster.yaml")
    workspace = str(REPO / "workspace.yaml")
    with (root / "daemon.log").open("wb") as log:
        if args.stopped:
            from radar_pipeline.definitions import defs

            repository = defs.get_repository_def()
            for kind, instigators in (
                ("sensor", repository.sensor_defs),
                ("schedule", repository.schedule_defs),
            ):
                for instigator in instigators:
                    argv = [str(DAGSTER), kind, "stop", instigator.name, "-w", workspace]
                    subprocess.run(argv, env=env, cwd=REPO, stdout=log, stderr=log, check=True)
        load = [os.getloadavg()[0]]
        if args.workspace == "server":
            daemon = start_daemon(env, log)
            pgid = daemon.pgid
        else:
            proc = subprocess.Popen(
                [str(DAGSTER_DAEMON), "run", "-w", workspace],
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            pgid = proc.pid
        try:
            time.sleep(args.warmup)
            before, t0 = snapshot(pgid), time.monotonic()
            time.sleep(args.sample)
            after, seconds = snapshot(pgid), time.monotonic() - t0
            load.append(os.getloadavg()[0])
            names = thread_names(args.py_spy, list(after))
        finally:
            if args.workspace == "server":
                stop_daemon(daemon)
            else:
                stop_and_reap(proc)
    result = {
        "label": args.label,
        "workspace": args.workspace,
        "yaml": args.yaml,
        "stopped": args.stopped,
        "sample_s": round(seconds, 1),
        "load_1min_before_after": [round(x, 2) for x in load],
        **per_hour(before, after, seconds, names),
    }
    shutil.rmtree(root, ignore_errors=True)
    sys.stdout.write(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
