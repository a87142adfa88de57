"""``quarantine run``: a pipeline's run (batch, or streaming for a streaming source), then its summary."""

from __future__ import annotations

from quarantine.command_logging import HOLDS
from quarantine.commands.configured import load, tables_text
from quarantine.commands.invocation import Invocation
from quarantine.pipeline import Pipeline

__all__ = ["handle"]


def handle(call: Invocation) -> int:
    """Run the config's pipeline, print its summary and tables; exit code 0 (a failed run raises)."""
    config = load(call)
    # a batch run's summary lists each breach: its log line is not shown too (a stream's is)
    HOLDS.breaches = not config.source.streaming
    summary = Pipeline.from_config(config).run()
    print(summary.render())
    print(tables_text(config))
    if summary.records_quarantined:
        print(f"next: quarantine inspect --conf {call.args.conf}")
    return 0
