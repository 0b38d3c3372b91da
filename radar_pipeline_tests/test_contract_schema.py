"""The JSON contract: every `radar ... --json` output is what its model (core/contract/)
describes, and the schemas committed under docs/schema/ are the ones the models generate.

Real outputs come from the `radar` entry point run on a real vault, DuckDB file, Dagster
instance and loopback feed server. An output conforms when its model reads it back and writes
the same text again (no key unknown to the model, none missing, each value of its type, the
keys in the printed order) and the committed JSON Schema, read by a validator of its own
(jsonschema, Draft 2020-12), accepts it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from radar_pipeline.cli import main
from radar_pipeline.core.contract.collection import CollectionReport, Counts
from radar_pipeline_tests.contract_schema import OUTPUTS, schema_path, schema_text, stale_files
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_fixture_source, write_source

AS_OF = "2026-12-01T08:00:00Z"


def conformance_problems(command: str, printed: str) -> list[str]:
    """Why `printed` (stdout of `radar <command> --json`) is not its contract's object."""
    data = json.loads(printed)
    committed = json.loads(schema_path(command).read_text("utf-8"))
    problems = [
        f"{command}: schema: {'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in Draft202012Validator(committed).iter_errors(data)
    ]
    declared = set(committed["properties"])
    problems += [f"{command}: key {key!r} not in its schema" for key in set(data) - declared]
    try:
        again = OUTPUTS[command].model_validate(data).json_object()
    except ValidationError as exc:
        return problems + [f"{command}: {error['loc']}: {error['msg']}" for error in exc.errors()]
    if json.dumps(again, indent=2) + "\n" != printed:
        problems.append(f"{command}: reads back as {json.dumps(again)[:300]}")
    return problems


def printed_by(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`radar ARGS --json` through the command's own entry point: (exit code, stdout)."""
    capsys.readouterr()
    code = main([*args, "--json"])
    return code, capsys.readouterr().out


def test_the_committed_schemas_are_the_models() -> None:
    """Regenerate with `python -m radar_pipeline_tests.contract_schema` when a model changes."""
    assert stale_files() == []
    assert all(schema_path(c).read_text("utf-8") == schema_text(c) for c in OUTPUTS)


@pytest.mark.slow
def test_every_real_output_is_its_contract(
    radar_env: dict[str, Path],
    feed_server: FeedServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    vault = radar_env["vault"]
    item = {"title": "t", "guid": "1", "link": "https://example.com/1"}
    write_fixture_source(vault, "fixture", rss([item]))
    write_source(vault, "served", feed_server.add("/served.xml", rss([item])))
    write_source(vault, "broken", feed_server.add("/broken.xml", b"down", status=500))
    write_source(vault, "gone", feed_server.add("/gone.xml", b"gone", status=404))
    opml = tmp_path / "feeds.opml"
    extra = feed_server.add("/extra.xml", rss([item]))
    opml.write_text(
        f'<?xml version="1.0"?><opml version="2.0"><head/><body>'
        f'<outline text="Extra" type="rss" xmlUrl="{extra}"/>'
        f'<outline text="Bad" type="rss" xmlUrl="not a url"/></body></opml>',
        encoding="utf-8",
    )
    outputs: dict[str, str] = {}
    runs = [
        ("sources-validate", ("sources", "validate")),
        ("sources-import", ("sources", "import", str(opml))),
        ("sources-add", ("sources", "add", feed_server.add("/added.xml", rss([item])))),
        ("sources-try", ("sources", "try", "served", "--as-of", AS_OF)),
        ("collect", ("collect", "--all", "--as-of", AS_OF)),
        ("report", ("report",)),
        ("dlq-list", ("dlq", "list")),
    ]
    for command, args in runs:
        _, outputs[command] = printed_by(capsys, *args)
    letters = {d["sourceId"]: d["id"] for d in json.loads(outputs["dlq-list"])["deadLetters"]}
    feed_server.add("/broken.xml", rss([item]))  # back up: its replay passes
    _, outputs["dlq-replay"] = printed_by(capsys, "dlq", "replay", letters["broken"])
    _, outputs["dlq-dismiss"] = printed_by(capsys, "dlq", "dismiss", letters["gone"])
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    _, outputs["cleanup"] = printed_by(capsys, "cleanup", "--as-of", now)
    _, outputs["history-prune"] = printed_by(capsys, "history", "prune", "--as-of", now)
    _, outputs["index-rebuild"] = printed_by(capsys, "index", "rebuild")
    _, outputs["vault-check"] = printed_by(capsys, "vault", "check")

    # Every output but `store migrate` (it needs a PostgreSQL server: test_store_migrate.py).
    assert set(outputs) == set(OUTPUTS) - {"store-migrate"}
    problems = [p for command, text in outputs.items() for p in conformance_problems(command, text)]
    assert problems == []
    # The outputs hold what the scenario made.
    assert json.loads(outputs["collect"])["failed"] == 2
    assert json.loads(outputs["report"])["lastCollection"]["failed"] == 2
    assert json.loads(outputs["dlq-replay"])["source"]["outcome"] == "passed"


def _printed(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2) + "\n"


def test_the_conformance_check_sees_what_is_not_the_contract() -> None:
    report = CollectionReport.counted(
        Counts(), as_of=AS_OF, mode="due", downtime_from=None, overdue=0, due=0
    ).json_object()
    assert conformance_problems("collect", _printed(report)) == []
    unknown = conformance_problems("collect", _printed({**report, "surprise": 1}))
    assert any("'surprise' not in its schema" in p for p in unknown)
    missing = conformance_problems(
        "collect", _printed({k: v for k, v in report.items() if k != "due"})
    )
    assert any("'due' is a required property" in p for p in missing)
    wrong = conformance_problems("collect", _printed({**report, "overdue": "many"}))
    assert any("overdue" in p for p in wrong)
    assert any(p.startswith("collect: schema: overdue:") for p in wrong)
    reordered = conformance_problems("collect", _printed(dict(sorted(report.items()))))
    assert any("reads back as" in p for p in reordered)
