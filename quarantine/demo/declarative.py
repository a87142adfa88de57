"""``quarantine init-demo --format declarative``: the manual's declarative pipeline project, with its source.

The repository's ``pipelines/orders/`` (docs/declarative.md) is not in the wheel; this
writes it where a user asks: ``orders.yml`` (the demo's stages, its tables the pipeline's
datasets) and ``spark-pipeline.yml`` (copies of the repository's ship in the package,
``quarantine/demo/conf/declarative/``), ``transformations/orders.py`` (:data:`TRANSFORMATION`)
and, in ``data/source``, the demo's Kafka-shaped order events with poison
(:func:`~quarantine.demo.orders.write_demo_source`), where ``orders.yml`` reads them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from pyspark.sql import SparkSession

from quarantine.demo.orders import write_demo_source

__all__ = ["PROJECT_FILES", "TRANSFORMATION", "write_declarative_demo"]

#: The project's files that ship in the package as they are in the repository's ``pipelines/orders/``.
PROJECT_FILES = ("orders.yml", "spark-pipeline.yml")
#: ``transformations/orders.py``: the one source file of the project (docs/declarative.md's block).
TRANSFORMATION = (
    "from quarantine.declarative import declare\n"
    "\n"
    'declare("orders.yml")  # read from the pipeline\'s root folder (where spark-pipeline.yml is)\n'
)


def write_declarative_demo(
    spark: SparkSession, out: str | Path, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7
) -> Path:
    """Write the declarative pipeline project into ``out`` and its source into ``out/data/source``.

    Files already there are overwritten; the source table is replaced.

    Args:
        spark: the session that writes the source.
        out: the project's folder (``spark-pipelines run`` runs from it).
        records: how many order events.
        poison_rate: the fraction of them that are malformed.
        seed: the generator's seed (the same seed writes the same records).

    Returns:
        The project's config, ``out/orders.yml``.
    """
    root = Path(out)
    (root / "transformations").mkdir(parents=True, exist_ok=True)
    packaged = resources.files("quarantine.demo").joinpath("conf", "declarative")
    for name in PROJECT_FILES:
        (root / name).write_bytes(packaged.joinpath(name).read_bytes())
    (root / "transformations" / "orders.py").write_text(TRANSFORMATION, encoding="utf-8")
    # absolute for Spark: the JVM resolves a relative path against its own start folder
    write_demo_source(spark, str((root / "data" / "source").resolve()), records, poison_rate=poison_rate, seed=seed)
    return root / "orders.yml"
