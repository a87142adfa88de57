"""json: fields the schema does not declare are schema drift, counted (issue 34, defect 6).

They used to be dropped silently. Now each record holding one is counted in the
``schema-drift-records`` metric (per stage, observed in the data pass), the run summary
names the fields and how many records held each, and ``undeclared_fields: quarantine``
sends such records to quarantine (``UndeclaredField``) instead of dropping the fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from quarantine.batch.chain import apply_stages
from quarantine.config import StageSpec, parse_config
from quarantine.errors import ConfigError
from quarantine.metrics.cells import MetricNames
from quarantine.pipeline import Pipeline
from quarantine.schema import KAFKA_SOURCE_SCHEMA
from quarantine.stages import build_stage as from_spec
from quarantine.stages.decode import DecodeUtf8
from quarantine.stages.json import JsonParse
from tests.helpers import kafka_df, kafka_rows, orders_config
from tests.support.readme import block

SCHEMA = StructType([StructField("name", StringType()), StructField("n", IntegerType())])
#: two records with undeclared fields (three fields between them), one without, one malformed
VALUES = [b'{"name": "a", "n": 1, "extra": 1, "more": [1]}', b'{"name": "b", "extra": null}',
          b'{"name": "c", "n": 3}', b"{oops"]


def _parse(spark: Any, values: list[bytes], *, undeclared_fields: str) -> list[Any]:
    stages = [DecodeUtf8("decode"), JsonParse("parse", SCHEMA, undeclared_fields=undeclared_fields)]
    return [r.parse for r in apply_stages(kafka_df(spark, values), stages).orderBy("offset").collect()]


def test_undeclared_fields_are_dropped_by_default(spark: Any) -> None:
    rows = _parse(spark, VALUES, undeclared_fields="drop")
    assert [r.result.asDict() if r.result else r.error.error_class for r in rows] == [
        {"name": "a", "n": 1}, {"name": "b", "n": None}, {"name": "c", "n": 3}, "MalformedJson"
    ]


def test_undeclared_fields_quarantine_sends_records_with_them_to_quarantine_naming_the_fields(spark: Any) -> None:
    rows = _parse(spark, VALUES, undeclared_fields="quarantine")
    assert [(r.error.error_class, r.error.message) if r.error else r.result.name for r in rows] == [
        ("UndeclaredField", "undeclared fields 'extra', 'more'; the schema declares name, n"),
        ("UndeclaredField", "undeclared field 'extra'; the schema declares name, n"),
        "c",
        ("MalformedJson", "malformed JSON (5 chars); expected a JSON object, found {oops"),
    ]


def test_options_undeclared_fields_is_drop_quarantine_or_ignore() -> None:
    def spec(**options: Any) -> StageSpec:
        return StageSpec(name="parse", type="json", options={"schema": "name STRING", **options})

    with pytest.raises(ConfigError, match=r"drop \| quarantine \| ignore"):
        from_spec(spec(undeclared_fields="keep"))


def _run(spark: Any, d: Path, **options: Any) -> Any:
    cfg = orders_config(d)
    cfg["metrics"] = {"table": str(d / "metrics")}
    cfg["stages"][1]["options"] = {"schema": "order_id STRING, amount DOUBLE", **options}
    rows = kafka_rows([b'{"order_id": "1", "amount": 1, "coupon": "X"}', b'{"order_id": "2", "amount": 2}',
                       b'{"order_id": "3", "coupon": null, "gift": true}', b"{oops"])
    spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA).write.format("delta").save(str(d / "source"))
    return Pipeline.from_config(parse_config(cfg), spark).run()


def test_records_with_undeclared_fields_are_counted_and_named_in_the_run_summary(spark: Any, table_dir: Path) -> None:
    summary = _run(spark, table_dir)
    assert (summary.records_ok, summary.records_quarantined) == (3, 1)  # drift is counted, not quarantined
    (batch,) = summary.batches
    assert batch.metrics[MetricNames.SCHEMA_DRIFT_RECORDS.value] == 2
    assert batch.metrics["schema-drift-records/stage/parse"] == 2
    assert batch.schema_drift == {"parse": {"coupon": 2, "gift": 1}}
    assert "  schema drift at parse: 2 record(s) with undeclared fields: coupon (2), gift (1)" in summary.render()
    metrics = spark.read.format("delta").load(str(table_dir / "metrics"))
    drift = metrics.where(f"metric = '{MetricNames.SCHEMA_DRIFT_RECORDS.value}'").collect()
    assert [(r["stage"], r["value"]) for r in drift] == [("parse", 2.0)]


def test_the_readmes_undeclared_fields_quarantine_option_quarantines_drift(spark: Any, table_dir: Path) -> None:
    stage = yaml.safe_load(block("json-options").body)["stages"][0]
    summary = _run(spark, table_dir, strings=stage["options"]["strings"],
                   undeclared_fields=stage["options"]["undeclared_fields"])
    assert (summary.records_ok, summary.records_quarantined) == (1, 3)
    assert summary.batches[0].metrics["schema-drift-records/stage/parse"] == 2
    quarantine = spark.read.format("delta").load(str(table_dir / "quarantine"))
    assert sorted(r["error_class"] for r in quarantine.collect()) == ["MalformedJson", "UndeclaredField",
                                                                      "UndeclaredField"]


def test_undeclared_fields_ignore_drops_them_uncounted_without_reading_the_keys(spark: Any, table_dir: Path) -> None:
    summary = _run(spark, table_dir, undeclared_fields="ignore")
    assert (summary.records_ok, summary.records_quarantined) == (3, 1)
    assert summary.batches[0].metrics.get("schema-drift-records/stage/parse", 0) == 0
    assert "schema drift" not in summary.render()
    stage = JsonParse("parse", SCHEMA, undeclared_fields="ignore")
    plan = apply_stages(kafka_df(spark, VALUES), [DecodeUtf8("decode"), stage])._jdf.queryExecution().optimizedPlan()
    assert "json_object_keys" not in plan.toString()
