"""A failure of an op as a person reads it: the root cause in one line (`core.errors.explain`),
as the step's `dg.Failure`, so the run's page, the partition's page and the CLI show that line
rather than Dagster's wrapper (`Error occurred while executing op "signals.plan":`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from radar_pipeline.core.errors import explain

# The metadata keys of a failure raised here (also read back from the event log).
ERROR_CLASS = "error_class"
ROOT_CAUSE = "root_cause"


@contextmanager
def failures_as_line() -> Iterator[None]:
    """Around an op's body: any exception that is not Dagster's own control flow leaves as a
    `dg.Failure` whose description is the root cause and what to do, with `error_class` and
    `root_cause` metadata, raised `from` the original (its trace stays in the event log)."""
    try:
        yield
    except (dg.Failure, dg.RetryRequested, dg.DagsterError):
        raise
    except Exception as exc:
        why = explain(exc)
        raise dg.Failure(
            description=why.line,
            metadata={ERROR_CLASS: why.error_class, ROOT_CAUSE: why.root_cause},
            # A full disk or an unreadable store fails the same way on a retry.
            allow_retries=False,
        ) from exc


def run_failure_line(result: dg.ExecuteInProcessResult) -> str:
    """The one line of a failed run: each failed step's description (the explained root cause
    when `failures_as_line` raised it), else the innermost message of its error."""
    lines: list[str] = []
    for event in result.all_events:
        data = event.step_failure_data if event.is_step_failure else None
        if data is None:
            continue
        if data.user_failure_data is not None and data.user_failure_data.description:
            lines.append(data.user_failure_data.description)
        elif data.error is not None:
            error = data.error
            while error.cause is not None:
                error = error.cause
            lines.append(error.message.strip().splitlines()[-1].rstrip(":"))
    return "; ".join(dict.fromkeys(lines)) or "see the run's page in the Dagster UI"
