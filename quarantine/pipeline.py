"""The facade: a pipeline built from its config that runs itself.

``Pipeline.from_config(config).run()`` is the whole of a job: :class:`Pipeline`
is a :class:`~quarantine.batch.plan.Plan` (the config, the session, the built stages,
the listeners, the error policy and the pure functions a batch runs through),
assembled from its config by :mod:`quarantine.assemble`, that picks its runner:
:func:`~quarantine.runners.batch.run_batch`, or
:func:`~quarantine.runners.streaming.run_stream` for a streaming source. The
runners and the run (:mod:`quarantine.batch.run`) read the plan and never come back
up here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Self

from pyspark.sql import SparkSession

from quarantine.assemble import assemble, default_listeners
from quarantine.batch.plan import Plan, refuse_pipeline_tables
from quarantine.batch.run import Run, start_run
from quarantine.columns import RunKind
from quarantine.config import PipelineConfig
from quarantine.listeners.events import Listeners, RunListener, RunSummary
from quarantine.preflight import check_config
from quarantine.runners import run_batch, run_stream
from quarantine.stage import Stage

__all__ = ["Pipeline", "default_listeners", "refuse_pipeline_tables"]


@dataclass
class Pipeline(Plan):
    """A configured pipeline, ready to run (its plan's attributes are :class:`~quarantine.batch.plan.Plan`'s).

    Build with :meth:`from_config`. Stages may be replaced with Python-built
    ones (:meth:`with_stages`) for notebooks.
    """

    #: Check a config as :meth:`from_config` would, without starting Spark (``quarantine validate``).
    check_config = staticmethod(check_config)

    @classmethod
    def from_config(
        cls,
        config: PipelineConfig,
        spark: SparkSession | None = None,
        *,
        listeners: Iterable[RunListener] | None = None,
        stages: Sequence[Stage] | None = None,
    ) -> Self:
        """The pipeline of ``config``: its stages, listeners and error policy built
        (:func:`quarantine.assemble.assemble`; the same arguments, the same errors)."""
        return assemble(cls, config, spark, listeners=listeners, stages=stages)

    def start_run(
        self, run_id: str | None = None, *, listeners: Listeners | None = None, kind: RunKind = RunKind.RUN
    ) -> Run:
        """A new run of this pipeline (:func:`quarantine.batch.run.start_run`)."""
        return start_run(self, run_id, listeners=listeners, kind=kind)

    def run(self, *, full: bool = False) -> RunSummary:
        """Run the pipeline once: :func:`~quarantine.runners.batch.run_batch`, or
        :func:`~quarantine.runners.streaming.run_stream` for streaming sources.

        Args:
            full: a batch run reads the whole source, not only what was committed (a Delta
                table) or written (a Parquet directory) since the last run
                (:mod:`quarantine.batch.increment`): every record open in quarantine runs again.

        Raises:
            ConfigError: ``target.written_by`` is ``pipeline``: a declarative pipeline's
                updates write these tables, not a run.
        """
        refuse_pipeline_tables(self, "quarantine run")
        return run_stream(self) if self.config.source.streaming else run_batch(self, full=full)
