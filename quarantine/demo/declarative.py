"""``quarantine init-demo --format declarative``: the manual's declarative pipeline project, with its source.

The repository's ``pipelines/orders/`` (docs/declarative.md) is not in the wheel; this
writes it where a user asks: ``orders.yml`` (the demo's stages, its tables the pipeline's
datasets) and ``spark-pipeline.yml`` (copies of the repository's ship in the package,
``quarantine/demo/conf/declarative/``), ``transformations/orders.py`` (:data:`TRANSFORMATION`)
and, in ``data/source``, the demo's Kafka-shaped order events with poison
(:func:`~quarantine.demo.orders.write_demo_source`), where ``orders.yml`` reads them.

Everything the project keeps stays in its folder: the spec's ``storage:`` (the runtime's
checkpoints; ``spark-pipelines`` needs an absolute URI) is written as the project's own
``storage/`` folder, and the config's editor comment names ``quarantine.schema.json``, which
is written beside it (the repository's copy names the repository's schema).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from pyspark.sql import SparkSession

from quarantine.config import schema_text
from quarantine.demo.orders import write_demo_source

__all__ = ["PROJECT_FILES", "PROJECT_SCHEMA", "TRANSFORMATION", "write_declarative_demo", "write_declarative_project"]

#: The project's files that ship in the package as they are in the repository's ``pipelines/orders/``
#: (the two lines :func:`write_declarative_project` fits to the project's folder aside).
PROJECT_FILES = ("orders.yml", "spark-pipeline.yml")
#: The config's JSON Schema, written beside it for an editor (``quarantine schema --out``'s text).
PROJECT_SCHEMA = "quarantine.schema.json"
#: ``transformations/orders.py``: the one source file of the project (docs/declarative.md's block).
TRANSFORMATION = (
    "from quarantine.declarative import declare\n"
    "\n"
    'declare("orders.yml")  # read from the pipeline\'s root folder (where spark-pipeline.yml is)\n'
)
#: The spec's ``storage:`` line, and the config's editor comment.
_STORAGE = re.compile(r"^storage: .*$", re.M)
_SCHEMA_COMMENT = re.compile(r"^# yaml-language-server: \$schema=.*$", re.M)


def write_declarative_project(out: str | Path) -> Path:
    """Write the project's files into ``out`` (overwriting them); return its config, ``out/orders.yml``.

    The spec's ``storage:`` is ``out/storage`` as an absolute ``file:`` URI, and the config's
    ``$schema`` comment names :data:`PROJECT_SCHEMA`, written beside it: nothing the project
    reads or keeps is outside ``out``.
    """
    root = Path(out).resolve()
    (root / "transformations").mkdir(parents=True, exist_ok=True)
    packaged = resources.files("quarantine.demo").joinpath("conf", "declarative")
    config = packaged.joinpath("orders.yml").read_text(encoding="utf-8")
    spec = packaged.joinpath("spark-pipeline.yml").read_text(encoding="utf-8")
    storage = (root / "storage").as_uri()
    (root / "spark-pipeline.yml").write_text(_STORAGE.sub(lambda _: f"storage: {storage}", spec), encoding="utf-8")
    comment = f"# yaml-language-server: $schema={PROJECT_SCHEMA}"
    (root / "orders.yml").write_text(_SCHEMA_COMMENT.sub(lambda _: comment, config), encoding="utf-8")
    (root / PROJECT_SCHEMA).write_text(schema_text(), encoding="utf-8")
    (root / "transformations" / "orders.py").write_text(TRANSFORMATION, encoding="utf-8")
    return root / "orders.yml"


def write_declarative_demo(
    spark: SparkSession, out: str | Path, records: int = 10_000, *, poison_rate: float = 0.04, seed: int = 7
) -> Path:
    """Write the declarative pipeline project into ``out`` (:func:`write_declarative_project`) and its
    source into ``out/data/source``.

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
    conf = write_declarative_project(out)
    # absolute for Spark: the JVM resolves a relative path against its own start folder
    write_demo_source(spark, str(conf.parent / "data" / "source"), records, poison_rate=poison_rate, seed=seed)
    return conf
