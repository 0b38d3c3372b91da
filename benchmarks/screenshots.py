"""`make screenshots` (`python -m benchmarks.screenshots [--port N] [--out DIR]`): the Dagster
UI as a person sees it, photographed by headless Chromium for docs/operations.md.

Re-runnable: everything lives in a temp directory (vault, DuckDB file, DAGSTER_HOME) and is
removed after; only the PNGs are written, to docs/screenshots/ by default. The vault is the
demo vault a new user's `make run` leaves (a copy of data/vault-template: five production
Sources and three fixture Sources), with one change so that no request leaves the machine:
each production Source's `url` points at a closed loopback port, so it fails with a network
error as it does offline. The steps:

1. `radar collect --all` collects every Source (a CLI collection: it makes the partitions,
   and runs its checks itself) before the UI starts, as `make run` does: Failed 5 /
   Materialized 3;
2. `dagster dev` starts on 127.0.0.1 (the port from `--port`, else from the kernel) with the
   temp home, every schedule and sensor running, as `make ui` starts them;
3. a backfill of one failing Source is launched the way the asset page's "Materialize"
   dialog launches it (`launchPartitionBackfill`); it fails, and the script waits until the
   checks run that follows it made each check's newest execution an evaluation again (the
   Checks tab after a failed backfill);
4. headless Chromium (`/usr/bin/chromium`, Debian's package: `apt-get install -y chromium`)
   opens each page of PAGES at 1400x1000 and is driven over the DevTools protocol (the
   `websockets` package, already in the lock as the webserver's): the picture is taken once
   the page's text holds every marker of PAGES (the JavaScript app has its GraphQL answers)
   and a few seconds more have passed. `--screenshot` with `--virtual-time-budget` alone does
   not do: the UI's polling keeps some pages from ever settling, and Chromium never returns.

Each PNG should still be looked at after a run.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from benchmarks.measure import REPO
from radar_pipeline_tests.daemonkit import DagsterDev, free_port, wait_for
from radar_pipeline_tests.faults.farm import RadarHome

BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
TEMPLATE = REPO / "data" / "vault-template"
FAILING = "openai-news"  # a production Source of the demo vault: the one backfilled
BACKFILL = (FAILING,)
# Name -> (path of the page, texts the page shows once loaded, each at least once or, as
# `text*N`, N times; `{backfill}` is the backfill's id): what docs/operations.md shows.
PAGES = {
    "signals-partitions": (
        f"/assets/signals?view=partitions&partition={FAILING}",
        ("Failed (5)", "Materialized (3)", FAILING),
    ),
    "signals-checks": ("/assets/signals?view=checks", ("accounting", "on_cadence")),
    # Runs > Backfills (Dagster 1.13 redirects the old /overview/backfills here).
    "backfills": ("/runs?view=backfills", ("{backfill}",)),
    # Its rows load one by one: every schedule's and sensor's kind line is the last to come.
    "automation": (
        "/automation",
        ("Scheduled*4", "Standard sensor*7"),
    ),
}
# Every schedule's and sensor's recent ticks: a failed one is drawn red on the Automation page,
# so the script names it (and its error) and fails, rather than commit a picture of it.
AUTOMATION_TICKS = """
query($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    __typename
    ... on Repository {
      schedules { name scheduleState { ...Ticks } }
      sensors { name sensorState { ...Ticks } }
    }
  }
}
fragment Ticks on InstigationState {
  ticks(limit: 50) { status error { message cause { message } } }
}
"""
WIDTH, HEIGHT = 1400, 1000
LOAD_TIMEOUT_S = 180  # a loaded 2-core machine answers the UI's queries slowly
SETTLE_S = 10  # after the markers appear: late requests (each row's status), the layout


def write_vault(home: RadarHome) -> list[str]:
    """The demo vault, each production Source's `url` on a closed loopback port; returns
    every Source id."""
    shutil.copytree(TEMPLATE, home.vault, dirs_exist_ok=True)
    closed = free_port()
    ids = []
    for note in sorted((home.vault / "Radar" / "Sources").glob("*.md")):
        text = note.read_text(encoding="utf-8")
        ids.append(note.stem)
        if "\nurl: http" in text:
            head, _, rest = text.partition("\nurl: ")
            rest = rest.split("\n", 1)[1]
            url = f"http://127.0.0.1:{closed}/{note.stem}.xml"
            note.write_text(f"{head}\nurl: {url}\n{rest}", encoding="utf-8")
    return ids


def radar(env: dict[str, str], *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(BIN / "radar"), *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode not in (0, 2):
        raise RuntimeError(f"radar {' '.join(args)}: {proc.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def settled(dev: DagsterDev, quiet_s: float) -> bool | None:
    """True once no run is queued or going and none ended in the last `quiet_s` seconds (the
    sensors that follow a run have had their tick)."""
    with dev.instance() as instance:
        records = instance.get_run_records()
    if any(not r.dagster_run.is_finished for r in records):
        return None
    ended = max((r.end_time or 0.0 for r in records), default=0.0)
    return True if time.time() - ended >= quiet_s else None


CHECKS = """
query($key: AssetKeyInput!) {
  assetNodeOrError(assetKey: $key) { ... on AssetNode { assetChecksOrError {
    ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } } } } }
}
"""


def checks_evaluated_after(dev: DagsterDev, run_ids: set[str]) -> bool | None:
    """True once each check's newest execution on `signals` is an evaluation (passed or
    failed) by a run other than `run_ids` (the backfill's)."""
    node = dev.graphql(CHECKS, {"key": {"path": ["signals"]}})["assetNodeOrError"]
    for check in node["assetChecksOrError"]["checks"]:
        execution = check["executionForLatestMaterialization"]
        if execution is None or execution["runId"] in run_ids:
            return None
        if execution["status"] not in ("SUCCEEDED", "FAILED"):
            return None
    return True


def backfill_runs(dev: DagsterDev, backfill_id: str) -> set[str]:
    import dagster as dg

    with dev.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    return {r.run_id for r in runs}


def backfill_done(dev: DagsterDev, backfill_id: str) -> bool | None:
    with dev.instance() as instance:
        backfill = instance.get_backfill(backfill_id)
    return True if backfill is not None and backfill.status.value != "REQUESTED" else None


class Chromium:
    """Headless Chromium on a DevTools port from the kernel, with a throwaway profile."""

    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
                f"--user-data-dir={profile}",
                f"--window-size={WIDTH},{HEIGHT}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Chromium writes the port it took into the profile: "<port>\n<browser path>".
        active = profile / "DevToolsActivePort"
        port = wait_for("Chromium's DevTools port", lambda: _first_line(active), 60, 0.2)
        self.devtools = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def shoot(self, url: str, markers: tuple[str, ...], out: Path) -> bool:
        """Open `url` in a new tab; once its text holds every marker, and SETTLE_S more
        seconds, write the PNG of the window to `out`. After LOAD_TIMEOUT_S without them the
        picture is taken as it is, and False returned."""
        request = urllib.request.Request(f"{self.devtools}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as answer:
            target = json.load(answer)
        with connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            session = DevTools(ws)
            session.call(
                "Emulation.setDeviceMetricsOverride",
                width=WIDTH,
                height=HEIGHT,
                deviceScaleFactor=1,
                mobile=False,
            )
            session.call("Page.navigate", url=url)
            check = " && ".join(_marker_test(m) for m in markers)
            deadline = time.monotonic() + LOAD_TIMEOUT_S
            loaded = False
            while not loaded and time.monotonic() < deadline:
                loaded = session.evaluate(f"!!document.body && {check}")
                time.sleep(1)
            time.sleep(SETTLE_S)
            shot = session.call("Page.captureScreenshot", format="png")
            out.write_bytes(base64.b64decode(shot["data"]))
        close = urllib.request.Request(f"{self.devtools}/json/close/{target['id']}")
        with urllib.request.urlopen(close, timeout=30):
            pass
        return loaded


class DevTools:
    """One DevTools protocol session: numbered calls, their answers (events are skipped)."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=120))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def evaluate(self, expression: str) -> bool:
        answer = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return bool(answer.get("result", {}).get("value"))


def _marker_test(marker: str) -> str:
    """The JavaScript test that the page's text holds `marker` (`text*N`: N times)."""
    text, _, count = marker.partition("*")
    needed = int(count) if count else 1
    return f"(document.body.innerText.split({json.dumps(text)}).length - 1 >= {needed})"


def _first_line(path: Path) -> str | None:
    try:
        return path.read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the UI's port (0: from the kernel)")
    parser.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install -y chromium", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="radar-screenshots-"))
    missing: list[str] = []  # pages photographed before they showed their markers
    failed_ticks: list[str] = []  # schedules' and sensors' failed ticks, with their errors
    try:
        home = RadarHome(root)
        every = write_vault(home)
        env = home.environ()
        dev = DagsterDev(home.home, env, root / "dagster-dev.log")
        if args.port:
            dev.port, dev.base = args.port, f"http://127.0.0.1:{args.port}"
        collected = radar(env, "collect", "--all")
        print(
            f"radar collect --all: passed {collected['passed']}, failed {collected['failed']}",
            flush=True,
        )
        with dev:
            print(f"dagster dev on {dev.base}, home {home.home}", flush=True)
            dev.wait_partitions(every, timeout=300)
            backfill_id = dev.launch_backfill(list(BACKFILL))
            wait_for("the backfill", lambda: backfill_done(dev, backfill_id), 600, 2)
            runs = backfill_runs(dev, backfill_id)
            wait_for(
                "the checks after the backfill",
                lambda: checks_evaluated_after(dev, runs),
                600,
                5,
            )
            # The schedule retries the failing Sources at their backoffs' ends: a quiet
            # moment between those runs, if one comes (the pictures do not need it).
            with contextlib.suppress(AssertionError):
                wait_for("the runs to settle", lambda: settled(dev, 30), 300, 5)
            print(f"backfill {backfill_id} ended; partitions {dev.partition_statuses()}")
            # What a person's "Skip" on the UI's first-visit "Join the Dagster community"
            # dialog sends; otherwise that dialog covers every picture.
            dev.graphql("mutation SetNuxSeen { setNuxSeen }")
            chromium = Chromium(root / "chromium")
            try:
                for name, (path, texts) in PAGES.items():
                    target = out / f"{name}.png"
                    markers = tuple(t.format(backfill=backfill_id) for t in texts)
                    if chromium.shoot(dev.base + path, markers, target):
                        print(f"{target}: {target.stat().st_size} bytes", flush=True)
                    else:
                        missing.append(name)
                        print(f"{target}: taken without {markers} on the page", flush=True)
            finally:
                chromium.close()
            # After the pictures: a tick that failed before the last one was taken is named.
            failed_ticks = tick_failures(dev)
            for line in failed_ticks:
                print(f"failed tick: {line}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if missing or failed_ticks else 0


def tick_failures(dev: DagsterDev) -> list[str]:
    """Each failed tick of a schedule or sensor so far, as "<name>: <its error (cause)>"."""
    location, repository = dev.location()
    selector = {"repositoryLocationName": location, "repositoryName": repository}
    repo = dev.graphql(AUTOMATION_TICKS, {"selector": selector})["repositoryOrError"]
    assert repo["__typename"] == "Repository", repo
    instigators = [(s["name"], s["scheduleState"]) for s in repo["schedules"]] + [
        (s["name"], s["sensorState"]) for s in repo["sensors"]
    ]
    return [
        f"{name}: {first_line(tick['error'])}"
        for name, state in instigators
        for tick in state["ticks"]
        if tick["status"] == "FAILURE"
    ]


def first_line(error: dict[str, Any] | None) -> str:
    """An error's first line, and its cause's where it has one (the schedule's own exception
    under Dagster's "Error occurred during the execution of ..." wrapper)."""
    if not error:
        return "(no error recorded)"
    line = (error["message"].strip().splitlines() or [""])[0]
    return f"{line} (cause: {first_line(error['cause'])})" if error.get("cause") else line


if __name__ == "__main__":
    sys.exit(main())
