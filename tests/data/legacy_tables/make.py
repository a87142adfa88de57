"""Run today's main (before the content fingerprint) to make the legacy tables fixture."""
import shutil, sys
from pathlib import Path
from quarantine.session import get_spark
from quarantine.config import parse_config
from quarantine.pipeline import Pipeline
from quarantine.replay import discard
from quarantine.schema import KAFKA_SOURCE_SCHEMA
sys.path.insert(0, "/work/main")
from tests.helpers import kafka_rows, orders_config

out = Path(sys.argv[1]); shutil.rmtree(out, ignore_errors=True); out.mkdir(parents=True)
spark = get_spark("legacy", {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"})
vals = []
for i in range(10):
    if i % 5 == 3: vals.append(b"\xff")          # decode fails: 3, 8
    elif i % 5 == 4: vals.append(b'{"amount": 1}')  # no order_id: 4, 9
    else: vals.append(b'{"order_id":"g1-%d","amount":%d}' % (i, i))
spark.createDataFrame(kafka_rows(vals), KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(out / "source"))
cfg = parse_config(orders_config(out, pipeline="legacy"))
s = Pipeline.from_config(cfg, spark, listeners=[]).run()
print(s.records_in, s.records_ok, s.records_quarantined)
discard(Pipeline.from_config(cfg, spark, listeners=[]), "offset = 8", reason="fixture")
print(spark.read.format("delta").load(str(out/"quarantine")).select("offset","status","error_class").orderBy("offset").collect())
spark.stop()
