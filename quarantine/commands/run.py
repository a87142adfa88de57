"""``quarantine run``: a pipeline's run (batch, or streaming for a streaming source), then its summary."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from quarantine.commands.invocation import Command, Invocation
from quarantine.commands.options import add_config

if TYPE_CHECKING:
    from quarantine.config import PipelineConfig
    from quarantine.listeners.events import RunSummary

__all__ = ["COMMAND"]


def _arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser)
    parser.add_argument(
        "--full", action="store_true",
        help="a batch run reads its whole source, not what was committed since the last run: every record "
        "open in quarantine runs again",
    )


def _handle(call: Invocation) -> int:
    """Run the config's pipeline, print its summary and tables; exit code 0 (a failed run raises)."""
    from quarantine.command_logging import HOLDS
    from quarantine.commands.configured import load, tables_text
    from quarantine.ops.nothing_new import nothing_new
    from quarantine.pipeline import Pipeline

    config = load(call)
    # a batch run's summary lists each breach: its log line is not shown too (a stream's is)
    HOLDS.breaches = not config.source.streaming
    unchanged = None if call.args.full else nothing_new(config)
    if unchanged is not None:  # answered from the Delta logs: no JVM started
        print(_nothing_new_summary(config, unchanged).render())
        print(tables_text(config))
        return 0
    summary = Pipeline.from_config(config).run(full=call.args.full)
    print(summary.render())
    print(tables_text(config))
    if summary.records_quarantined:
        print(f"next: quarantine inspect --conf {call.args.conf}")
    return 0


def _nothing_new_summary(config: PipelineConfig, note: str) -> RunSummary:
    """The summary of a batch run that found nothing new without starting Spark (no batch ran)."""
    import datetime as dt
    import uuid

    from quarantine.listeners.events import RunInfo, RunStatus, RunSummary

    run = RunInfo(
        pipeline=config.pipeline, run_id=uuid.uuid4().hex, source=config.source.location,
        config=config.redacted(), started_at=dt.datetime.now(dt.UTC),
    )
    return RunSummary(run=run, batches=(), status=RunStatus.SUCCEEDED, notes=(note,))


COMMAND = Command(
    help="run a pipeline from a YAML config",
    examples=(
        "quarantine run --conf data/demo/orders_demo.yml",
        "quarantine run --conf conf/local.yml --set source.path=/data/orders_raw",
    ),
    arguments=_arguments,
    handle=_handle,
)
