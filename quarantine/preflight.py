"""A config checked as a run would check it, without starting Spark: ``quarantine validate``.

The stages are built (types parsed by :mod:`quarantine.ddl`, expectation suites checked
without Great Expectations: :mod:`quarantine.expectations.gx_catalog`), the error handlers
too, a path-named Delta source's schema is read from its log, and this Python and the
installed pyspark are held against the support matrix. Apart from
:mod:`quarantine.assemble`, which builds a run's session, listeners and plan, so that the
check imports no runner, sink or listener (``quarantine validate`` answers at once).
"""

from __future__ import annotations

from pyspark import __version__ as pyspark_version

from quarantine.config import PipelineConfig
from quarantine.errorhandling.handlers import ErrorHandlers
from quarantine.source_contract import check_source_contract
from quarantine.spark.runtime import check_runtime
from quarantine.stage import Stage
from quarantine.stages import build_stages

__all__ = ["check_config"]


def check_config(config: PipelineConfig) -> list[Stage]:
    """Check a config as :func:`assemble` would, without starting Spark (``quarantine validate``).

    Builds the stages (types parsed by :mod:`quarantine.ddl`, expectation suites
    loaded and translated, each stage's input checked by :mod:`quarantine.lineage`)
    and the error handlers, checks a path-named Delta source's schema from its log
    (:mod:`quarantine.source_contract`), and checks this Python and the installed
    pyspark against the support matrix. What only Spark can check, SQL
    expressions (``checks`` ``expr`` rules) and Java regex syntax, is checked when a
    run builds its pipeline.

    Returns:
        The stages the pipeline would run.

    Raises:
        ConfigError: a stage option or handler is bad, a stage reads a column no earlier
            stage declares, or the source is not Kafka-shaped (naming its key).
        QuarantineError: this Python or pyspark is outside the support matrix.
    """
    check_runtime(pyspark_version)
    stages = build_stages(config.stages)
    ErrorHandlers.from_config(config.errors, config.secrets())
    check_source_contract(config.source)
    return stages
