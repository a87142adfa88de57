"""Make the tables of README.md beside this file (run by hand, with the code of the commit it names).

Usage, from the repository's root: ``.venv/bin/python -m tests.data.legacy_tables.make OUT``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.runners.replay import discard
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.spark.session import get_spark
from tests.helpers import kafka_rows, orders_config


def main(out: Path) -> None:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    spark = get_spark("legacy", {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
    values = []
    for i in range(10):
        if i % 5 == 3:
            values.append(b"\xff")  # decode fails: 3, 8
        elif i % 5 == 4:
            values.append(b'{"amount": 1}')  # no order_id: 4, 9
        else:
            values.append(b'{"order_id":"g1-%d","amount":%d}' % (i, i))
    spark.createDataFrame(kafka_rows(values), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(out / "source"))
    cfg = parse_config(orders_config(out, pipeline="legacy"))
    Pipeline.from_config(cfg, spark, listeners=[]).run()
    discard(Pipeline.from_config(cfg, spark, listeners=[]), "offset = 8", reason="fixture")
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
